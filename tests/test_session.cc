// Tests of Session (engine/src/session.cc): small models made with ModelBuilder run on the cpu and
// reference backends and match loops written out here; batches match per-sample runs; bad inputs and
// options are infer::Error; the memory plan never overlaps live tensors; runs are repeatable.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend.h"
#include "infer/infer.h"
#include "plan.h"
#include "planner.h"
#include "test_util.h"
#include "zoo.h"

using namespace infer;
using infer::test::random_vector;
using infer::test::rel_error;

namespace {

// conv 1->2 k3 p1 (+bias) -> relu -> maxpool 2 -> flatten -> dense 18->4 (+bias) -> softmax, on 6x6.
struct SmallNet {
  std::vector<float> conv_w = random_vector(2 * 1 * 3 * 3, 11);
  std::vector<float> conv_b = random_vector(2, 12);
  std::vector<float> dense_w = random_vector(4 * 18, 13);
  std::vector<float> dense_b = random_vector(4, 14);

  Model model() const {
    ModelBuilder b("small_net");
    int x = b.input("x", {-1, 1, 6, 6});
    int w = b.constant("conv.w", {2, 1, 3, 3}, conv_w);
    int cb = b.constant("conv.b", {2}, conv_b);
    Conv2DParams conv;
    conv.pad = {1, 1, 1, 1};
    int c = b.node("conv", conv, {x, w, cb});
    int r = b.node("relu", ActivationParams{}, {c});
    Pool2DParams pool;  // max 2x2 stride 2
    int p = b.node("pool", pool, {r});
    int f = b.node("flatten", FlattenParams{}, {p});
    int dw = b.constant("dense.w", {4, 18}, dense_w);
    int db = b.constant("dense.b", {4}, dense_b);
    int d = b.node("dense", DenseParams{}, {f, dw, db});
    int s = b.node("softmax", SoftmaxParams{}, {d});
    b.output(s);
    return Model::from_bytes(b.finish(), "small_net.fb");
  }

  // The same computation for one sample, in double.
  std::vector<float> expected(const float* x) const {
    double conv[2][6][6];
    for (int co = 0; co < 2; ++co)
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
          double acc = conv_b[co];
          for (int ki = 0; ki < 3; ++ki)
            for (int kj = 0; kj < 3; ++kj) {
              int yi = i + ki - 1, xj = j + kj - 1;
              if (yi < 0 || yi >= 6 || xj < 0 || xj >= 6) continue;
              acc += double(conv_w[co * 9 + ki * 3 + kj]) * x[yi * 6 + xj];
            }
          conv[co][i][j] = std::max(acc, 0.0);
        }
    double flat[18];
    for (int co = 0; co < 2; ++co)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          flat[co * 9 + i * 3 + j] = std::max({conv[co][2 * i][2 * j], conv[co][2 * i][2 * j + 1],
                                               conv[co][2 * i + 1][2 * j],
                                               conv[co][2 * i + 1][2 * j + 1]});
    double logits[4], top = -1e300, sum = 0;
    for (int o = 0; o < 4; ++o) {
      logits[o] = dense_b[o];
      for (int k = 0; k < 18; ++k) logits[o] += double(dense_w[o * 18 + k]) * flat[k];
      top = std::max(top, logits[o]);
    }
    for (double& l : logits) sum += (l = std::exp(l - top));
    std::vector<float> out(4);
    for (int o = 0; o < 4; ++o) out[o] = float(logits[o] / sum);
    return out;
  }
};

// Two inputs: s = a + b; out0 = concat(s, a) on channels; out1 = s.
Model two_input_model() {
  ModelBuilder b("two_inputs");
  int a = b.input("a", {-1, 2, 3, 3});
  int c = b.input("b", {-1, 2, 3, 3});
  int s = b.node("add", AddParams{}, {a, c});
  int cat = b.node("concat", ConcatParams{}, {s, a});
  b.output(cat);
  b.output(s);
  return Model::from_bytes(b.finish(), "two_inputs.fb");
}

bool overlaps(const detail::PlannedTensor& x, const detail::PlannedTensor& y) {
  bool live = x.first <= y.last && y.first <= x.last;
  bool memory = x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
  return live && memory && x.bytes > 0 && y.bytes > 0;
}

