// The bad-input corpus: a valid model using every op, truncated at many offsets, with thousands of
// seeded byte flips and word smashes, random bytes, and hand-broken fields written with the generated
// FlatBuffers API. Every case must load or throw infer::Error (never crash, also under ASan/UBSan); the
// hand-broken ones must throw naming the field. The cases are written to <build>/tests/corpus/ as
// bad_<case>.fb (must be rejected), fuzz_<case>.fb (either outcome) and valid_<case>.fb, for CLI tests.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <set>

#include "graph.h"
#include "infer/error.h"
#include "infer/model.h"
#include "infer/model_builder.h"
#include "loader.h"
#include "model_generated.h"
#include "shape_inference.h"
#include "test_util.h"

using namespace infer;
using doctest::Contains;

namespace {

// ---- the corpus folder ----------------------------------------------------------------------------

std::string corpus_dir() {
  static const std::string dir = [] {
    std::string d = std::string(INFER_BINARY_DIR) + "/tests/corpus";
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

void write_case(const std::string& name, const std::vector<uint8_t>& bytes) {
  std::ofstream f(corpus_dir() + "/" + name + ".fb", std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

// ---- a model written field by field with the generated API, so any field can be broken ------------

using OptionsFn = std::function<std::pair<fb::Op, flatbuffers::Offset<void>>(flatbuffers::FlatBufferBuilder&)>;

struct RawTensor {
  std::optional<std::string> name;
  std::optional<std::vector<int64_t>> shape;
  int dtype = 0;
  uint32_t buffer = 0;
  bool misaligned_shape = false;  // write shape's int64 elements 4 bytes off an 8-byte boundary
};

// A [long] whose elements start 4 bytes off an 8-byte boundary, as a hostile writer can produce (the
// fuzzer found such files): each int64 pushed as two uint32s into a vector aligned for 4-byte elements,
// after 4 bytes of padding when needed. The buffer's end is 64-byte aligned (force_align), so the
// distance from the end decides the address modulo 8: data at distance size - 4, which must be 4 mod 8.
flatbuffers::Offset<flatbuffers::Vector<int64_t>> misaligned_longs(flatbuffers::FlatBufferBuilder& fbb,
                                                                  const std::vector<int64_t>& v) {
  if (fbb.GetSize() % 8 == 0) fbb.PushElement<uint32_t>(0);
  fbb.StartVector(v.size() * 2, sizeof(uint32_t));
  for (size_t i = v.size(); i-- > 0;) {
    const auto u = static_cast<uint64_t>(v[i]);
    fbb.PushElement<uint32_t>(static_cast<uint32_t>(u >> 32));  // pushed first: the higher address
    fbb.PushElement<uint32_t>(static_cast<uint32_t>(u));
  }
  return flatbuffers::Offset<flatbuffers::Vector<int64_t>>(fbb.EndVector(v.size()));
}

struct RawNode {
  std::optional<std::string> name;
  std::vector<uint32_t> inputs;
  std::optional<std::vector<uint32_t>> outputs;
  OpParams params;
  OptionsFn custom;  // replaces the options built from params (for invalid enums and types)
};

fb::Padding fb_padding(const Padding2D& p) { return fb::Padding(p.top, p.left, p.bottom, p.right); }

flatbuffers::Offset<fb::Conv2D> fb_conv(flatbuffers::FlatBufferBuilder& fbb, const Conv2DParams& p) {
  const fb::Padding pad = fb_padding(p.pad);
  return fb::CreateConv2D(fbb, p.stride_h, p.stride_w, &pad, p.dilation_h, p.dilation_w,
                          static_cast<fb::ActivationKind>(p.activation.kind), p.activation.alpha,
                          p.activation.beta, p.groups);
}

std::pair<fb::Op, flatbuffers::Offset<void>> fb_options(flatbuffers::FlatBufferBuilder& fbb,
                                                        const OpParams& params) {
  if (auto* c = std::get_if<Conv2DParams>(&params)) return {fb::Op::Conv2D, fb_conv(fbb, *c).Union()};
  if (auto* t = std::get_if<ConvTranspose2DParams>(&params)) {
    const fb::Padding pad = fb_padding(t->pad);
    return {fb::Op::ConvTranspose2D,
            fb::CreateConvTranspose2D(fbb, t->stride_h, t->stride_w, &pad, t->output_padding_h,
                                      t->output_padding_w, t->dilation_h, t->dilation_w,
                                      static_cast<fb::ActivationKind>(t->activation.kind),
                                      t->activation.alpha, t->activation.beta, t->groups)
                .Union()};
  }
  if (auto* p = std::get_if<Pool2DParams>(&params)) {
    const fb::Padding pad = fb_padding(p->pad);
    return {fb::Op::Pool2D, fb::CreatePool2D(fbb, static_cast<fb::PoolKind>(p->kind), p->kernel_h,
                                             p->kernel_w, p->stride_h, p->stride_w, &pad)
                                .Union()};
  }
  if (std::get_if<DenseParams>(&params)) return {fb::Op::Dense, fb::CreateDense(fbb).Union()};
  if (auto* f = std::get_if<FlattenParams>(&params))
    return {fb::Op::Flatten, fb::CreateFlatten(fbb, f->axis).Union()};
  if (auto* r = std::get_if<ReshapeParams>(&params)) {
    const auto shape = fbb.CreateVector(r->shape);
    return {fb::Op::Reshape, fb::CreateReshape(fbb, shape).Union()};
  }
  if (auto* s = std::get_if<SoftmaxParams>(&params))
    return {fb::Op::Softmax, fb::CreateSoftmax(fbb, s->axis).Union()};
  if (auto* cp = std::get_if<ConvPool2DParams>(&params)) {
    const auto conv = fb_conv(fbb, cp->conv);
    return {fb::Op::ConvPool2D, fb::CreateConvPool2D(fbb, conv, cp->pool).Union()};
  }
  if (std::get_if<ActivationParams>(&params))
    return {fb::Op::Activation, fb::CreateActivation(fbb).Union()};
  FAIL("fb_options: op not needed by these tests");
  return {fb::Op::NONE, 0};
}

std::vector<uint8_t> f32_bytes(size_t n, float start = 0.f) {
  std::vector<uint8_t> out(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float v = start + 0.01f * static_cast<float>(i % 97);
    std::memcpy(&out[i * 4], &v, 4);
  }
  return out;
}

struct RawModel {
  uint32_t format_version = kFormatVersion;
  std::vector<RawTensor> tensors;
  std::optional<std::vector<std::vector<uint8_t>>> buffers;
  std::vector<RawNode> nodes;
  std::optional<std::vector<uint32_t>> inputs, outputs;
  std::vector<std::pair<std::string, std::string>> metadata;  // written as given (unsorted allowed)

  // The base model: conv (bias) -> max pool -> transposed conv (f16 weight) -> flatten -> dense.
  static RawModel base() {
    RawModel m;
    m.tensors = {
        {"x", std::vector<int64_t>{-1, 2, 6, 6}, 0, 0},       // 0
        {"conv.w", std::vector<int64_t>{3, 2, 3, 3}, 0, 1},   // 1
        {"conv.b", std::vector<int64_t>{3}, 0, 2},            // 2
        {"conv", std::vector<int64_t>{-1, 3, 6, 6}, 0, 0},    // 3
        {"pool", std::vector<int64_t>{-1, 3, 3, 3}, 0, 0},    // 4
        {"tconv.w", std::vector<int64_t>{3, 2, 2, 2}, 1, 3},  // 5 (f16)
        {"tconv", std::vector<int64_t>{-1, 2, 6, 6}, 0, 0},   // 6
        {"flat", std::vector<int64_t>{-1, 72}, 0, 0},         // 7
        {"dense.w", std::vector<int64_t>{4, 72}, 0, 4},       // 8
        {"dense", std::vector<int64_t>{-1, 4}, 0, 0},         // 9
    };
    m.buffers = std::vector<std::vector<uint8_t>>{
        {}, f32_bytes(54), f32_bytes(3), std::vector<uint8_t>(48, 0x3c), f32_bytes(288)};
    Conv2DParams conv;
    conv.pad = {1, 1, 1, 1};
    Pool2DParams pool;  // max 2x2 stride 2
    ConvTranspose2DParams tconv;
    tconv.stride_h = tconv.stride_w = 2;
    m.nodes = {
        {"conv", {0, 1, 2}, std::vector<uint32_t>{3}, conv, nullptr},
        {"pool", {3}, std::vector<uint32_t>{4}, pool, nullptr},
        {"tconv", {4, 5}, std::vector<uint32_t>{6}, tconv, nullptr},
        {"flat", {6}, std::vector<uint32_t>{7}, FlattenParams{1}, nullptr},
        {"dense", {7, 8}, std::vector<uint32_t>{9}, DenseParams{}, nullptr},
    };
    m.inputs = std::vector<uint32_t>{0};
    m.outputs = std::vector<uint32_t>{9};
    m.metadata = {{"task", "classifier"}};
    return m;
  }

  std::vector<uint8_t> finish() const {
    flatbuffers::FlatBufferBuilder fbb;
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Buffer>>> buffer_vec = 0;
    if (buffers) {
      std::vector<flatbuffers::Offset<fb::Buffer>> bufs;
      for (size_t i = 0; i < buffers->size(); ++i) {
        const auto& data = (*buffers)[i];
        if (i == 0 && data.empty()) {
          bufs.push_back(fb::CreateBuffer(fbb));
          continue;
        }
        fbb.PreAlign(data.size(), 64);
        bufs.push_back(fb::CreateBuffer(fbb, fbb.CreateVector(data)));
      }
      buffer_vec = fbb.CreateVector(bufs);
    }
    std::vector<flatbuffers::Offset<fb::Tensor>> ts;
    for (const RawTensor& t : tensors) {
      const auto name = t.name ? fbb.CreateString(*t.name) : 0;
      const auto shape = !t.shape            ? 0
                         : t.misaligned_shape ? misaligned_longs(fbb, *t.shape)
                                              : fbb.CreateVector(*t.shape);
      ts.push_back(fb::CreateTensor(fbb, name, shape, static_cast<fb::DType>(t.dtype), t.buffer));
    }
    std::vector<flatbuffers::Offset<fb::Node>> ns;
    for (const RawNode& n : nodes) {
      const auto name = n.name ? fbb.CreateString(*n.name) : 0;
      const auto ins = fbb.CreateVector(n.inputs);
      const auto outs = n.outputs ? fbb.CreateVector(*n.outputs) : 0;
      const auto options = n.custom ? n.custom(fbb) : fb_options(fbb, n.params);
      ns.push_back(fb::CreateNode(fbb, name, ins, outs, options.first, options.second));
    }
    std::vector<flatbuffers::Offset<fb::KeyValue>> kvs;
    for (const auto& kv : metadata)
      kvs.push_back(fb::CreateKeyValueDirect(fbb, kv.first.c_str(), kv.second.c_str()));
    const auto name = fbb.CreateString("raw");
    const auto tensor_vec = fbb.CreateVector(ts);
    const auto node_vec = fbb.CreateVector(ns);
    const auto in_vec = inputs ? fbb.CreateVector(*inputs) : 0;
    const auto out_vec = outputs ? fbb.CreateVector(*outputs) : 0;
    const auto meta_vec = fbb.CreateVector(kvs);
    const auto root = fb::CreateModel(fbb, format_version, name, 0, 0, tensor_vec, node_vec, in_vec,
                                      out_vec, buffer_vec, meta_vec);
    fb::FinishModelBuffer(fbb, root);
    return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }
};

// A hand-broken case: written to the corpus, and it must throw an Error naming `field`.
void expect_bad(const std::string& name, const RawModel& m, const std::string& field) {
  const std::vector<uint8_t> bytes = m.finish();
  write_case("bad_" + name, bytes);
  const std::string origin = name + ".fb";
  INFO("case: ", name);
  CHECK_THROWS_WITH_AS(Model::from_bytes(bytes, origin), Contains(field.c_str()), Error);
  const std::string prefix = origin + ": ";
  CHECK_THROWS_WITH_AS(Model::from_bytes(bytes, origin), Contains(prefix.c_str()), Error);
}

// ---- a valid model that uses every op type, built with the ModelBuilder ----------------------------

std::vector<uint8_t> all_ops_model() {
  ModelBuilder b("all_ops");
  b.set_metadata("task", "classifier");
  b.set_metadata("labels", "a\nb\nc\nd\ne");
  uint64_t seed = 100;
  auto weights = [&](const std::string& name, Shape shape, DType dt = DType::F32) {
    return b.constant(name, shape, test::random_vector(size_t(shape_numel(shape)), seed++), dt);
  };
  const int x = b.input("x", {-1, 3, 12, 12});
  Conv2DParams conv;
  conv.pad = {1, 1, 1, 1};
  int y = b.node("conv", conv, {x, weights("conv.w", {4, 3, 3, 3}), weights("conv.b", {4})});
  y = b.node("bn", BatchNormParams{}, {y, weights("bn.scale", {4}), weights("bn.bias", {4}),
                                       weights("bn.mean", {4}), b.constant("bn.var", {4}, {1, 2, 3, 4})});
  y = b.node("relu", ActivationParams{}, {y});
  Pad2DParams pad;
  pad.mode = PadMode::Edge;
  pad.pad = {1, 0, 0, 1};
  y = b.node("pad", pad, {y});                                                  // 4x13x13
  y = b.node("in", InstanceNormParams{}, {y, weights("in.scale", {4}), weights("in.bias", {4})});
  y = b.node("shuffle", ChannelShuffleParams{2}, {y});
  y = b.node("slice", SliceParams{1, 0, 4}, {y});                               // 4x13x13
  Pool2DParams maxpool;  // 2x2 stride 2
  y = b.node("maxpool", maxpool, {y});                                          // 4x6x6
  ConvTranspose2DParams tconv;
  tconv.stride_h = tconv.stride_w = 2;
  tconv.pad = {1, 1, 1, 1};
  y = b.node("tconv", tconv, {y, weights("tconv.w", {4, 2, 4, 4}, DType::F16),
                              weights("tconv.b", {2})});                        // 2x12x12
  ConvPool2DParams cp;
  cp.conv.pad = {1, 1, 1, 1};
  cp.pool = 2;
  const int c = b.node("convpool", cp, {y, weights("convpool.w", {3, 2, 3, 3}),
                                        weights("convpool.b", {3})});           // 3x6x6
  Pool2DParams avg;
  avg.kind = PoolKind::Average;
  avg.kernel_h = avg.kernel_w = 3;
  avg.stride_h = avg.stride_w = 1;
  avg.pad = {1, 1, 1, 1};
  const int p = b.node("avgpool", avg, {c});                                    // 3x6x6
  int a = b.node("add", AddParams{}, {c, p});
  a = b.node("scale", BinaryParams{BinaryKind::Mul, {}}, {a, weights("scale.c", {3, 1, 1})});
  y = b.node("concat", ConcatParams{1}, {a, c});                                // 6x6x6
  ResizeParams rs;
  rs.mode = ResizeMode::Linear;
  rs.out_h = rs.out_w = 6;
  y = b.node("resize", rs, {y});                                                // 6x6x6
  y = b.node("d2s", DepthToSpaceParams{1, DepthToSpaceMode::CRD}, {y});         // 6x6x6
  y = b.node("flatten", FlattenParams{1}, {y});                                 // 216
  y = b.node("dense", DenseParams{}, {y, weights("dense.w", {10, 216}, DType::F16),
                                      weights("dense.b", {10})});
  y = b.node("reshape", ReshapeParams{{2, 5}}, {y});
  y = b.node("softmax", SoftmaxParams{2}, {y});
  // The slope a dequantize_linear of an i8 constant (folded at load: no node of the loaded graph).
  const int slope = b.node("prelu.slope", DequantizeLinearParams{0},
                           {b.constant("prelu.slope.q", {2}, {3.f, -5.f}, DType::I8),
                            b.constant("prelu.slope.scale", {1}, {0.1f})});
  y = b.node("prelu", PReluParams{}, {y, slope});
  y = b.node("log_softmax", LogSoftmaxParams{1}, {y});
  const int qs = b.constant("q.scale", {2}, {0.05f, 0.1f});
  const int qz = b.constant("q.zero_point", {2}, {3.f, -7.f}, DType::I8);
  y = b.node("quantize", QuantizeLinearParams{1, DType::I8}, {y, qs, qz});
  y = b.node("dequantize", DequantizeLinearParams{1}, {y, qs, qz});
  b.output(y);
  return b.finish();
}

// Loads or throws infer::Error; anything else (another exception) fails the test. A model that loads
// is exercised further: shapes at another batch, and every constant's data is read (ASan sees it).
enum class Outcome { Loaded, Rejected };
Outcome try_load(const std::vector<uint8_t>& bytes) {
  try {
    const Model m = Model::from_bytes(bytes, "fuzz.fb");
    double sum = 0;
    for (const auto& v : m.graph().values)
      if (v.is_constant())
        for (int64_t i = 0; i < shape_numel(v.shape); ++i) sum += v.data[i];
    (void)sum;
    try {
      detail::infer_shapes(m.graph(), 3);
    } catch (const Error&) {
    }
    return Outcome::Loaded;
  } catch (const Error&) {
    return Outcome::Rejected;
  }
}

// Offset of the first weight byte: everything before it is structure (tables, vectors, strings).
size_t structure_end(const std::vector<uint8_t>& bytes) {
  const fb::Model* m = fb::GetModel(bytes.data());
  size_t end = bytes.size();
  for (const fb::Buffer* b : *m->buffers())
    if (b->data() && b->data()->size())
      end = std::min(end, static_cast<size_t>(b->data()->Data() - bytes.data()));
  return end;
}

}  // namespace

TEST_CASE("the valid models load") {
  const auto all = all_ops_model();
  write_case("valid_all_ops", all);
  const Model m = Model::from_bytes(all, "all_ops.fb");
  CHECK(m.num_nodes() == 24);
  CHECK(m.outputs()[0].shape == Shape{-1, 2, 5});
  std::set<OpType> ops;
  for (const auto& n : m.graph().nodes) ops.insert(n.op());
  CHECK(ops.size() == size_t(kNumFileOpTypes));  // every op a file can hold: not the internal ones
  CHECK(ops.count(OpType::Layout) == 0);
  CHECK(ops.count(OpType::SqueezeExcite) == 0);

  const auto base = RawModel::base().finish();
  write_case("valid_base", base);
  const Model b = Model::from_bytes(base, "base.fb");
  CHECK(b.num_nodes() == 5);
  CHECK(b.weight_bytes() == (54 + 3 + 288) * 4 + 24 * 2);
  CHECK(b.meta("task") == "classifier");
  const auto shapes = detail::infer_shapes(b.graph(), 2);
  CHECK(shapes[9] == Shape{2, 4});
  CHECK(b.graph().values[5].data[0] == 1.05859375f);  // f16 0x3c3c = 1 + 60/1024
}

// Files written before activation_beta existed have vtables that end before it (FlatBuffers
// evolution): the field reads as its default 0 and the old kinds mean what they meant. The tables here
// are built field by field with the old fields only, as an old writer wrote them.
TEST_CASE("a file from before activation_beta (old vtables) loads unchanged") {
  RawModel m = RawModel::base();
  m.nodes[0].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    const fb::Padding pad(1, 1, 1, 1);
    fb::Conv2DBuilder c(fbb);  // Conv2D's old fields: strides, padding, dilations, activation, alpha
    c.add_stride_h(1);
    c.add_stride_w(1);
    c.add_padding(&pad);
    c.add_activation(fb::ActivationKind::LeakyRelu);
    c.add_activation_alpha(0.25f);
    return std::make_pair(fb::Op::Conv2D, c.Finish().Union());
  };
  m.nodes[4].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    fb::DenseBuilder d(fbb);
    d.add_activation(fb::ActivationKind::Sigmoid);
    return std::make_pair(fb::Op::Dense, d.Finish().Union());
  };
  const auto bytes = m.finish();
  // The Conv2D table's vtable really lacks the new field (slot 8: activation_beta).
  const fb::Model* raw = fb::GetModel(bytes.data());
  const fb::Conv2D* conv = raw->nodes()->Get(0)->options_as_Conv2D();
  REQUIRE(conv != nullptr);
  CHECK_FALSE(reinterpret_cast<const flatbuffers::Table*>(conv)->CheckField(fb::Conv2D::VT_ACTIVATION_BETA));
  const Model model = Model::from_bytes(bytes, "old.fb");
  const Activation a = fused_activation(model.graph().nodes[0].params);
  CHECK(a.kind == ActivationKind::LeakyRelu);
  CHECK(a.alpha == 0.25f);
  CHECK(a.beta == 0.f);
  CHECK(fused_activation(model.graph().nodes[4].params).kind == ActivationKind::Sigmoid);
  CHECK(model.format_version() == 1);
}

TEST_CASE("every activation kind and its parameters round-trip through a file") {
  ModelBuilder b("acts");
  int x = b.input("x", {-1, 2, 5, 5});
  int y = x;
  std::vector<Activation> acts;
  for (int k = 0; k < kNumActivationKinds; ++k) {
    Activation a{static_cast<ActivationKind>(k), 0.25f + 0.125f * float(k), 6.f + float(k)};
    acts.push_back(a);
    Conv2DParams cp;
    cp.pad = {1, 1, 1, 1};
    cp.activation = a;
    const int w = b.constant("w" + std::to_string(k), {2, 2, 3, 3}, std::vector<float>(36, 0.01f));
    y = b.node("conv" + std::to_string(k), cp, {y, w});
    ActivationParams ap;
    ap.activation = a;
    y = b.node("act" + std::to_string(k), ap, {y});
  }
  b.output(y);
  const std::vector<uint8_t> bytes = b.finish();
  const Model m = Model::from_bytes(bytes, "acts.fb");
  REQUIRE(m.graph().nodes.size() == acts.size() * 2);
  for (size_t k = 0; k < acts.size(); ++k) {
    CAPTURE(k);
    for (size_t j : {2 * k, 2 * k + 1}) {
      const OpParams& p = m.graph().nodes[j].params;
      const Activation a = std::holds_alternative<ActivationParams>(p) ? std::get<ActivationParams>(p).activation
                                                                        : fused_activation(p);
      CHECK(a.kind == acts[k].kind);
      CHECK(a.alpha == acts[k].alpha);
      CHECK(a.beta == acts[k].beta);
    }
  }
}

TEST_CASE("corpus: truncated files are rejected") {
  const auto valid = all_ops_model();
  std::vector<size_t> cuts;
  for (size_t n = 0; n < std::min<size_t>(512, valid.size()); ++n) cuts.push_back(n);
  for (size_t n = 512; n < valid.size(); n += 61) cuts.push_back(n);
  cuts.push_back(valid.size() - 1);
  for (size_t n : cuts) {
    const std::vector<uint8_t> cut(valid.begin(), valid.begin() + static_cast<long>(n));
    INFO("truncated to ", n, " of ", valid.size(), " bytes");
    CHECK_THROWS_AS(Model::from_bytes(cut, "truncated.fb"), Error);
    if (n % 128 == 5 || n == valid.size() - 1) write_case("bad_truncated_" + std::to_string(n), cut);
  }
}

TEST_CASE("corpus: byte flips and word smashes load or throw infer::Error") {
  const auto valid = all_ops_model();
  const size_t structure = structure_end(valid);
  REQUIRE(structure > 64);
  REQUIRE(structure < valid.size());
  std::mt19937_64 rng(20240611);
  auto pick = [&rng](size_t lo, size_t hi) {  // uniform in [lo, hi)
    return lo + static_cast<size_t>(rng() % (hi - lo));
  };
  int loaded = 0, rejected = 0;
  auto run = [&](const std::string& name, const std::vector<uint8_t>& bytes, int index) {
    INFO("case ", name);
    const Outcome o = try_load(bytes);
    (o == Outcome::Loaded ? loaded : rejected)++;
    if (index % 40 == 0) write_case("fuzz_" + name, bytes);
  };

  // 2000 single-byte flips: half anywhere, half inside the structure (not the weights).
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> bytes = valid;
    const size_t at = i % 2 ? pick(0, bytes.size()) : pick(0, structure);
    bytes[at] ^= static_cast<uint8_t>(1 + rng() % 255);
    run("flip1_" + std::to_string(i), bytes, i);
  }
  // 1000 multi-byte flips (2 to 8 bytes) in the structure.
  for (int i = 0; i < 1000; ++i) {
    std::vector<uint8_t> bytes = valid;
    const int count = 2 + static_cast<int>(rng() % 7);
    for (int k = 0; k < count; ++k) bytes[pick(0, structure)] ^= static_cast<uint8_t>(1 + rng() % 255);
    run("flipn_" + std::to_string(i), bytes, i);
  }
  // 1500 aligned 32-bit words replaced by values that break indices, counts, offsets and dims.
  const uint32_t smash[] = {0u, 1u, 2u, 7u, 0xffu, 0xffffu, 0x7fffffffu, 0x80000000u, 0xffffffffu,
                            0xfffffffeu, 0x10000u, 0x40000000u};
  for (int i = 0; i < 1500; ++i) {
    std::vector<uint8_t> bytes = valid;
    const size_t at = pick(0, structure / 4) * 4;
    const uint32_t v = smash[rng() % (sizeof smash / sizeof smash[0])];
    std::memcpy(&bytes[at], &v, 4);
    run("word_" + std::to_string(i), bytes, i);
  }
  MESSAGE("byte flips: " << loaded << " loaded, " << rejected << " rejected");
  CHECK(rejected > 1000);  // the structure flips mostly break something the loader must notice
  CHECK(loaded > 100);     // flips inside weight data legitimately still load
}

TEST_CASE("corpus: wrong identifier, empty, random bytes") {
  auto valid = all_ops_model();
  auto wrong = valid;
  std::memcpy(&wrong[4], "ONNX", 4);
  write_case("bad_wrong_identifier", wrong);
  CHECK_THROWS_WITH_AS(Model::from_bytes(wrong, "w.fb"),
                       "w.fb: not an infer model (file identifier is not INFR)", Error);
  write_case("bad_empty", {});
  CHECK_THROWS_WITH_AS(Model::from_bytes({}, "e.fb"), "e.fb: file is empty", Error);
  CHECK_THROWS_WITH_AS(Model::from_bytes({1, 2, 3}, "s.fb"), Contains("too small"), Error);
  const std::vector<uint8_t> header_only = {8, 0, 0, 0, 'I', 'N', 'F', 'R'};
  CHECK_THROWS_WITH_AS(Model::from_bytes(header_only, "h.fb"), Contains("corrupt"), Error);

  std::mt19937_64 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> bytes(static_cast<size_t>(rng() % 4096));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    if (i % 2 && bytes.size() >= 8) std::memcpy(&bytes[4], "INFR", 4);
    if (i % 2 && bytes.size() >= 4 && i % 4 == 1) {  // a plausible root offset too
      const uint32_t root = static_cast<uint32_t>(rng() % 64) * 4;
      std::memcpy(&bytes[0], &root, 4);
    }
    INFO("random case ", i);
    CHECK_THROWS_AS(Model::from_bytes(bytes, "random.fb"), Error);
    if (i % 30 == 1) write_case("bad_random_" + std::to_string(i), bytes);
  }
}