void check_plan(const Session& session) {
  const detail::Plan& plan = detail::plan_of(session);
  CHECK(plan.report.arena_bytes == session.memory().arena_bytes);
  CHECK(plan.report.arena_bytes >= plan.report.lower_bound_bytes);
  CHECK(plan.report.arena_bytes <= plan.report.naive_bytes);
  const int steps = static_cast<int>(session.nodes().size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const auto& t = plan.tensors[i];
    CAPTURE(t.name);
    CHECK(t.offset % detail::kArenaAlignment == 0);
    CHECK(t.offset + t.bytes <= plan.report.arena_bytes);
    CHECK(t.first >= -1);
    CHECK(t.last <= steps);
    for (size_t j = 0; j < i; ++j) CHECK_FALSE(overlaps(t, plan.tensors[j]));
  }
}

}  // namespace

TEST_CASE("session: conv/relu/pool/flatten/dense/softmax matches the loops, cpu and reference") {
  SmallNet net;
  Model model = net.model();
  for (const char* backend : {"auto", "cpu", "reference"}) {
    CAPTURE(backend);
    SessionOptions options;
    options.backend = backend;
    options.passes.set_all(false);  // the node list checked below is the model's own
    Session session(model, options);
    std::string expected = std::string(backend) == "reference" ? "reference" : "cpu";
#ifdef INFER_WITH_CUDA
    if (std::string(backend) == "auto" && detail::cuda_device_available()) expected = "cuda";
#endif
    CHECK(session.backend() == expected);
    REQUIRE(session.inputs().size() == 1);
    CHECK(session.inputs()[0].shape == Shape{1, 1, 6, 6});
    CHECK(session.outputs()[0].shape == Shape{1, 4});
    REQUIRE(session.nodes().size() == 6);
    CHECK(session.nodes()[0].name == "conv");
    CHECK(session.nodes()[0].op == "conv2d");
    CHECK(session.nodes()[5].op == "softmax");
    for (const NodeInfo& n : session.nodes()) CHECK_FALSE(n.variant.empty());
    if (std::string(backend) == "reference")
      for (const NodeInfo& n : session.nodes()) CHECK(n.variant == "reference");

    Tensor x({1, 1, 6, 6}, random_vector(36, 21));
    auto out = session.run({x});
    REQUIRE(out.size() == 1);
    CHECK(out[0].shape == Shape{1, 4});
    CHECK(rel_error(out[0].data, net.expected(x.data.data())) <= 1e-5);
    float sum = 0;
    for (float v : out[0].data) sum += v;
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
    check_plan(session);
  }
}

TEST_CASE("session: batch 3 rows equal batch-1 runs") {
  SmallNet net;
  Model model = net.model();
  SessionOptions options;
  options.batch = 3;
  Session batched(model, options);
  CHECK(batched.batch() == 3);
  CHECK(batched.inputs()[0].shape == Shape{3, 1, 6, 6});
  Session single(model);

  Tensor x({3, 1, 6, 6}, random_vector(3 * 36, 31));
  auto out = batched.run({x});
  REQUIRE(out[0].shape == Shape{3, 4});
  for (int n = 0; n < 3; ++n) {
    CAPTURE(n);
    Tensor row({1, 1, 6, 6}, std::vector<float>(x.data.begin() + n * 36, x.data.begin() + (n + 1) * 36));
    auto one = single.run({row});
    std::vector<float> got(out[0].data.begin() + n * 4, out[0].data.begin() + (n + 1) * 4);
    CHECK(rel_error(got, one[0].data) <= 1e-6);
    CHECK(rel_error(got, net.expected(row.data.data())) <= 1e-5);
  }
  check_plan(batched);
}

TEST_CASE("session: two inputs, add and concat, two outputs") {
  Model model = two_input_model();
  SessionOptions options;
  options.batch = 2;
  Session session(model, options);
  REQUIRE(session.inputs().size() == 2);
  REQUIRE(session.outputs().size() == 2);
  CHECK(session.outputs()[0].shape == Shape{2, 4, 3, 3});
  CHECK(session.outputs()[1].shape == Shape{2, 2, 3, 3});

  Tensor a({2, 2, 3, 3}, random_vector(36, 41));
  Tensor b({2, 2, 3, 3}, random_vector(36, 42));
  auto out = session.run({a, b});
  REQUIRE(out.size() == 2);
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 18; ++i) {
      float s = a.data[n * 18 + i] + b.data[n * 18 + i];
      CHECK(out[1].data[n * 18 + i] == doctest::Approx(s).epsilon(1e-6));
      CHECK(out[0].data[n * 36 + i] == doctest::Approx(s).epsilon(1e-6));  // channels 0-1: a + b
      CHECK(out[0].data[n * 36 + 18 + i] == a.data[n * 18 + i]);            // channels 2-3: a
    }
  check_plan(session);

  // Both inputs live from step -1, both outputs to the end; 'a' until concat (step 1).
  const auto& plan = detail::plan_of(session);
  for (const auto& t : plan.tensors) {
    if (t.name == "a") CHECK((t.first == -1 && t.last == 1));
    if (t.name == "b") CHECK((t.first == -1 && t.last == 0));
  }
}

TEST_CASE("session: run twice gives identical results; the Model may be destroyed first") {
  SmallNet net;
  std::unique_ptr<Session> session;
  {
    Model model = net.model();
    SessionOptions options;
    options.batch = 2;
    session = std::make_unique<Session>(model, options);
  }
  Tensor x({2, 1, 6, 6}, random_vector(72, 51));
  auto first = session->run({x});
  auto second = session->run({x});
  CHECK(first[0].data == second[0].data);
  CHECK(rel_error(std::vector<float>(first[0].data.begin(), first[0].data.begin() + 4),
                  net.expected(x.data.data())) <= 1e-5);

  // A moved session works; the moved-from one says so instead of crashing.
  Session moved = std::move(*session);
  CHECK(moved.run({x})[0].data == first[0].data);
  CHECK_THROWS_AS(session->run({x}), Error);
}

TEST_CASE("session: wrong inputs are errors") {
  Session session(SmallNet().model());
  Tensor good({1, 1, 6, 6}, random_vector(36, 61));
  CHECK_THROWS_AS(session.run({}), Error);
  CHECK_THROWS_AS(session.run({good, good}), Error);
  CHECK_THROWS_WITH_AS(session.run({Tensor({1, 1, 6, 5})}),
                       "input 0 'x': expected shape 1x1x6x6, got 1x1x6x5", Error);
  CHECK_THROWS_WITH_AS(session.run({Tensor({2, 1, 6, 5})}),  // another batch, and another shape
                       "input 0 'x': expected shape 1x1x6x6, got 2x1x6x5", Error);
  CHECK_THROWS_AS(session.run({Tensor({1, 6, 6})}), Error);
  CHECK_THROWS_AS(session.run({Tensor({0, 1, 6, 6})}), Error);
  Tensor short_data({1, 1, 6, 6}, std::vector<float>(35));
  CHECK_THROWS_AS(session.run({short_data}), Error);
  CHECK_THROWS_AS(session.profile({good}, 0), Error);
  CHECK_THROWS_AS(session.profile({Tensor({1, 1, 5, 6})}, 1), Error);
  CHECK_NOTHROW(session.run({good}));
}

TEST_CASE("session: bad options are errors") {
  Model model = SmallNet().model();
  auto make = [&](SessionOptions o) { Session s(model, o); };
  SessionOptions o;

  o.backend = "tpu";
  CHECK_THROWS_WITH_AS(make(o), "unknown backend 'tpu' (choices: auto, cpu, cuda, reference)", Error);
  o.backend = "cuda";
#ifdef INFER_WITH_CUDA
  if (!detail::cuda_device_available())
    CHECK_THROWS_WITH_AS(make(o), "backend cuda: no CUDA device is available (use --backend cpu or auto)",
                         Error);
#else
  CHECK_THROWS_WITH_AS(make(o), "this build of infer has no CUDA backend (built without a CUDA toolkit)",
                       Error);
#endif

  // tf32 and fp16 exist on cuda only; the cpu backends say so instead of silently running fp32.
  o = {};
  o.backend = "cpu";
  o.precision = Precision::FP16;
  CHECK_THROWS_WITH_AS(make(o), "precision fp16 needs the cuda backend (backend cpu runs fp32 only)",
                       Error);
  o.backend = "reference";
  o.precision = Precision::TF32;
  CHECK_THROWS_WITH_AS(make(o),
                       "precision tf32 needs the cuda backend (backend reference runs fp32 only)", Error);
  o.precision = static_cast<Precision>(7);
  CHECK_THROWS_WITH_AS(make(o), "unknown precision value 7", Error);

  o = {};
  o.batch = -2;
  CHECK_THROWS_WITH_AS(make(o), "batch must be >= 1 (or 0: the model's own), got -2", Error);

  o = {};
  o.backend = "cpu";  // the variant lists checked below are the cpu backend's
  o.kernels = {{"convolution", "reference"}};
  try {
    make(o);
    FAIL("expected an Error");
  } catch (const Error& e) {
    std::string what = e.what();
    CHECK(what.find("'convolution'") != std::string::npos);
    CHECK(what.find("conv_transpose2d") != std::string::npos);  // lists the op names
  }

  o.kernels = {{"conv2d", "no_such_variant"}};
  try {
    make(o);
    FAIL("expected an Error");
  } catch (const Error& e) {
    std::string what = e.what();
    CHECK(what.find("'no_such_variant'") != std::string::npos);
    CHECK(what.find("reference") != std::string::npos);  // lists the op's variants
  }

  // Forcing an existing variant works, also for an op the model does not have.
  o.kernels = {{"conv2d", "reference"}, {"conv_transpose2d", "reference"}};
  Session forced(model, o);
  CHECK(forced.nodes()[0].variant == "reference");
}