TEST_CASE("corpus: versions") {
  RawModel m = RawModel::base();
  m.format_version = 7;
  write_case("bad_future_version", m.finish());
  CHECK_THROWS_WITH_AS(Model::from_bytes(m.finish(), "v.fb"),
                       "v.fb: format_version 7 is newer than this build supports (1)", Error);
  m.format_version = 0;
  expect_bad("format_version_0", m, "format_version is 0");
}

TEST_CASE("corpus: hand-broken indices") {
  RawModel m = RawModel::base();
  m.nodes[0].inputs[1] = 99;
  expect_bad("node_input_out_of_range", m, "node 0 'conv' (conv2d): input 1 (weight) is tensor 99 but the model has 10 tensors");
  m = RawModel::base();
  (*m.nodes[2].outputs)[0] = 10;
  expect_bad("node_output_out_of_range", m, "node 2 'tconv' (conv_transpose2d): output 0 is tensor 10");
  m = RawModel::base();
  (*m.inputs)[0] = 12;
  expect_bad("model_input_out_of_range", m, "inputs[0] is tensor 12");
  m = RawModel::base();
  (*m.outputs)[0] = 0xffffffffu;
  expect_bad("model_output_out_of_range", m, "outputs[0] is tensor 4294967295");
  m = RawModel::base();
  m.tensors[1].buffer = 5;
  expect_bad("buffer_out_of_range", m, "tensor 1 'conv.w': field buffer is 5 but the model has 5 buffers");
  m = RawModel::base();
  m.tensors[1].buffer = 0xffffffffu;
  expect_bad("buffer_out_of_range_max", m, "field buffer");
}

TEST_CASE("corpus: hand-broken buffers and dims") {
  RawModel m = RawModel::base();
  (*m.buffers)[1].resize(54 * 4 - 4);
  expect_bad("buffer_size_mismatch", m, "tensor 1 'conv.w': buffer 1 holds 212 bytes but shape 3x2x3x3 in f32 needs 216");
  m = RawModel::base();
  (*m.buffers)[3].resize(96);  // f16 weights stored with f32's size
  expect_bad("buffer_size_f16", m, "holds 96 bytes but shape 3x2x2x2 in f16 needs 48");
  m = RawModel::base();
  (*m.buffers)[0] = {1, 2, 3, 4};
  expect_bad("buffer0_not_empty", m, "buffers[0] must be empty");
  m = RawModel::base();
  m.buffers.reset();
  expect_bad("no_buffers", m, "field buffers is missing");
  m = RawModel::base();
  m.tensors[3].shape = std::vector<int64_t>{-1, 3, -6, 6};
  expect_bad("negative_dim", m, "tensor 3 'conv': field shape -1x3x-6x6 has dimension -6");
  m = RawModel::base();
  m.tensors[0].shape = std::vector<int64_t>{-1, 0, 6, 6};
  expect_bad("zero_dim", m, "has dimension 0");
  m = RawModel::base();
  m.tensors[0].shape = std::vector<int64_t>{-2, 2, 6, 6};
  expect_bad("negative_batch", m, "has dimension -2");
  m = RawModel::base();
  m.tensors[1].shape = std::vector<int64_t>{-1, 2, 3, 3};
  expect_bad("constant_batch_dim", m, "constant dims must be > 0");
  m = RawModel::base();
  m.tensors[8].shape = std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40};
  expect_bad("overflow_constant", m, "tensor 8 'dense.w': field shape 1099511627776x1099511627776 has more than 2^31 elements");
  m = RawModel::base();
  m.tensors[9].shape = std::vector<int64_t>{-1, int64_t(1) << 40, int64_t(1) << 40};
  expect_bad("overflow_activation", m, "more than 2^31 elements");
  m = RawModel::base();
  m.tensors[9].shape = std::vector<int64_t>{-1, INT64_MAX, INT64_MAX, 4};
  expect_bad("overflow_int64", m, "more than 2^31 elements");
  m = RawModel::base();
  m.tensors[3].misaligned_shape = true;  // the fuzzer's UBSan finding (flatbuffers/buffer.h:77)
  {
    const std::vector<uint8_t> bytes = m.finish();
    const auto* shape = fb::GetModel(bytes.data())->tensors()->Get(3)->shape();
    REQUIRE(reinterpret_cast<uintptr_t>(shape->Data()) % 8 == 4);  // the case really is misaligned
    REQUIRE(flatbuffers::ReadScalar<uint32_t>(shape->Data() + 8) == 3);  // and holds the shape (dim 1)
  }
  expect_bad("misaligned_shape", m, "tensor 3 'conv': field shape is not 8-byte aligned");
  m = RawModel::base();
  m.nodes[3].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    const auto shape = misaligned_longs(fbb, {-1, 72});
    return std::make_pair(fb::Op::Reshape, fb::CreateReshape(fbb, shape).Union());
  };
  expect_bad("misaligned_reshape", m, "node 3 'flat' (reshape): field shape is not 8-byte aligned");
  m = RawModel::base();
  m.tensors[3].shape = std::vector<int64_t>{-1, 1, 1, 1, 1, 1, 1, 1, 1};
  expect_bad("rank_too_large", m, "field shape has rank 9");
  m = RawModel::base();
  m.tensors[4].shape.reset();
  expect_bad("activation_without_shape", m, "tensor 4 'pool': field shape is empty");
  m = RawModel::base();
  m.tensors[2].dtype = 9;
  expect_bad("unknown_dtype", m, "tensor 2 'conv.b': field dtype has unknown value 9");
}