TEST_CASE("session: --kernel op:node=variant forces one node, by name, over the op's choice") {
  ModelBuilder b("two_convs");
  const int x = b.input("x", {-1, 2, 9, 9});
  Conv2DParams p;
  p.pad = {1, 1, 1, 1};
  const int a = b.node("a", p, {x, b.constant("wa", {4, 2, 3, 3}, test::random_vector(72, 1))});
  b.output(b.node("b", p, {a, b.constant("wb", {4, 4, 3, 3}, test::random_vector(144, 2))}));
  const Model model = Model::from_bytes(b.finish());
  SessionOptions o;
  o.backend = "cpu";
  Session plain(model, o);
  REQUIRE(plain.nodes().size() == 2);
  REQUIRE(plain.nodes()[0].variant != "reference");
  o.kernels = {{"conv2d:b", "reference"}};
  Session one(model, o);
  CHECK(one.nodes()[0].variant == plain.nodes()[0].variant);
  CHECK(one.nodes()[1].variant == "reference");
  // the node's entry wins over the op's
  o.kernels = {{"conv2d", "reference"}, {"conv2d:a", plain.nodes()[0].variant}};
  const Session both(model, o);
  CHECK(both.nodes()[0].variant == plain.nodes()[0].variant);
  CHECK(both.nodes()[1].variant == "reference");
  Tensor in({1, 2, 9, 9}, test::random_vector(162, 3));
  CHECK(test::rel_error(one.run({in})[0].data, plain.run({in})[0].data) <= 1e-5);
  // errors: a name the graph lacks, a node of another op, an empty name, an unknown variant
  o.kernels = {{"conv2d:c", "reference"}};
  CHECK_THROWS_WITH_AS(Session(model, o), "kernels: no conv2d node named 'c' in the graph (after its passes; -v lists them)",
                       Error);
  o.kernels = {{"dense:b", "reference"}};
  CHECK_THROWS_WITH_AS(Session(model, o), doctest::Contains("no dense node named 'b'"), Error);
  o.kernels = {{"conv2d:", "reference"}};
  CHECK_THROWS_WITH_AS(Session(model, o), "kernels: 'conv2d:' names no node (op:node=variant)", Error);
  o.kernels = {{"conv2d:b", "no_such"}};
  CHECK_THROWS_WITH_AS(Session(model, o), doctest::Contains("op 'conv2d' has no variant 'no_such'"), Error);
}

namespace {

// x [2,5] (a fixed batch: no leading -1) -> softmax; `fixed_why`: its batch.fixed metadata.
Model fixed_batch_model(const std::string& fixed_why = "") {
  ModelBuilder b("fixed");
  const int x = b.input("x", {2, 5});
  b.output(b.node("soft", SoftmaxParams{1}, {x}));
  if (!fixed_why.empty()) b.set_metadata("batch.fixed", fixed_why);
  return Model::from_bytes(b.finish(), "fixed.fb");
}

std::vector<float> rows(const std::vector<float>& v, int64_t from, int64_t count, int64_t per_row) {
  return std::vector<float>(v.begin() + from * per_row, v.begin() + (from + count) * per_row);
}

}  // namespace