TEST_CASE("corpus: hand-broken op parameters") {
  RawModel m = RawModel::base();
  std::get<Conv2DParams>(m.nodes[0].params).stride_h = 0;
  expect_bad("stride_0", m, "node 0 'conv' (conv2d): field stride_h must be > 0 (got 0)");
  m = RawModel::base();
  std::get<Conv2DParams>(m.nodes[0].params).stride_w = -3;
  expect_bad("stride_negative", m, "field stride_w must be > 0 (got -3)");
  m = RawModel::base();
  std::get<Conv2DParams>(m.nodes[0].params).pad.top = 3;
  expect_bad("padding_ge_kernel", m, "field padding.top must be < kernel height 3 (got 3)");
  m = RawModel::base();
  std::get<Conv2DParams>(m.nodes[0].params).pad.left = -1;
  expect_bad("padding_negative", m, "field padding.left must be >= 0 (got -1)");
  m = RawModel::base();
  std::get<Pool2DParams>(m.nodes[1].params).pad.bottom = 2;
  expect_bad("pool_padding_ge_kernel", m, "node 1 'pool' (pool2d): field padding.bottom must be < kernel height 2");
  m = RawModel::base();
  std::get<Pool2DParams>(m.nodes[1].params).kernel_w = 0;
  expect_bad("pool_kernel_0", m, "field kernel_w must be > 0 (got 0)");
  m = RawModel::base();
  std::get<Pool2DParams>(m.nodes[1].params).kernel_h = 9;
  expect_bad("pool_kernel_too_large", m, "kernel height 9 is larger than the padded input height 6");
  m = RawModel::base();
  std::get<Conv2DParams>(m.nodes[0].params).dilation_h = 0;
  expect_bad("dilation_0", m, "field dilation_h must be > 0 (got 0)");
  m = RawModel::base();
  std::get<Conv2DParams>(m.nodes[0].params).groups = 3;
  expect_bad("groups_3", m, "node 0 'conv' (conv2d): field groups 3 must divide input channels 2 and output channels 3");
  m = RawModel::base();
  std::get<Conv2DParams>(m.nodes[0].params).groups = -1;
  expect_bad("groups_negative", m, "field groups must be > 0 (got -1)");
  m = RawModel::base();
  std::get<Conv2DParams>(m.nodes[0].params).dilation_w = 4;  // 3x3 spans 9 > 6 + 2
  expect_bad("dilation_too_large", m, "kernel width 9 is larger than the padded input width 8");
  m = RawModel::base();
  std::get<ConvTranspose2DParams>(m.nodes[2].params).dilation_w = 0;
  expect_bad("tconv_dilation_0", m, "node 2 'tconv' (conv_transpose2d): field dilation_w must be > 0 (got 0)");
  m = RawModel::base();
  std::get<ConvTranspose2DParams>(m.nodes[2].params).groups = 2;  // 3 input channels
  expect_bad("tconv_groups_2", m, "node 2 'tconv' (conv_transpose2d): field groups 2 must divide input channels 3");
  m = RawModel::base();
  std::get<ConvTranspose2DParams>(m.nodes[2].params).groups = 0;
  expect_bad("tconv_groups_0", m, "node 2 'tconv' (conv_transpose2d): field groups must be > 0 (got 0)");
  m = RawModel::base();
  std::get<ConvTranspose2DParams>(m.nodes[2].params).output_padding_h = 2;
  expect_bad("output_padding_ge_stride", m, "node 2 'tconv' (conv_transpose2d): field output_padding_h must be < stride 2 (got 2)");
  m = RawModel::base();
  std::get<ConvTranspose2DParams>(m.nodes[2].params).stride_h = 0;
  expect_bad("tconv_stride_0", m, "field stride_h must be > 0");
  m = RawModel::base();
  std::get<ConvTranspose2DParams>(m.nodes[2].params).stride_h = 0x7fffffff;
  expect_bad("tconv_huge_stride", m, "declared");
  m = RawModel::base();
  ConvPool2DParams cp;
  cp.conv.pad = {1, 1, 1, 1};
  cp.pool = 0;
  m.nodes[0].params = cp;
  expect_bad("conv_pool_0", m, "node 0 'conv' (conv_pool2d): field pool must be >= 1 (got 0)");
  cp.pool = 1;
  cp.conv.stride_w = 0;
  m.nodes[0].params = cp;
  expect_bad("conv_pool_stride_0", m, "field conv.stride_w must be > 0");
  m = RawModel::base();
  m.nodes[3].params = FlattenParams{4};
  expect_bad("flatten_axis", m, "node 3 'flat' (flatten): field axis must be in [1, 3] (got 4)");
  m = RawModel::base();
  m.nodes[3].params = ReshapeParams{{-1, -1}};
  expect_bad("reshape_two_unknown", m, "field shape[1] is a second -1");
  m = RawModel::base();
  m.nodes[3].params = ReshapeParams{{70}};
  expect_bad("reshape_count", m, "field shape 70 has 70 elements per sample but input 0 (1x2x6x6) has 72");
  m = RawModel::base();
  m.nodes[3].params = SoftmaxParams{-1};
  expect_bad("softmax_axis", m, "field axis must be in [1, 3] (got -1)");
  m = RawModel::base();
  m.nodes[0].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    return std::make_pair(fb::Op::Conv2D,
                          fb::CreateConv2D(fbb, 1, 1, nullptr, 1, 1, static_cast<fb::ActivationKind>(15)).Union());
  };
  expect_bad("unknown_activation", m, "node 0 'conv' (conv2d): field activation has unknown value 15");
  // The activation parameters: Clip needs min <= max; alpha and beta finite for every kind.
  const auto conv_act = [](fb::ActivationKind kind, float alpha, float beta) {
    return [=](flatbuffers::FlatBufferBuilder& fbb) {
      const fb::Padding pad(1, 1, 1, 1);
      return std::make_pair(fb::Op::Conv2D, fb::CreateConv2D(fbb, 1, 1, &pad, 1, 1, kind, alpha, beta).Union());
    };
  };
  m = RawModel::base();
  m.nodes[0].custom = conv_act(fb::ActivationKind::Clip, 7.f, 6.f);
  expect_bad("clip_min_above_max", m,
             "node 0 'conv' (conv2d): field activation_alpha (clip min 7) must be <= activation_beta (clip max 6)");
  m = RawModel::base();
  m.nodes[0].custom = conv_act(fb::ActivationKind::HardSigmoid, 0.2f, std::numeric_limits<float>::quiet_NaN());
  expect_bad("activation_beta_nan", m, "field activation_beta must be finite");
  m = RawModel::base();
  m.nodes[0].custom = conv_act(fb::ActivationKind::Clip, -std::numeric_limits<float>::infinity(), 6.f);
  expect_bad("clip_min_inf", m, "field activation_alpha must be finite");
  m = RawModel::base();
  m.nodes[1].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    return std::make_pair(fb::Op::Pool2D,
                          fb::CreatePool2D(fbb, static_cast<fb::PoolKind>(-3), 2, 2, 2, 2).Union());
  };
  expect_bad("unknown_pool_kind", m, "node 1 'pool' (pool2d): field kind has unknown value -3");
  m = RawModel::base();
  m.nodes[1].inputs = {3, 2};
  m.nodes[1].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    return std::make_pair(fb::Op::Binary, fb::CreateBinary(fbb, static_cast<fb::BinaryKind>(7)).Union());
  };
  expect_bad("unknown_binary_kind", m, "node 1 'pool' (binary): field kind has unknown value 7");
  m = RawModel::base();
  m.nodes[1].inputs = {1, 2};
  m.nodes[1].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    return std::make_pair(fb::Op::Binary, fb::CreateBinary(fbb, fb::BinaryKind::Mul).Union());
  };
  expect_bad("binary_all_constant", m, "node 1 'pool' (binary): every input is a constant");
  m = RawModel::base();
  m.nodes[1].inputs = {3, 2};  // [N,3,6,6] with [3]: the last dims 6 and 3 do not broadcast
  m.nodes[1].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    return std::make_pair(fb::Op::Binary, fb::CreateBinary(fbb, fb::BinaryKind::Div).Union());
  };
  expect_bad("binary_no_broadcast", m, "node 1 'pool' (binary): input 1 has shape 3 which does not broadcast with input 0's 1x3x6x6");
}