TEST_CASE("session: a model built at a fixed batch runs there by default and at any batch it allows") {
  const Model model = fixed_batch_model();
  SessionOptions o;
  o.backend = "cpu";
  Session built(model, o);  // batch 0: the model's own
  CHECK(built.batch() == 2);
  CHECK(built.inputs()[0].shape == Shape{2, 5});
  const std::vector<float> x = random_vector(3 * 5, 71);
  const std::vector<float> y2 = built.run({Tensor({2, 5}, rows(x, 0, 2, 5))})[0].data;
  for (int64_t batch : {1, 3}) {
    CAPTURE(batch);
    o.batch = batch;
    Session s(model, o);
    CHECK(s.batch() == batch);
    CHECK(s.inputs()[0].shape == Shape{batch, 5});
    CHECK(s.outputs()[0].shape == Shape{batch, 5});
    const std::vector<float> y = s.run({Tensor({batch, 5}, rows(x, 0, batch, 5))})[0].data;
    CHECK(rows(y, 0, 1, 5) == rows(y2, 0, 1, 5));  // rows are independent
  }
}

TEST_CASE("session: a model whose producer fixed its batch says why in one line") {
  const Model model = fixed_batch_model("node 'v' (Reshape): shape [2,-1] starts with 2");
  SessionOptions o;
  o.backend = "cpu";
  CHECK(Session(model, o).inputs()[0].shape == Shape{2, 5});
  for (int64_t batch : {1, 3}) {
    o.batch = batch;
    try {
      Session s(model, o);
      FAIL("expected an Error");
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(what == "fixed.fb: batch " + std::to_string(batch) +
                        " cannot apply: the model has no batch dimension (input 'x' is 2x5, with no leading -1); it "
                        "runs only at the size it was built with (batch.fixed: node 'v' (Reshape): shape [2,-1] "
                        "starts with 2)");
    }
  }
  o.batch = 0;
  Session s(model, o);
  CHECK_THROWS_WITH_AS(s.run({Tensor({3, 5})}),
                       doctest::Contains("run: inputs at batch 3 (the session's is 2): fixed.fb: batch 3 cannot apply"),
                       Error);
  CHECK(detail::planned_batches(s) == std::vector<int64_t>{2});

  // Inputs of different fixed leading sizes have no one batch.
  ModelBuilder b("two");
  const int a = b.input("a", {2, 3}), c = b.input("c", {1, 3});
  b.output(b.node("sum", BinaryParams{}, {a, c}));
  const Model two = Model::from_bytes(b.finish(), "two.fb");
  o.batch = 4;
  CHECK_THROWS_WITH_AS(Session(two, o),
                       "two.fb: batch 4 cannot apply: the model has no batch dimension (input 'a' is 2x3, with no "
                       "leading -1) and input 'c' is 1x3: inputs of different leading sizes have no one batch",
                       Error);
}

TEST_CASE("session: the batch follows the input, planned once per batch") {
  SmallNet net;
  const Model model = net.model();
  SessionOptions o;
  o.backend = "cpu";
  Session session(model, o);
  CHECK(session.batch() == 1);
  const Tensor x({3, 1, 6, 6}, random_vector(3 * 36, 81));
  o.batch = 3;
  const std::vector<float> want = Session(model, o).run({x})[0].data;

  std::vector<Tensor> out = session.run({x});
  REQUIRE(out.size() == 1);
  CHECK(out[0].shape == Shape{3, 4});
  CHECK(out[0].data == want);  // the same plan as a session made at batch 3: bit-identical
  CHECK(detail::planned_batches(session) == std::vector<int64_t>{1, 3});
  CHECK(session.run({x})[0].data == want);  // the cached plan
  CHECK(detail::planned_batches(session) == std::vector<int64_t>{1, 3});
  // The session still describes its own batch; its own plan still runs.
  CHECK(session.batch() == 1);
  CHECK(session.inputs()[0].shape == Shape{1, 1, 6, 6});
  CHECK(session.outputs()[0].shape == Shape{1, 4});
  const Tensor x1({1, 1, 6, 6}, rows(x.data, 0, 1, 36));
  CHECK(rel_error(session.run({x1})[0].data, rows(want, 0, 1, 4)) <= 1e-6);
  // profile() and benchmark() follow the input too.
  const Profile p = session.profile({Tensor({2, 1, 6, 6}, rows(x.data, 0, 2, 36))}, 1);
  CHECK(p.batch == 2);
  CHECK(session.benchmark({x}, 1, 0).size() == 1);
  CHECK(detail::planned_batches(session) == std::vector<int64_t>{1, 2, 3});

  // Several inputs carry one batch together; inputs at two batches are a shape error.
  Session two(two_input_model());
  const Tensor a({2, 2, 3, 3}, random_vector(36, 82)), b({2, 2, 3, 3}, random_vector(36, 83));
  CHECK(two.run({a, b})[1].shape == Shape{2, 2, 3, 3});
  CHECK_THROWS_WITH_AS(two.run({a, Tensor({3, 2, 3, 3})}), "input 0 'a': expected shape 1x2x3x3, got 2x2x3x3",
                       Error);
}