TEST_CASE("corpus: hand-broken graph structure") {
  RawModel m = RawModel::base();
  std::swap(m.nodes[1], m.nodes[2]);
  expect_bad("reads_later_output", m, "node 1 'tconv' (conv_transpose2d): input 0 is tensor 4 'pool', which is produced later (by node 2 'pool')");
  m = RawModel::base();
  (*m.nodes[1].outputs)[0] = 3;
  expect_bad("produced_twice", m, "tensor 3 'conv' is produced twice (by node 0 'conv' and node 1 'pool')");
  m = RawModel::base();
  m.nodes[1].inputs[0] = 4;
  expect_bad("reads_own_output", m, "node 1 'pool' (pool2d): input 0 is tensor 4 'pool', the node's own output");
  m = RawModel::base();
  m.tensors.push_back({"dangling", std::vector<int64_t>{-1, 4}, 0, 0});
  (*m.outputs)[0] = 10;
  expect_bad("output_never_produced", m, "outputs[0] is tensor 10 'dangling', which no node produces");
  m = RawModel::base();
  m.outputs = std::vector<uint32_t>{0};
  expect_bad("output_is_input", m, "outputs[0] is tensor 0 'x', which no node produces");
  m = RawModel::base();
  m.tensors.push_back({"orphan", std::vector<int64_t>{-1, 72}, 0, 0});
  m.nodes[4].inputs[0] = 10;
  expect_bad("reads_unproduced", m, "input 0 is tensor 10 'orphan', which no node produces and is not a model input");
  m = RawModel::base();
  m.tensors[1].buffer = 0;
  expect_bad("weight_as_activation", m, "node 0 'conv' (conv2d): input 1 (weight) is tensor 1 'conv.w', an activation; it must be a constant");
  m = RawModel::base();
  m.nodes[3].inputs[0] = 8;
  expect_bad("constant_as_data", m, "input 0 is tensor 8 'dense.w', a constant; it must be an activation");
  m = RawModel::base();
  (*m.nodes[4].outputs)[0] = 8;
  expect_bad("output_is_constant", m, "output 0 is tensor 8 'dense.w', a constant");
  m = RawModel::base();
  (*m.nodes[0].outputs)[0] = 0;
  expect_bad("output_is_model_input", m, "output 0 is tensor 0 'x', a model input");
  m = RawModel::base();
  m.nodes[0].custom = [](flatbuffers::FlatBufferBuilder&) {
    return std::make_pair(fb::Op::NONE, flatbuffers::Offset<void>(0));
  };
  expect_bad("missing_options", m, "node 0 'conv': options are missing");
  m = RawModel::base();
  m.nodes[0].custom = [](flatbuffers::FlatBufferBuilder&) {
    return std::make_pair(fb::Op::Conv2D, flatbuffers::Offset<void>(0));
  };
  expect_bad("missing_options_table", m, "node 0 'conv': options are missing");
  m = RawModel::base();
  m.nodes[0].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    return std::make_pair(static_cast<fb::Op>(int(fb::Op::MAX) + 1), fb::CreateFlatten(fbb).Union());
  };
  expect_bad("unknown_options_type", m,
             "node 0 'conv': options have unknown type " + std::to_string(int(fb::Op::MAX) + 1));
  m = RawModel::base();
  m.nodes[0].outputs->push_back(4);
  expect_bad("two_outputs", m, "node 0 'conv' (conv2d): has 2 outputs");
  m = RawModel::base();
  m.nodes[0].outputs.reset();
  expect_bad("no_outputs_field", m, "has 0 outputs");
  m = RawModel::base();
  m.nodes[0].inputs.resize(1);
  expect_bad("conv_one_input", m, "node 0 'conv' (conv2d): expects 2 or 3 inputs, got 1");
  m = RawModel::base();
  m.tensors[0].shape = std::vector<int64_t>{-1, 4, 6, 6};
  expect_bad("channel_mismatch", m, "input 1 (weight) has 2 input channels but input 0 has 4");
  m = RawModel::base();
  m.tensors[3].shape = std::vector<int64_t>{-1, 3, 5, 5};
  expect_bad("declared_shape_mismatch", m, "node 0 'conv' (conv2d): output 0 'conv' is declared -1x3x5x5 but the op computes 1x3x6x6");
  m = RawModel::base();
  m.tensors[9].shape = std::vector<int64_t>{-1, 4, 1};
  expect_bad("declared_rank_mismatch", m, "output 0 'dense' is declared -1x4x1");
  m = RawModel::base();
  m.inputs = std::vector<uint32_t>{1};
  expect_bad("input_is_constant", m, "inputs[0] is tensor 1 'conv.w', a constant");
  m = RawModel::base();
  m.inputs = std::vector<uint32_t>{0, 0};
  expect_bad("input_twice", m, "listed twice");
  m = RawModel::base();
  m.inputs.reset();
  expect_bad("no_inputs", m, "model has no inputs");
  m = RawModel::base();
  m.outputs = std::vector<uint32_t>{};
  expect_bad("no_outputs", m, "model has no outputs");
  m = RawModel::base();
  m.nodes.clear();
  expect_bad("no_nodes", m, "model has no nodes");
  m = RawModel::base();
  m.tensors.clear();
  expect_bad("no_tensors", m, "model has no tensors");
  m = RawModel::base();
  m.metadata = {{"task", "a"}, {"task", "b"}};
  expect_bad("metadata_twice", m, "metadata key 'task' appears twice");
}