TEST_CASE("session: run_into writes run()'s outputs into the caller's buffers, at any batch") {
  SmallNet net;
  const Model model = net.model();
  SessionOptions o;
  o.backend = "cpu";
  Session session(model, o);
  const Tensor x({3, 1, 6, 6}, random_vector(3 * 36, 82));
  const std::vector<float> want = session.run({x})[0].data;
  const std::vector<TensorView> in{{x.shape, x.data.data()}};
  CHECK(session.output_shapes(in) == std::vector<Shape>{{3, 4}});
  std::vector<float> buffer(12, std::numeric_limits<float>::quiet_NaN());  // poisoned
  session.run_into(in, {{{3, 4}, buffer.data()}});
  CHECK(buffer == want);
  buffer.assign(12, -7.f);
  session.run_into(in, {{{3, 4}, buffer.data()}});  // the same buffer again: overwritten, not accumulated
  CHECK(buffer == want);
  CHECK(detail::planned_batches(session) == std::vector<int64_t>{1, 3});

  // Every mistake is one Error naming it; nothing is written.
  std::vector<float> small(4, 5.f);
  CHECK_THROWS_WITH_AS(session.run_into(in, {{{1, 4}, small.data()}}),
                       "run_into: output 0 'softmax' needs shape 3x4, got 1x4", Error);
  CHECK_THROWS_WITH_AS(session.run_into(in, {}), "run_into: expected 1 output buffer(s), got 0", Error);
  CHECK_THROWS_WITH_AS(session.run_into(in, {{{3, 4}, nullptr}}),
                       "run_into: output 0 'softmax' has no buffer (null pointer)", Error);
  CHECK_THROWS_WITH_AS(session.run_into({{x.shape, nullptr}}, {{{3, 4}, buffer.data()}}),
                       "run_into: input 0 'x' has no data (null pointer)", Error);
  CHECK_THROWS_AS(session.run_into({{{3, 1, 5, 6}, x.data.data()}}, {{{3, 4}, buffer.data()}}), Error);
  CHECK(small == std::vector<float>(4, 5.f));
  // run()'s Tensors must hold as many floats as their shape says.
  CHECK_THROWS_WITH_AS(session.run({Tensor({1, 1, 6, 6}, std::vector<float>(35))}),
                       "run: input 0 'x': shape 1x1x6x6 needs 36 floats, got 35", Error);
}

TEST_CASE("session: memory report and plan of zoo models") {
  for (const char* name : {"lenet5", "dcgan"}) {
    CAPTURE(name);
    Model model = Model::from_bytes(zoo::build(name).finish(), name);
    SessionOptions options;
    options.batch = 2;
    options.passes.set_all(false);  // folded BatchNorm would add constants to weight_bytes
    Session session(model, options);
    check_plan(session);
    const MemoryReport& m = session.memory();
    CHECK(m.arena_bytes > 0);
    CHECK(m.lower_bound_bytes > 0);
    CHECK(m.arena_bytes < m.naive_bytes);  // a chain of layers always reuses memory
    CHECK(m.weight_bytes > 0);
    CHECK(m.weight_bytes == model.weight_bytes());  // f32 file, every constant used, no passes
    // Every activation of the model is in the plan with its batch-2 size.
    const auto& plan = detail::plan_of(session);
    uint64_t workspaces = 0;
    for (const auto& t : plan.tensors) workspaces += t.workspace ? t.bytes : 0;
    CHECK(workspaces == m.workspace_bytes);
    // The graph's final output lives to the end.
    bool found_output = false;
    for (const auto& t : plan.tensors)
      if (t.last == static_cast<int>(session.nodes().size())) found_output = true;
    CHECK(found_output);
  }
}