TEST_CASE("corpus: messages without names fall back to indices") {
  RawModel m = RawModel::base();
  for (auto& t : m.tensors) t.name.reset();
  for (auto& n : m.nodes) n.name.reset();
  const auto ok = m.finish();
  const Model loaded = Model::from_bytes(ok);
  CHECK(loaded.inputs()[0].name == "tensor 0");
  CHECK(loaded.graph().nodes[2].name == "node 2");
  std::get<ConvTranspose2DParams>(m.nodes[2].params).stride_w = 0;
  expect_bad("unnamed_stride_0", m, "node 2 (conv_transpose2d): field stride_w must be > 0");
  m.nodes[2].params = ConvTranspose2DParams{};
  m.tensors[8].buffer = 9;
  expect_bad("unnamed_buffer", m, "tensor 8: field buffer is 9");
}

TEST_CASE("Model::load: file errors carry strerror's text") {
  CHECK_THROWS_WITH_AS(Model::load("/nonexistent/model.fb"),
                       "/nonexistent/model.fb: cannot open: No such file or directory", Error);
  CHECK_THROWS_WITH_AS(Model::load("/tmp"), "/tmp: cannot read: Is a directory", Error);
  CHECK_THROWS_WITH_AS(Model::load("/dev/null"), Contains("/dev/null: cannot read: not a regular file"), Error);
  const std::string empty = corpus_dir() + "/bad_empty_file.fb";
  { std::ofstream f(empty, std::ios::trunc); }
  const std::string empty_message = empty + ": file is empty";
  CHECK_THROWS_WITH_AS(Model::load(empty), empty_message.c_str(), Error);
  if (::geteuid() != 0) {  // root reads anything
    const std::string locked = corpus_dir() + "/unreadable.fb";
    { std::ofstream f(locked, std::ios::trunc); f << "x"; }
    ::chmod(locked.c_str(), 0);
    const std::string denied = locked + ": cannot open: Permission denied";
    CHECK_THROWS_WITH_AS(Model::load(locked), denied.c_str(), Error);
    std::remove(locked.c_str());
  }
  // Every corpus file through the mmap front end: bad_* are rejected, valid_* load, fuzz_* either.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus_dir())) {
    const std::string path = entry.path().string();
    const std::string name = entry.path().filename().string();
    INFO("corpus file ", name);
    ++files;
    if (name.rfind("bad_", 0) == 0) {
      const std::string prefix = path + ": ";
      CHECK_THROWS_WITH_AS(Model::load(path), Contains(prefix.c_str()), Error);
    } else if (name.rfind("valid_", 0) == 0) {
      CHECK(Model::load(path).num_nodes() > 0);
    } else {
      try {
        Model::load(path);
      } catch (const Error&) {
      }
    }
  }
  MESSAGE("corpus files: " << files);
}