namespace {

// x [N,2,8,8] -> conv 2->3 k3 p1 (no bias) -> batchnorm -> relu -> conv2 3->4 k3 p1 -> avgpool 2 ->
// flatten 64 -> dense1 64->5 -> tanh -> dense2 5->3. With every pass on, all of conv..relu, conv2+pool
// and dense1+tanh fuse: the values in between exist only when a session asks for them.
Model fusable_model() {
  ModelBuilder b("fusable");
  int x = b.input("x", {-1, 2, 8, 8});
  Conv2DParams conv;
  conv.pad = {1, 1, 1, 1};
  int c = b.node("conv", conv, {x, b.constant("conv.w", {3, 2, 3, 3}, random_vector(54, 71))});
  BatchNormParams bnp;
  bnp.epsilon = 1e-5f;
  int bn = b.node("bn", bnp,
                  {c, b.constant("bn.scale", {3}, random_vector(3, 72, 0.5f, 1.5f)),
                   b.constant("bn.bias", {3}, random_vector(3, 73)),
                   b.constant("bn.mean", {3}, random_vector(3, 74)),
                   b.constant("bn.var", {3}, random_vector(3, 75, 0.5f, 1.5f))});
  int r = b.node("relu", ActivationParams{}, {bn});
  int c2 = b.node("conv2", conv,
                  {r, b.constant("conv2.w", {4, 3, 3, 3}, random_vector(108, 76)),
                   b.constant("conv2.b", {4}, random_vector(4, 77))});
  Pool2DParams pool;
  pool.kind = PoolKind::Average;
  int p = b.node("pool", pool, {c2});
  int f = b.node("flatten", FlattenParams{}, {p});
  int d1 = b.node("dense1", DenseParams{},
                  {f, b.constant("dense1.w", {5, 64}, random_vector(320, 78)),
                   b.constant("dense1.b", {5}, random_vector(5, 79))});
  ActivationParams tanh;
  tanh.activation.kind = ActivationKind::Tanh;
  int t = b.node("tanh", tanh, {d1});
  int d2 = b.node("dense2", DenseParams{},
                  {t, b.constant("dense2.w", {3, 5}, random_vector(15, 80)),
                   b.constant("dense2.b", {3}, random_vector(3, 81))});
  b.output(d2);
  return Model::from_bytes(b.finish(), "fusable.fb");
}

bool has_node(const Session& s, const std::string& name) {
  for (const NodeInfo& n : s.nodes())
    if (n.name == name) return true;
  return false;
}

}  // namespace

TEST_CASE("session: extra outputs read intermediate values, equal to the reference backend's") {
  const Model model = fusable_model();
  const std::vector<std::string> extra = {"conv", "bn", "conv2", "dense1", "tanh", "x"};
  const Tensor x({2, 2, 8, 8}, random_vector(256, 82));

  // The oracle: reference kernels, no pass, the same values asked for.
  SessionOptions ro;
  ro.backend = "reference";
  ro.batch = 2;
  ro.passes.set_all(false);
  ro.extra_outputs = extra;
  Session ref(model, ro);
  const std::vector<Tensor> want = ref.run({x});

  // Without extra outputs every pass fuses: conv(+bn+relu), conv2(+pool), flatten, dense1(+tanh), dense2.
  SessionOptions fo;
  fo.backend = "cpu";
  fo.batch = 2;
  Session fused(model, fo);
  CHECK(fused.nodes().size() == 5);
  CHECK_FALSE(has_node(fused, "relu"));
  const std::vector<Tensor> plain = fused.run({x});

  std::vector<std::string> backends = {"cpu", "reference"};
#ifdef INFER_WITH_CUDA
  if (detail::cuda_device_available()) backends.push_back("cuda");  // fp32; none in CI
#endif
  for (const std::string& backend : backends) {
    CAPTURE(backend);
    SessionOptions o;
    o.backend = backend;
    o.batch = 2;
    o.extra_outputs = extra;  // every pass on
    Session s(model, o);
    REQUIRE(s.outputs().size() == 7);
    CHECK(s.outputs()[0].name == "dense2");
    const std::vector<Shape> shapes = {{2, 3}, {2, 3, 8, 8}, {2, 3, 8, 8}, {2, 4, 8, 8},
                                       {2, 5},  {2, 5},       {2, 2, 8, 8}};
    for (size_t k = 1; k < 7; ++k) {
      CAPTURE(k);
      CHECK(s.outputs()[k].name == extra[k - 1]);
      CHECK(s.outputs()[k].shape == shapes[k]);
    }
    // A requested value is never fused away: the nodes after it stay their own nodes.
    CHECK(has_node(s, "bn"));
    CHECK(has_node(s, "relu"));
    CHECK(has_node(s, "pool"));
    CHECK(has_node(s, "tanh"));
    check_plan(s);
    // ... and lives to the end of the run.
    const int steps = static_cast<int>(s.nodes().size());
    for (const auto& t : detail::plan_of(s).tensors)
      if (std::find(extra.begin(), extra.end(), t.name) != extra.end()) CHECK(t.last == steps);

    const std::vector<Tensor> got = s.run({x});
    REQUIRE(got.size() == 7);
    REQUIRE(want.size() == 7);
    for (size_t k = 0; k < 7; ++k) {
      CAPTURE(k);
      CHECK(got[k].shape == shapes[k]);
      CHECK(rel_error(got[k].data, want[k].data) <= 1e-5);
    }
    CHECK(got[6].data == x.data);  // a graph input may be asked for: it is the input
    CHECK(rel_error(got[0].data, plain[0].data) <= 1e-5);  // the model's output is unchanged
    // The values before an activation really are before it: bn has negatives (relu follows), and
    // tanh's output is tanh of dense1's, which leaves [-1, 1].
    CHECK(*std::min_element(got[2].data.begin(), got[2].data.end()) < 0.f);
    float largest = 0;
    for (size_t i = 0; i < got[4].data.size(); ++i) {
      largest = std::max(largest, std::abs(got[4].data[i]));
      CHECK(got[5].data[i] == doctest::Approx(std::tanh(got[4].data[i])).epsilon(1e-5));
    }
    CHECK(largest > 1.f);
  }
}

TEST_CASE("model: nodes() lists the file's nodes with their value names") {
  const std::vector<ModelNode> nodes = fusable_model().nodes();
  REQUIRE(nodes.size() == 9);
  CHECK(nodes[0].name == "conv");
  CHECK(nodes[0].op == "conv2d");
  CHECK(nodes[0].inputs == std::vector<std::string>{"x", "conv.w"});
  CHECK(nodes[0].outputs == std::vector<std::string>{"conv"});
  CHECK(nodes[8].name == "dense2");
  CHECK(nodes[8].op == "dense");
  CHECK(nodes[8].inputs == std::vector<std::string>{"tanh", "dense2.w", "dense2.b"});
}

TEST_CASE("session: bad extra outputs are errors naming the value") {
  const Model model = fusable_model();
  auto make = [&](std::vector<std::string> names) {
    SessionOptions o;
    o.backend = "cpu";
    o.extra_outputs = std::move(names);
    Session s(model, o);
  };
  CHECK_THROWS_WITH_AS(make({"nope"}), "extra output 'nope': fusable.fb has no value of that name",
                       Error);
  CHECK_THROWS_WITH_AS(make({"conv.w"}),
                       "extra output 'conv.w': a constant of fusable.fb (weights), not an activation",
                       Error);
  CHECK_THROWS_WITH_AS(make({"tanh", "tanh"}), "extra output 'tanh': given twice", Error);
  CHECK_THROWS_WITH_AS(make({"dense2"}), "extra output 'dense2': already an output of fusable.fb",
                       Error);
  CHECK_NOTHROW(make({}));
}

TEST_CASE("session: SessionOptions::device on cpu and reference: -1 or 0, anything else is one Error") {
  const Model model = Model::load(std::string(INFER_SOURCE_DIR) + "/models/lenet5_fashion.fb");
  for (const char* backend : {"cpu", "reference"}) {
    CAPTURE(backend);
    SessionOptions o;
    o.backend = backend;
    for (int ok : {-1, 0}) {
      o.device = ok;
      Session s(model, o);
      CHECK(s.run({Tensor(s.inputs()[0].shape)})[0].shape == Shape{1, 10});
    }
    o.device = 1;
    CHECK_THROWS_WITH_AS(Session(model, o), doctest::Contains("device 1 selects a GPU"), Error);
    o.device = -2;
    CHECK_THROWS_WITH_AS(Session(model, o), doctest::Contains("device must be >= 0"), Error);
  }
}