TEST_CASE("Conv2D groups: files written before the field load with groups 1; written values load") {
  // fuzz/corpus/model/valid_all_ops.fb was committed before Conv2D had `groups` (schema evolution)
  std::ifstream f(std::string(INFER_SOURCE_DIR) + "/fuzz/corpus/model/valid_all_ops.fb", std::ios::binary);
  REQUIRE(f.good());
  const std::vector<uint8_t> old((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const Model m = Model::from_bytes(old, "valid_all_ops.fb");
  int convs = 0;
  for (const auto& n : m.graph().nodes)
    if (const auto* c = std::get_if<Conv2DParams>(&n.params)) {
      CHECK(c->groups == 1);
      ++convs;
    }
  CHECK(convs >= 1);

  ModelBuilder b("grouped");
  const int x = b.input("x", {-1, 4, 7, 7});
  Conv2DParams p;
  p.groups = 4;
  p.dilation_h = 2;
  p.dilation_w = 3;
  p.pad = {2, 3, 2, 3};
  b.output(b.node("dw", p, {x, b.constant("dw.w", {8, 1, 3, 3}, test::random_vector(72, 5))}));
  const Model g = Model::from_bytes(b.finish(), "grouped.fb");
  const auto& q = std::get<Conv2DParams>(g.graph().nodes.at(0).params);
  CHECK(q.groups == 4);
  CHECK(q.dilation_h == 2);
  CHECK(q.dilation_w == 3);
  CHECK(g.outputs()[0].shape == Shape{-1, 8, 7, 7});
}

TEST_CASE("ConvTranspose2D groups: files written before the field load with groups 1; written values load") {
  // valid_all_ops.fb predates ConvTranspose2D's `groups` (schema evolution): its vtable lacks the field
  std::ifstream f(std::string(INFER_SOURCE_DIR) + "/fuzz/corpus/model/valid_all_ops.fb", std::ios::binary);
  REQUIRE(f.good());
  const std::vector<uint8_t> old((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const fb::Model* raw = fb::GetModel(old.data());
  int tconvs = 0;
  for (const fb::Node* n : *raw->nodes())
    if (const fb::ConvTranspose2D* t = n->options_as_ConvTranspose2D()) {
      CHECK_FALSE(reinterpret_cast<const flatbuffers::Table*>(t)->CheckField(fb::ConvTranspose2D::VT_GROUPS));
      ++tconvs;
    }
  REQUIRE(tconvs >= 1);
  const Model m = Model::from_bytes(old, "valid_all_ops.fb");
  for (const auto& n : m.graph().nodes)
    if (const auto* t = std::get_if<ConvTranspose2DParams>(&n.params)) {
      CHECK(t->groups == 1);
      CHECK(t->dilation_h == 1);
      CHECK(t->dilation_w == 1);
    }

  // A table written field by field with the old fields only, as an old writer did: groups reads as 1.
  RawModel r = RawModel::base();
  r.nodes[2].custom = [](flatbuffers::FlatBufferBuilder& fbb) {
    fb::ConvTranspose2DBuilder t(fbb);
    t.add_stride_h(2);
    t.add_stride_w(2);
    t.add_activation(fb::ActivationKind::Relu);
    return std::make_pair(fb::Op::ConvTranspose2D, t.Finish().Union());
  };
  const Model o = Model::from_bytes(r.finish(), "old_tconv.fb");
  const auto& ot = std::get<ConvTranspose2DParams>(o.graph().nodes.at(2).params);
  CHECK(ot.groups == 1);
  CHECK(ot.activation.kind == ActivationKind::Relu);

  // Written by the builder: groups, dilation and output_padding < dilation round-trip.
  ModelBuilder b("grouped_tconv");
  const int x = b.input("x", {-1, 6, 5, 4});
  ConvTranspose2DParams p;
  p.groups = 3;
  p.stride_h = 2;
  p.dilation_h = 3;
  p.dilation_w = 2;
  p.output_padding_h = 2;  // < dilation 3 (stride 2)
  p.output_padding_w = 1;  // < dilation 2 (stride 1)
  p.pad = {1, 0, 2, 1};
  b.output(b.node("up", p, {x, b.constant("up.w", {6, 2, 3, 2}, test::random_vector(72, 6))}));
  const Model g = Model::from_bytes(b.finish(), "grouped_tconv.fb");
  const auto& q = std::get<ConvTranspose2DParams>(g.graph().nodes.at(0).params);
  CHECK(q.groups == 3);
  CHECK(q.dilation_h == 3);
  CHECK(q.dilation_w == 2);
  CHECK(q.output_padding_h == 2);
  // H: (5-1)*2 - 3 + 3*2+1 + 2 = 14; W: (4-1)*1 - 1 + 2*1+1 + 1 = 6; C_out = 2 * 3
  CHECK(g.outputs()[0].shape == Shape{-1, 6, 14, 6});
}

TEST_CASE("load_graph: misaligned memory is copied, not read unaligned") {
  const auto valid = RawModel::base().finish();
  auto storage = std::make_shared<std::vector<uint8_t>>(valid.size() + 1);
  std::memcpy(storage->data() + 1, valid.data(), valid.size());
  const uint8_t* data = storage->data() + 1;
  auto g = detail::load_graph(storage, data, valid.size(), "shifted.fb");
  REQUIRE(g->values.size() == 10);
  CHECK(reinterpret_cast<uintptr_t>(g->values[1].data) % alignof(float) == 0);
  float first;
  std::memcpy(&first, &(*RawModel::base().buffers)[1][0], 4);
  CHECK(g->values[1].data[0] == first);
}
