// ONNX import (apps/onnx2fb) against PyTorch: every golden case (tests/golden/make_golden.py, a ctest
// fixture, into GOLDEN_DIR) is converted by onnx2fb and run on every backend this build has within rel err
// 1e-5 of PyTorch's float64 forward. Also: model-zoo --weights and onnx2fb agree, metadata passes through,
// unsupported ops fail in one listing error, hostile protobuf is an error (exit 2) never a crash, and
// hand-built graphs (Upsample at opsets 7-9, Resize-10, shuffle chains, refusals) say what they import.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "graph.h"
#include "infer/infer.h"
#include "npy.h"
#include "onnx_import.h"
#include "test_util.h"

using namespace infer;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = GOLDEN_DIR;
const std::string kWork = std::string(INFER_BINARY_DIR) + "/tests/onnx_work";

struct Result {
  int code = -1;
  std::string output;  // stdout + stderr
};

Result run(const std::string& command) {
  Result r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

Result onnx2fb(const std::string& args) { return run(quote(ONNX2FB_BIN) + " " + args); }

nlohmann::json manifest() {
  std::ifstream f(kGolden + "/manifest.json");
  REQUIRE_MESSAGE(f.good(), "no golden data: run the golden_data ctest fixture (tests/golden)");
  return nlohmann::json::parse(f);
}

std::string convert(const std::string& onnx_file, const std::string& name, const std::string& flags = "") {
  fs::create_directories(kWork);
  const std::string out = kWork + "/" + name + ".fb";
  const Result r = onnx2fb(quote(kGolden + "/" + onnx_file) + " " + quote(out) + " " + flags);
  INFO(r.output);
  REQUIRE(r.code == 0);
  return out;
}

// The first `rows` samples of a batch tensor.
Tensor head(const Tensor& t, int64_t rows) {
  Shape s = t.shape;
  const int64_t per = t.numel() / s[0];
  s[0] = rows;
  return Tensor(s, std::vector<float>(t.data.begin(), t.data.begin() + rows * per));
}

// Runs `model` on `backend` at the batch of `input`; false when this build lacks the backend.
bool run_on(const Model& model, const std::string& backend, const Tensor& input, Tensor& out) {
  SessionOptions o;
  o.backend = backend;
  o.batch = input.shape[0];
  std::unique_ptr<Session> s;
  try {
    s = std::make_unique<Session>(model, o);
  } catch (const Error& e) {
    if (backend == "cuda" && std::string(e.what()).find("CUDA") != std::string::npos) return false;
    throw;
  }
  std::vector<Tensor> outs = s->run({input});
  REQUIRE(outs.size() == 1);
  out = std::move(outs[0]);
  return true;
}

const std::vector<std::string> kBackends{"reference", "cpu", "cuda"};

}  // namespace

TEST_CASE("golden: every ONNX case matches PyTorch on every backend (rel err <= 1e-5)") {
  const nlohmann::json m = manifest();
  REQUIRE(m["cases"].size() >= 30);
  int random_nets = 0;
  for (const auto& c : m["cases"]) {
    const std::string name = c["name"];
    CAPTURE(name);
    if (name.rfind("random", 0) == 0) ++random_nets;
    const Model model = Model::load(convert(c["onnx"], name));
    REQUIRE(model.inputs().size() == 1);
    if (c.contains("activations")) {  // each exported activation (or x * gate pattern) is one node
      std::set<std::string> kinds;
      for (const auto& n : model.graph().nodes)
        if (auto* a = std::get_if<ActivationParams>(&n.params)) kinds.insert(activation_name(a->activation.kind));
      for (const auto& want : c["activations"]) CHECK(kinds.count(want.get<std::string>()) == 1);
    }
    CHECK(model.inputs()[0].shape[0] == -1);  // the ONNX batch (symbolic or 1) became -1
    if (c.contains("ops")) {  // the node ops onnx2fb must have written, in order
      std::vector<std::string> ops;
      for (const auto& n : model.graph().nodes) ops.push_back(op_name(n.op()));
      CHECK(ops == c["ops"].get<std::vector<std::string>>());
    }
    Tensor input = read_npy(kGolden + "/" + c["input"].get<std::string>());
    Tensor expected = read_npy(kGolden + "/" + c["output"].get<std::string>());
    // The reference EB-GAN is ~3.9 G multiply-adds per sample in double loops: one sample suffices.
    if (c.value("zoo", "") == "ebgan") {
      input = head(input, 1);
      expected = head(expected, 1);
    }
    for (const std::string& backend : kBackends) {
      CAPTURE(backend);
      Tensor out;
      if (!run_on(model, backend, input, out)) continue;
      REQUIRE(out.shape.size() >= 2);
      CHECK(out.numel() == expected.numel());
      CHECK(test::all_finite(out.data));
      CHECK(test::rel_error(out.data, expected.data) <= 1e-5);
    }
  }
  CHECK(random_nets >= 20);
}

TEST_CASE("golden: --fp16 weights stay within 1e-2 of PyTorch") {
  const Model model = Model::load(convert("lenet5_op13.onnx", "lenet5_fp16", "--fp16"));
  const Tensor input = read_npy(kGolden + "/lenet5.in.npy");
  const Tensor expected = read_npy(kGolden + "/lenet5.out.npy");
  CHECK(model.weight_bytes() == 61706 * 2);
  Tensor out;
  REQUIRE(run_on(model, "reference", input, out));
  const double err = test::rel_error(out.data, expected.data);
  CHECK(err <= 1e-2);
  CHECK(err > 0);  // the weights really were rounded
}

TEST_CASE("model-zoo --weights and onnx2fb give identical models for the same weights") {
  const nlohmann::json m = manifest();
  int compared = 0;
  for (const auto& c : m["cases"]) {
    if (!c.contains("weights") || c["weights"].is_null() || c["opset"] != 13) continue;
    const std::string zoo = c["zoo"];
    CAPTURE(zoo);
    const std::string zoo_file = kWork + "/" + zoo + "_zoo.fb";
    std::string cmd = quote(MODEL_ZOO_BIN) + " " + zoo + " -o " + quote(zoo_file) + " --weights " +
                      quote(kGolden + "/" + c["weights"].get<std::string>());
    if (c["image_size"].get<int>() > 0) cmd += " --image-size " + std::to_string(c["image_size"].get<int>());
    const Result r = run(cmd);
    INFO(r.output);
    REQUIRE(r.code == 0);
    const Model a = Model::load(zoo_file);
    const Model b = Model::load(convert(c["onnx"], zoo + "_onnx"));
    const detail::Graph& ga = a.graph();
    const detail::Graph& gb = b.graph();
    REQUIRE(ga.nodes.size() == gb.nodes.size());
    for (size_t i = 0; i < ga.nodes.size(); ++i) {
      const detail::Node& na = ga.nodes[i];
      const detail::Node& nb = gb.nodes[i];
      CAPTURE(na.name);
      REQUIRE(na.op() == nb.op());
      REQUIRE(na.inputs.size() == nb.inputs.size());
      CHECK(ga.values[na.outputs[0]].shape == gb.values[nb.outputs[0]].shape);
      for (size_t k = 0; k < na.inputs.size(); ++k) {
        const detail::Value& va = ga.values[na.inputs[k]];
        const detail::Value& vb = gb.values[nb.inputs[k]];
        REQUIRE(va.is_constant() == vb.is_constant());
        if (!va.is_constant()) continue;
        REQUIRE(va.shape == vb.shape);
        CHECK(std::memcmp(va.data, vb.data, sizeof(float) * shape_numel(va.shape)) == 0);
      }
    }
    const Tensor input = read_npy(kGolden + "/" + c["input"].get<std::string>());
    for (const std::string& backend : kBackends) {
      CAPTURE(backend);
      Tensor oa, ob;
      if (!run_on(a, backend, input, oa)) continue;
      REQUIRE(run_on(b, backend, input, ob));
      CHECK(oa.shape == ob.shape);
      CHECK(oa.data == ob.data);  // bit for bit
    }
    ++compared;
  }
  CHECK(compared >= 4);  // lenet5, alexnet, vgg11, dcgan
}

TEST_CASE("metadata_props pass through byte-exact; --metadata adds and wins") {
  const nlohmann::json meta = manifest()["metadata"];
  const std::string onnx_file = kGolden + "/" + meta["onnx"].get<std::string>();
  onnx::ModelProto proto;
  {
    const std::vector<uint8_t> bytes = read_file(onnx_file);
    REQUIRE(proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  }
  REQUIRE(proto.metadata_props_size() == static_cast<int>(meta["keys"].size()));
  const Model plain = Model::load(convert(meta["onnx"], "meta_plain"));
  CHECK(plain.metadata().size() == static_cast<size_t>(proto.metadata_props_size()));
  for (const auto& e : proto.metadata_props()) {
    CAPTURE(e.key());
    REQUIRE(plain.metadata().count(e.key()) == 1);
    CHECK(plain.metadata().at(e.key()) == e.value());
  }
  CHECK(plain.meta("unicode") == "h\xc3\xa9llo \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac");
  CHECK(plain.meta("empty", "absent") == "");

  const Model extra = Model::load(convert(meta["onnx"], "meta_extra",
                                          "--metadata task=generator --metadata 'note=a=b c' --name lenet"));
  CHECK(extra.name() == "lenet");
  CHECK(extra.meta("task") == "generator");
  CHECK(extra.meta("note") == "a=b c");
  CHECK(extra.meta("labels") == plain.meta("labels"));
}

TEST_CASE("unsupported ops: one error listing every op type with its node names, exit 2") {
  const nlohmann::json u = manifest()["unsupported"];
  const Result r = onnx2fb(quote(kGolden + "/" + u["onnx"].get<std::string>()) + " " + quote(kWork + "/bad.fb"));
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.rfind("error: ", 0) == 0);
  CHECK(r.output.find('\n') == r.output.size() - 1);  // one line
  CHECK(r.output.find("unsupported ONNX ops") != std::string::npos);
  REQUIRE(u["ops"].size() == 3);
  for (const auto& [op, nodes] : u["ops"].items()) {
    CHECK(r.output.find(op + " (") != std::string::npos);
    for (const auto& n : nodes) CHECK(r.output.find(n.get<std::string>()) != std::string::npos);
  }
  CHECK(!fs::exists(kWork + "/bad.fb"));
}

TEST_CASE("malformed input: exit 2 with one error line; usage errors exit 1") {
  fs::create_directories(kWork);
  const std::vector<uint8_t> good = read_file(kGolden + "/lenet5_op13.onnx");
  std::map<std::string, std::vector<uint8_t>> files;
  files["empty"] = {};
  files["garbage"] = std::vector<uint8_t>(1000);
  for (size_t i = 0; i < 1000; ++i) files["garbage"][i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  files["truncated"] = std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2);
  files["truncated_header"] = std::vector<uint8_t>(good.begin(), good.begin() + 40);
  // Flipped bytes inside the file: may parse (to something meaningless) or not; never a crash.
  for (int k = 0; k < 8; ++k) {
    std::vector<uint8_t> bent = good;
    for (size_t i = 17 + k * 131; i < bent.size(); i += 997 + k) bent[i] ^= static_cast<uint8_t>(0x5a + k);
    files["bent" + std::to_string(k)] = bent;
  }
  for (const auto& [name, bytes] : files) {
    CAPTURE(name);
    const std::string path = kWork + "/" + name + ".onnx";
    write_file_atomic(path, bytes);
    const Result r = onnx2fb(quote(path) + " " + quote(kWork + "/" + name + ".fb"));
    INFO(r.output);
    if (name.rfind("bent", 0) == 0) {
      CHECK((r.code == 0 || r.code == 2));
    } else {
      CHECK(r.code == 2);
    }
    if (r.code == 2) {
      CHECK(r.output.rfind("error: ", 0) == 0);
      CHECK(r.output.find('\n') == r.output.size() - 1);
    }
  }
  CHECK(onnx2fb(quote(kWork + "/does-not-exist.onnx") + " " + quote(kWork + "/x.fb")).code == 2);
  CHECK(onnx2fb("").code == 1);
  CHECK(onnx2fb(quote(kGolden + "/handmade.onnx")).code == 1);
  CHECK(onnx2fb(quote(kGolden + "/handmade.onnx") + " x.fb --metadata novalue").code == 1);
  CHECK(onnx2fb(quote(kGolden + "/handmade.onnx") + " x.fb --bogus").code == 1);
}

// ---- hand-built ONNX graphs for the importer's refusals ------------------------------------------

namespace {

onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims, float value) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t.add_float_data(value);
  return t;
}

// input x [1, 2, 6, 6] -> one node `op` with weight W [4, 2, 3, 3] (or [2, 4, 3, 3] for tconv) -> y.
onnx::ModelProto one_node(const std::string& op, const std::vector<int64_t>& w_dims) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  onnx::ValueInfoProto* x = g->add_input();
  x->set_name("x");
  auto* tt = x->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 2, 6, 6}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  *g->add_initializer() = float_tensor("W", w_dims, 0.5f);
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("the_node");
  n->add_input("x");
  n->add_input("W");
  n->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

void add_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void add_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// A model from its ONNX bytes, through the library entry point.
Model import_model(const onnx::ModelProto& m) {
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  return Model::from_bytes(
      onnx_import::import_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), "t", "").finish());
}

std::string import_error(const onnx::ModelProto& m, const std::string& base_dir = "") {
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  try {
    onnx_import::import_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), "test.onnx", base_dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the importer's own model: a hand-built Conv converts and runs") {
  onnx::ModelProto m = one_node("Conv", {4, 2, 3, 3});
  const Model model = import_model(m);
  Tensor x({1, 2, 6, 6}, std::vector<float>(72, 1.f));
  Tensor y;
  REQUIRE(run_on(model, "reference", x, y));
  CHECK(y.shape == Shape{1, 4, 4, 4});
  for (float v : y.data) CHECK(v == doctest::Approx(0.5 * 18));
}

TEST_CASE("Conv with group and dilations imports and runs") {
  // group 2: weight [4, 1, 3, 3] of 0.5 on ones: every output sums 9 taps of one channel
  onnx::ModelProto m = one_node("Conv", {4, 1, 3, 3});
  add_int(m.mutable_graph()->mutable_node(0), "group", 2);
  add_ints(m.mutable_graph()->mutable_node(0), "dilations", {2, 1});
  const Model model = import_model(m);
  Tensor x({1, 2, 6, 6}, std::vector<float>(72, 1.f));
  for (const char* backend : {"reference", "cpu"}) {
    Tensor y;
    REQUIRE(run_on(model, backend, x, y));
    CHECK(y.shape == Shape{1, 4, 2, 4});  // height: 6 - 2*(3-1) - 1 + 1 = 2
    for (float v : y.data) CHECK(v == doctest::Approx(0.5 * 9));
  }
}

TEST_CASE("ConvTranspose with group and dilations imports and runs") {
  // group 2, weight [2, 2, 3, 3] of 0.5 ([C_in, C_out/group, KH, KW]): 4 output channels, each fed by
  // one input channel; dilations (2, 1): H = (6-1) + 2*(3-1) + 1 = 10, W = (6-1) + 3 = 8
  onnx::ModelProto m = one_node("ConvTranspose", {2, 2, 3, 3});
  add_int(m.mutable_graph()->mutable_node(0), "group", 2);
  add_ints(m.mutable_graph()->mutable_node(0), "dilations", {2, 1});
  const Model model = import_model(m);
  const auto& p = std::get<ConvTranspose2DParams>(model.graph().nodes.at(0).params);
  CHECK(p.groups == 2);
  CHECK(p.dilation_h == 2);
  CHECK(p.dilation_w == 1);
  std::vector<float> xv(72, 1.f);
  for (size_t i = 36; i < 72; ++i) xv[i] = 2.f;  // channel 1 (group 1) holds 2
  Tensor x({1, 2, 6, 6}, xv);
  for (const char* backend : {"reference", "cpu"}) {
    CAPTURE(backend);
    Tensor y;
    REQUIRE(run_on(model, backend, x, y));
    CHECK(y.shape == Shape{1, 4, 10, 8});
    // output (4, 2): all 9 taps land on it (input rows 4 - 2*ky and columns 2 - kx are inside)
    for (int co = 0; co < 4; ++co) CHECK(y.data[size_t((co * 10 + 4) * 8 + 2)] == doctest::Approx(co < 2 ? 4.5 : 9.0));
    // output (0, 0): one tap (ky = kx = 0)
    CHECK(y.data[0] == doctest::Approx(0.5));
  }
}

namespace {

// x [1, 2, 6, 6] -> `gate` (Sigmoid / HardSigmoid with `alpha`) -> Mul(mul_a, mul_b) -> y; "s" names
// the gate's output.
onnx::ModelProto gate_model(const std::string& gate, float alpha, const std::string& mul_a,
                            const std::string& mul_b) {
  onnx::ModelProto m = one_node(gate, {1});
  onnx::GraphProto* g = m.mutable_graph();
  g->clear_initializer();
  onnx::NodeProto* n = g->mutable_node(0);
  n->mutable_input()->RemoveLast();
  n->set_output(0, "s");
  if (gate == "HardSigmoid") {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("alpha");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(alpha);
  }
  onnx::NodeProto* mul = g->add_node();
  mul->set_op_type("Mul");
  mul->set_name("the_mul");
  mul->add_input(mul_a);
  mul->add_input(mul_b);
  mul->add_output("y");
  return m;
}

// The activation nodes of an imported model, as "name:kind".
std::vector<std::string> activations_of(const onnx::ModelProto& m) {
  const Model model = import_model(m);
  std::vector<std::string> out;
  for (const auto& n : model.graph().nodes)
    out.push_back(n.name + ":" + (std::holds_alternative<ActivationParams>(n.params)
                                      ? activation_name(std::get<ActivationParams>(n.params).activation.kind)
                                      : op_name(n.op())));
  return out;
}

}  // namespace

TEST_CASE("x * Sigmoid(x) imports as one silu, x * HardSigmoid(x; 1/6, 0.5) as one hard_swish") {
  CHECK(activations_of(gate_model("Sigmoid", 0, "x", "s")) == std::vector<std::string>{"the_mul:silu"});
  CHECK(activations_of(gate_model("Sigmoid", 0, "s", "x")) == std::vector<std::string>{"the_mul:silu"});
  CHECK(activations_of(gate_model("HardSigmoid", 1.f / 6.f, "x", "s")) ==
        std::vector<std::string>{"the_mul:hard_swish"});
  // Not the pattern: another slope, the gate times itself: the gate stays an activation and the Mul
  // a broadcasting binary node.
  CHECK(activations_of(gate_model("HardSigmoid", 0.2f, "x", "s")).back() == "the_mul:binary");
  CHECK(activations_of(gate_model("Sigmoid", 0, "s", "s")).back() == "the_mul:binary");
  // The gate's output also used elsewhere (a graph output): the Sigmoid must stay, so no fusion.
  onnx::ModelProto twice = gate_model("Sigmoid", 0, "x", "s");
  twice.mutable_graph()->add_output()->set_name("s");
  CHECK(import_error(twice).empty());
}

TEST_CASE("Clip: bounds from constant inputs, refused when not scalar constants or min > max") {
  const auto clip = [](const std::vector<std::pair<std::string, float>>& bounds) {
    onnx::ModelProto m = one_node("Clip", {1});
    onnx::GraphProto* g = m.mutable_graph();
    g->clear_initializer();
    onnx::NodeProto* n = g->mutable_node(0);
    n->mutable_input()->RemoveLast();
    for (const auto& [name, value] : bounds) {
      n->add_input(name);
      if (!name.empty()) *g->add_initializer() = float_tensor(name, {}, value);
    }
    return m;
  };
  CHECK(activations_of(clip({{"lo", 0.f}, {"hi", 6.f}})) == std::vector<std::string>{"the_node:clip"});
  CHECK(activations_of(clip({{"lo", 0.f}})) == std::vector<std::string>{"the_node:relu"});
  CHECK(activations_of(clip({{"", 0.f}, {"hi", 1.f}})) == std::vector<std::string>{"the_node:clip"});
  CHECK(import_error(clip({{"lo", 2.f}, {"hi", 1.f}})).find("unsupported: min 2") != std::string::npos);
  onnx::ModelProto wide = clip({{"lo", 0.f}});
  *wide.mutable_graph()->mutable_initializer(0) = float_tensor("lo", {2}, 0.f);
  CHECK(import_error(wide).find("min must be a scalar") != std::string::npos);
  onnx::ModelProto computed = clip({});
  computed.mutable_graph()->mutable_node(0)->add_input("x");  // min = the input itself
  CHECK(import_error(computed).find("must be a constant") != std::string::npos);
}

TEST_CASE("PRelu: slopes [C], [C,1,1], [1,C,1,1], [1] and scalar import and run; others are refused") {
  // x [1,2,6,6]: slope 0.5 everywhere (one_node's W); per channel the channels get 0.5 and -2.
  const auto prelu = [](const std::vector<int64_t>& dims, bool per_channel) {
    onnx::ModelProto m = one_node("PRelu", dims);
    if (per_channel) {
      onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
      w->set_float_data(1, -2.f);
    }
    return m;
  };
  std::vector<float> xv(72);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(i % 7) - 3.f;  // negatives, zero, positives
  const Tensor x({1, 2, 6, 6}, xv);
  struct Case {
    std::vector<int64_t> dims;
    bool per_channel;
    Shape slope;  // as written to the file
  };
  for (const Case& c : {Case{{2, 1, 1}, true, {2}}, Case{{1, 2, 1, 1}, true, {2}}, Case{{1}, false, {1}},
                        Case{{}, false, {1}}, Case{{1, 1, 1}, false, {1}}}) {
    const std::string dims = shape_str(c.dims);
    CAPTURE(dims);
    const Model model = import_model(prelu(c.dims, c.per_channel));
    REQUIRE(model.graph().nodes.size() == 1);
    const auto& node = model.graph().nodes[0];
    CHECK(node.op() == OpType::PRelu);
    CHECK(model.graph().values.at(size_t(node.inputs.at(1))).shape == c.slope);
    for (const char* backend : {"reference", "cpu"}) {
      CAPTURE(backend);
      Tensor y;
      REQUIRE(run_on(model, backend, x, y));
      for (size_t i = 0; i < xv.size(); ++i) {
        const float a = c.per_channel && i >= 36 ? -2.f : 0.5f;
        REQUIRE(y.data[i] == (xv[i] < 0 ? a * xv[i] : xv[i]));
      }
    }
  }
  // a slope along W (valid ONNX broadcasting, not per channel) and a 2-D one: named, refused
  CHECK(import_error(one_node("PRelu", {6})).find("slope of shape [6]") != std::string::npos);
  CHECK(import_error(one_node("PRelu", {2, 6, 6})).find("only one value or one per channel") !=
        std::string::npos);
}

TEST_CASE("Split along channels imports as one slice node per part") {
  const auto split = [](const std::vector<int64_t>& sizes, int64_t axis, int outputs) {
    onnx::ModelProto m = one_node("Split", {1});
    onnx::GraphProto* g = m.mutable_graph();
    onnx::NodeProto* n = g->mutable_node(0);
    n->clear_output();
    g->clear_output();
    if (sizes.empty()) {
      n->mutable_input()->RemoveLast();
    } else {
      n->set_input(1, "split");
      onnx::TensorProto* t = g->mutable_initializer(0);
      t->Clear();
      t->set_name("split");
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(static_cast<int64_t>(sizes.size()));
      for (int64_t v : sizes) t->add_int64_data(v);
    }
    add_int(n, "axis", axis);
    for (int k = 0; k < outputs; ++k) {
      n->add_output("y" + std::to_string(k));
      g->add_output()->set_name("y" + std::to_string(k));
    }
    return m;
  };
  std::string bytes;
  REQUIRE(split({1, 1}, 1, 2).SerializeToString(&bytes));
  const Model model = Model::from_bytes(
      onnx_import::import_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), "t", "").finish());
  REQUIRE(model.num_nodes() == 2);
  CHECK(model.outputs()[0].shape == Shape{-1, 1, 6, 6});
  CHECK(model.outputs()[1].shape == Shape{-1, 1, 6, 6});
  CHECK(std::get<SliceParams>(model.graph().nodes[1].params).start == 1);
  REQUIRE(split({}, 3, 4).SerializeToString(&bytes));  // equal parts of 6: 2, 2, 2, 0 -> refused
  CHECK(import_error(split({}, 3, 4)).find("unsupported: split size 0") != std::string::npos);
  CHECK(import_error(split({}, -1, 3)).empty());
  CHECK(import_error(split({2, 3}, 2, 2)).find("do not add up to 6") != std::string::npos);
  CHECK(import_error(split({1, 1}, 0, 2)).find("unsupported: a split of the batch axis") != std::string::npos);
}

TEST_CASE("unsupported attributes and bad tensors are clear errors") {
  {
    onnx::ModelProto m = one_node("Conv", {4, 1, 3, 3});  // 3 groups do not divide 2 channels
    add_int(m.mutable_graph()->mutable_node(0), "group", 3);
    const std::string e = import_error(m);
    CHECK(e.find("the_node") != std::string::npos);
    CHECK(e.find("field groups 3 must divide input channels 2") != std::string::npos);
  }
  {
    onnx::ModelProto m = one_node("Conv", {4, 2, 3, 3});
    add_ints(m.mutable_graph()->mutable_node(0), "dilations", {0, 1});
    CHECK(import_error(m).find("dilation 0 is out of range") != std::string::npos);
  }
  {  // ConvTranspose takes group and dilations since issue 14; bad values are still errors
    onnx::ModelProto m = one_node("ConvTranspose", {2, 4, 3, 3});
    add_ints(m.mutable_graph()->mutable_node(0), "dilations", {1, 0});
    CHECK(import_error(m).find("dilation 0 is out of range") != std::string::npos);
  }
  {
    onnx::ModelProto m = one_node("ConvTranspose", {2, 4, 3, 3});
    add_int(m.mutable_graph()->mutable_node(0), "group", 3);
    const std::string e = import_error(m);
    CHECK(e.find("the_node") != std::string::npos);
    CHECK(e.find("field groups 3 must divide input channels 2") != std::string::npos);
  }
  {
    onnx::ModelProto m = one_node("MaxPool", {1});
    m.mutable_graph()->mutable_node(0)->mutable_input()->RemoveLast();
    add_ints(m.mutable_graph()->mutable_node(0), "kernel_shape", {2, 2});
    add_int(m.mutable_graph()->mutable_node(0), "ceil_mode", 1);
    CHECK(import_error(m).empty());  // imported since issue 14 (golden maxpool_ceil_* check the values)
    m.mutable_graph()->mutable_node(0)->mutable_attribute()->RemoveLast();
    add_int(m.mutable_graph()->mutable_node(0), "ceil_mode", 2);
    CHECK(import_error(m).find("ceil_mode must be 0 or 1") != std::string::npos);
  }
  {  // ReduceMean: only the spatial axes (global average pooling) of a 4-D input
    const auto mean = [](const std::vector<int64_t>& axes, int64_t keepdims) {
      onnx::ModelProto m = one_node("ReduceMean", {1});
      onnx::NodeProto* n = m.mutable_graph()->mutable_node(0);
      n->mutable_input()->RemoveLast();
      if (!axes.empty()) add_ints(n, "axes", axes);
      add_int(n, "keepdims", keepdims);
      return m;
    };
    CHECK(import_error(mean({3, 2}, 1)).empty());
    CHECK(import_error(mean({-1, -2}, 0)).empty());
    CHECK(import_error(mean({1}, 1)).find("unsupported: axes [1] of a rank-4 input") != std::string::npos);
    CHECK(import_error(mean({1, 2, 3}, 1)).find("unsupported: axes [1,2,3]") != std::string::npos);
    CHECK(import_error(mean({}, 1)).find("unsupported: a mean over every axis") != std::string::npos);
    CHECK(import_error(mean({2, 3}, 2)).find("keepdims must be 0 or 1") != std::string::npos);
    CHECK(import_error(mean({2, 7}, 1)).find("axis 7 is out of range") != std::string::npos);
  }
  {  // Pad: H and W only, modes constant / reflect / edge, reflect pads < size (x is [1,2,6,6])
    const auto pad = [](const std::string& mode, const std::vector<int64_t>& pads) {
      onnx::ModelProto m = one_node("Pad", {1});
      onnx::NodeProto* n = m.mutable_graph()->mutable_node(0);
      n->set_input(1, "pads");
      onnx::TensorProto* t = m.mutable_graph()->mutable_initializer(0);
      t->Clear();
      t->set_name("pads");
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(static_cast<int64_t>(pads.size()));
      for (int64_t v : pads) t->add_int64_data(v);
      onnx::AttributeProto* a = n->add_attribute();
      a->set_name("mode");
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(mode);
      return m;
    };
    CHECK(import_error(pad("reflect", {0, 0, 2, 5, 0, 0, 5, 1})).empty());
    CHECK(import_error(pad("edge", {0, 0, 9, 0, 0, 0, 0, 9})).empty());
    CHECK(import_error(pad("constant", {0, 0, 1, 1, 0, 0, 1, 1})).empty());
    CHECK(import_error(pad("constant", {0, 1, 0, 0, 0, 0, 0, 0})).find(
              "unsupported: pads [0,1,0,0,0,0,0,0] on the batch or channel axis") != std::string::npos);
    CHECK(import_error(pad("wrap", {0, 0, 1, 1, 0, 0, 1, 1})).find("unsupported: mode wrap") !=
          std::string::npos);
    CHECK(import_error(pad("reflect", {0, 0, 6, 0, 0, 0, 0, 0})).find(
              "field padding.top 6 must be < input height 6 in reflect mode") != std::string::npos);
    CHECK(import_error(pad("edge", {0, 0, -1, 0, 0, 0, 0, 0})).find("unsupported: negative pads") !=
          std::string::npos);
    CHECK(import_error(pad("edge", {0, 0, 1, 0})).find("pads must have 8 values") != std::string::npos);
  }
  {  // raw_data that does not match the dims
    onnx::ModelProto m = one_node("Conv", {4, 2, 3, 3});
    onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_float_data();
    w->set_raw_data(std::string(10, '\0'));
    CHECK(import_error(m).find("bytes of data") != std::string::npos);
  }
  {  // dims whose product overflows
    onnx::ModelProto m = one_node("Conv", {4, 2, 3, 3});
    onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_float_data();
    w->clear_dims();
    for (int k = 0; k < 4; ++k) w->add_dims(int64_t{1} << 40);
    CHECK(import_error(m).find("more than 2^29 elements") != std::string::npos);
    w->set_dims(0, -3);
    CHECK(import_error(m).find("negative dimension") != std::string::npos);
  }
  {  // external data: outside the folder, past the end, missing file, in-memory
    fs::create_directories(kWork + "/ext");
    write_file_atomic(kWork + "/ext/w.bin", std::vector<uint8_t>(100, 0));
    const auto with_external = [](const std::string& location, const std::string& offset,
                                  const std::string& length) {
      onnx::ModelProto m = one_node("Conv", {4, 2, 3, 3});
      onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
      w->clear_float_data();
      w->set_data_location(onnx::TensorProto::EXTERNAL);
      const std::pair<std::string, std::string> kv[] = {{"location", location}, {"offset", offset}, {"length", length}};
      for (const auto& [k, v] : kv) {
        auto* e = w->add_external_data();
        e->set_key(k);
        e->set_value(v);
      }
      return m;
    };
    const std::string dir = kWork + "/ext";
    CHECK(import_error(with_external("../ext/w.bin", "0", "288"), dir).find("leaves the model's folder") != std::string::npos);
    CHECK(import_error(with_external("/etc/passwd", "0", "288"), dir).find("is absolute") != std::string::npos);
    CHECK(import_error(with_external("w.bin", "0", "288"), dir).find("past the end") != std::string::npos);
    CHECK(import_error(with_external("w.bin", "200", "8"), dir).find("past the end") != std::string::npos);
    CHECK(import_error(with_external("w.bin", "-1", "8"), dir).find("not a valid number") != std::string::npos);
    CHECK(import_error(with_external("w.bin", "0", "80"), dir).find("bytes of data") != std::string::npos);
    CHECK(import_error(with_external("nope.bin", "0", "288"), dir).find("cannot read external data") != std::string::npos);
    CHECK(import_error(with_external("w.bin", "0", "288"), "").find("not allowed") != std::string::npos);
  }
  {  // opset out of range
    onnx::ModelProto m = one_node("Conv", {4, 2, 3, 3});
    m.mutable_opset_import(0)->set_version(99);
    CHECK(import_error(m).find("opset 99 is not supported") != std::string::npos);
  }
}

namespace {

// input x [batch, 2, 6, 6] -> Conv (W [c_out, 2, 3, 3], all 0.5) -> Reshape to `target` -> y: what
// `x.view(x.size(0), -1)` looks like when traced at a fixed batch (the exporter folds the target).
onnx::ModelProto conv_reshape(int64_t batch, int64_t c_out, const std::vector<int64_t>& target) {
  onnx::ModelProto m = one_node("Conv", {c_out, 2, 3, 3});
  onnx::GraphProto* g = m.mutable_graph();
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(batch);
  g->mutable_node(0)->set_output(0, "c");
  onnx::TensorProto* t = g->add_initializer();
  t->set_name("target");
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(target.size()));
  for (int64_t v : target) t->add_int64_data(v);
  onnx::NodeProto* r = g->add_node();
  r->set_op_type("Reshape");
  r->set_name("the_view");
  r->add_input("c");
  r->add_input("target");
  r->add_output("y");
  return m;
}

}  // namespace

TEST_CASE("a fixed export batch that cannot be told from a number stays fixed; --batch says why") {
  // Batch 4 and 4 channels: is the target's leading 4 the batch or the channel count? The model
  // keeps batch 4, its batch.fixed metadata says why, and a session at another batch quotes it.
  onnx::ModelProto m = conv_reshape(4, 4, {4, -1});
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  fs::create_directories(kWork);
  const std::string onnx_file = kWork + "/pinned.onnx", fb = kWork + "/pinned.fb";
  write_file_atomic(onnx_file, std::vector<uint8_t>(bytes.begin(), bytes.end()));
  Result r = onnx2fb(quote(onnx_file) + " " + quote(fb));
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("note: the model keeps its exported batch 4 (infer --batch takes no other): "
                      "node 'the_view' (Reshape): shape [4,-1] starts with 4, which is both the exported "
                      "batch (input 'x') and a dimension of its input [4,4,4,4]") != std::string::npos);
  const Model model = Model::load(fb);
  CHECK(model.inputs()[0].shape == Shape{4, 2, 6, 6});
  CHECK(model.meta("batch.fixed").find("export at a batch that differs from every other dimension") !=
        std::string::npos);
  Tensor y;
  REQUIRE(run_on(model, "reference", Tensor({4, 2, 6, 6}, std::vector<float>(288, 1.f)), y));
  CHECK(y.shape == Shape{4, 64});
  for (float v : y.data) CHECK(v == doctest::Approx(0.5 * 18));
  r = run(quote(INFER_BIN) + " --model " + quote(fb) + " --batch 5 --out " + quote(kWork + "/pinned.npy"));
  CHECK(r.code != 0);
  CHECK(r.output.find("batch 5 cannot apply: the model has no batch dimension (input 'x' is 4x2x6x6") !=
        std::string::npos);
  CHECK(r.output.find("(batch.fixed: node 'the_view' (Reshape): shape [4,-1] starts with 4") != std::string::npos);
}

TEST_CASE("a fixed export batch becomes the batch dimension; batch-changing targets are clear errors") {
  {  // traced at batch 3: the input and the Reshape target's leading 3 become the batch
    onnx::ModelProto m = conv_reshape(3, 4, {3, -1});
    const Model model = import_model(m);
    CHECK(model.inputs()[0].shape == Shape{-1, 2, 6, 6});
    CHECK(model.outputs()[0].shape == Shape{-1, 64});
    for (int64_t batch : {1, 3, 5}) {
      CAPTURE(batch);
      Tensor y;
      REQUIRE(run_on(model, "cpu", Tensor({batch, 2, 6, 6}, std::vector<float>(batch * 72, 1.f)), y));
      CHECK(y.shape == Shape{batch, 64});
      for (float v : y.data) CHECK(v == doctest::Approx(0.5 * 18));
    }
  }
  CHECK(import_error(conv_reshape(2, 4, {2, 4, 16})).empty());
  CHECK(import_error(conv_reshape(2, 4, {-1, 4, 16})).empty());
  std::string e = import_error(conv_reshape(3, 4, {1, -1}));
  CHECK(e.find("changes the batch dimension (the model was exported at batch 3)") != std::string::npos);
  e = import_error(conv_reshape(3, 4, {6, -1}));
  CHECK(e.find("changes the batch dimension") != std::string::npos);
  {  // two inputs at different fixed batches
    onnx::ModelProto m = conv_reshape(3, 4, {3, -1});
    onnx::ValueInfoProto* x2 = m.mutable_graph()->add_input();
    *x2 = m.graph().input(0);
    x2->set_name("x2");
    x2->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(2);
    CHECK(import_error(m).find("input 'x2' has a fixed batch of 2 but an earlier input has 3") != std::string::npos);
  }
}

TEST_CASE("golden: Add/Sub/Mul/Div import as broadcasting binary nodes") {
  // The nets of make_golden.py's binary_cases (their values are checked by the golden test above).
  struct Want {
    const char* name;
    std::vector<std::pair<BinaryKind, Shape>> binaries;  // kind and the shape of its constant operand
  };
  const std::vector<Want> wants = {
      {"binary_scale", {{BinaryKind::Mul, {1, 5, 1, 1}}, {BinaryKind::Add, {5, 1, 1}}}},
      {"binary_se", {{BinaryKind::Mul, {}}}},                                      // gate: both activations
      {"binary_divconst", {{BinaryKind::Div, {1}}, {BinaryKind::Sub, {1}}}},      // x / 2.5, 1.5 - tanh
      {"binary_sub", {{BinaryKind::Sub, {}}, {BinaryKind::Sub, {}}}}};            // a - b, d - pool(d)
  for (const Want& w : wants) {
    for (int opset : {13, 17}) {
      const std::string name = std::string(w.name) + "_op" + std::to_string(opset);
      CAPTURE(name);
      const Model m = Model::load(convert(name + ".onnx", name));
      std::vector<std::pair<BinaryKind, Shape>> got;
      for (const auto& n : m.graph().nodes) {
        if (n.op() != OpType::Binary) continue;
        Shape constant;
        for (int id : n.inputs)
          if (m.graph().values[size_t(id)].is_constant()) constant = m.graph().values[size_t(id)].shape;
        got.emplace_back(std::get<BinaryParams>(n.params).kind, constant);
      }
      CHECK(got == w.binaries);
    }
  }
}

// ---- Upsample (opset 7-9), Resize-10, and the Reshape -> Transpose -> Reshape chains ----------------

namespace {

onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t.add_int64_data(x);
  return t;
}

void add_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// x [1, 2, 6, 6] -> `op` (Upsample or Resize) in `mode` -> y, at `opset`: scales as the attribute
// below opset 9 (Upsample-7), else as the constant input 1 (Upsample-9, Resize-10).
onnx::ModelProto upsample_model(const std::string& op, int opset, const std::string& mode,
                                const std::vector<float>& scales) {
  onnx::ModelProto m = one_node(op, {1});
  m.mutable_opset_import(0)->set_version(opset);
  onnx::GraphProto* g = m.mutable_graph();
  onnx::NodeProto* n = g->mutable_node(0);
  g->clear_initializer();
  n->mutable_input()->RemoveLast();
  add_string(n, "mode", mode);
  if (opset < 9) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("scales");
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float s : scales) a->add_floats(s);
  } else {
    n->add_input("scales");
    onnx::TensorProto* t = g->add_initializer();
    t->set_name("scales");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(static_cast<int64_t>(scales.size()));
    for (float s : scales) t->add_float_data(s);
  }
  return m;
}

// ONNX Upsample of x [1, 2, 6, 6] holding 0, 1, 2, ...: output floor(6 * s) per axis, source index
// o / s ("asymmetric"); nearest takes its floor, linear blends the two neighbours (the last clamped).
Tensor upsample_expected(bool linear, float sh, float sw) {
  const int64_t H = 6, W = 6, HO = int64_t(std::floor(H * sh)), WO = int64_t(std::floor(W * sw));
  Tensor y({1, 2, HO, WO}, std::vector<float>(size_t(2 * HO * WO)));
  const auto at = [](int64_t c, int64_t i, int64_t j) { return double(c * 36 + i * 6 + j); };
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t oy = 0; oy < HO; ++oy)
      for (int64_t ox = 0; ox < WO; ++ox) {
        const double sy = double(oy) / sh, sx = double(ox) / sw;
        const int64_t y0 = std::min<int64_t>(int64_t(sy), H - 1), x0 = std::min<int64_t>(int64_t(sx), W - 1);
        double v = at(c, y0, x0);
        if (linear) {
          const int64_t y1 = std::min<int64_t>(y0 + 1, H - 1), x1 = std::min<int64_t>(x0 + 1, W - 1);
          const double wy = sy - double(y0), wx = sx - double(x0);
          v = (1 - wy) * ((1 - wx) * at(c, y0, x0) + wx * at(c, y0, x1)) +
              wy * ((1 - wx) * at(c, y1, x0) + wx * at(c, y1, x1));
        }
        y.data[size_t((c * HO + oy) * WO + ox)] = float(v);
      }
  return y;
}

std::vector<float> iota_data(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t k = 0; k < v.size(); ++k) v[k] = float(k);
  return v;
}

}  // namespace

TEST_CASE("Upsample (opset 7 attribute, opset 9 input) and Resize-10 import as resize: asymmetric, floor") {
  struct Case {
    const char* op;
    int opset;
    const char* mode;
    float sh, sw;
  };
  for (const Case& c : {Case{"Upsample", 7, "nearest", 2, 3}, Case{"Upsample", 8, "linear", 2, 2},
                        Case{"Upsample", 9, "nearest", 3, 2}, Case{"Upsample", 9, "linear", 2, 1.5f},
                        Case{"Resize", 10, "nearest", 2, 2}, Case{"Resize", 10, "linear", 1.5f, 3}}) {
    CAPTURE(c.op);
    CAPTURE(c.opset);
    CAPTURE(c.mode);
    const bool linear = std::string(c.mode) == "linear";
    const Model model = import_model(upsample_model(c.op, c.opset, c.mode, {1, 1, c.sh, c.sw}));
    REQUIRE(model.num_nodes() == 1);
    const auto& p = std::get<ResizeParams>(model.graph().nodes[0].params);
    CHECK(p.mode == (linear ? ResizeMode::Linear : ResizeMode::Nearest));
    CHECK(p.coord == ResizeCoord::Asymmetric);
    CHECK(p.nearest == ResizeNearest::Floor);
    const Tensor want = upsample_expected(linear, c.sh, c.sw);
    for (const std::string& backend : kBackends) {
      CAPTURE(backend);
      Tensor y;
      if (!run_on(model, backend, Tensor({1, 2, 6, 6}, iota_data(72)), y)) continue;
      CHECK(y.shape == want.shape);
      CHECK(test::rel_error(y.data, want.data) <= 1e-6);
    }
  }
}

TEST_CASE("Upsample: unsupported variants are one-line errors naming the node") {
  const auto error = [](const onnx::ModelProto& m, const std::string& want) {
    const std::string e = import_error(m);
    CAPTURE(e);
    CHECK(e.find("node 'the_node' (Upsample): " + want) != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
  };
  error(upsample_model("Upsample", 9, "nearest", {1, 1.5f, 2, 2}),
        "unsupported: scales [1.000000, 1.500000] on the batch and channel axes (only 1)");
  error(upsample_model("Upsample", 7, "nearest", {2, 1, 2, 2}),
        "unsupported: scales [2.000000, 1.000000] on the batch and channel axes (only 1)");
  error(upsample_model("Upsample", 9, "linear", {1, 1, 0.5f, 2}), "scale 0.500000 must be finite and >= 1");
  error(upsample_model("Upsample", 9, "cubic", {1, 1, 2, 2}), "unsupported: mode cubic (only nearest and linear)");
  error(upsample_model("Upsample", 9, "nearest", {1, 2, 2}), "needs 4 scales for an NCHW input (got 3)");
  error(upsample_model("Upsample", 10, "nearest", {1, 1, 2, 2}),
        "unsupported: Upsample is deprecated from opset 10 (use Resize)");
  onnx::ModelProto no_scales = upsample_model("Upsample", 7, "nearest", {1, 1, 2, 2});
  no_scales.mutable_graph()->mutable_node(0)->mutable_attribute()->RemoveLast();
  error(no_scales, "needs the scales attribute (opset 7)");
  onnx::ModelProto computed = upsample_model("Upsample", 9, "nearest", {1, 1, 2, 2});
  computed.mutable_graph()->mutable_node(0)->set_input(1, "x");
  error(computed, "unsupported: input 1 'x' must be a constant");
  {  // opset 7-8 BatchNormalization with spatial = 0 (per-element statistics)
    onnx::ModelProto m = one_node("BatchNormalization", {2});
    m.mutable_opset_import(0)->set_version(7);
    onnx::NodeProto* n = m.mutable_graph()->mutable_node(0);
    for (const char* w : {"W", "W", "W"}) n->add_input(w);
    add_int(n, "spatial", 0);
    CHECK(import_error(m).find("node 'the_node' (BatchNormalization): unsupported: spatial = 0") != std::string::npos);
    n->mutable_attribute()->RemoveLast();
    CHECK(import_error(m).empty());
  }
  {  // opsets below 7
    onnx::ModelProto m = upsample_model("Upsample", 7, "nearest", {1, 1, 2, 2});
    m.mutable_opset_import(0)->set_version(6);
    CHECK(import_error(m).find("opset 6 is not supported (supported: 7-18)") != std::string::npos);
  }
}

namespace {

// x [batch, C, H, W] -> Reshape(to) -> Transpose(perm) -> Reshape(back) -> y: the channel shuffle and
// pixel shuffle chains as exporters write them (a fixed batch is a number in both targets).
onnx::ModelProto reshape_chain(const std::vector<int64_t>& x_dims, const std::vector<int64_t>& to,
                               const std::vector<int64_t>& perm, const std::vector<int64_t>& back) {
  onnx::ModelProto m = one_node("Reshape", {1});
  onnx::GraphProto* g = m.mutable_graph();
  auto* shape = g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->clear_dim();
  for (int64_t d : x_dims) shape->add_dim()->set_dim_value(d);
  g->clear_initializer();
  *g->add_initializer() = int64_tensor("to", to);
  *g->add_initializer() = int64_tensor("back", back);
  onnx::NodeProto* view = g->mutable_node(0);
  view->set_input(1, "to");
  view->set_output(0, "v");
  onnx::NodeProto* t = g->add_node();
  t->set_op_type("Transpose");
  t->set_name("the_transpose");
  t->add_input("v");
  t->add_output("p");
  add_ints(t, "perm", perm);
  onnx::NodeProto* r = g->add_node();
  r->set_op_type("Reshape");
  r->set_name("the_back");
  r->add_input("p");
  r->add_input("back");
  r->add_output("y");
  return m;
}

// What the chain computes, by index: y[n][o] = x[n][src(o)] per sample of `per` elements.
Tensor permuted(const Tensor& x, const Shape& y_shape, const std::function<int64_t(int64_t)>& src) {
  Tensor y(y_shape, std::vector<float>(x.data.size()));
  const int64_t per = x.numel() / x.shape[0];
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t o = 0; o < per; ++o) y.data[size_t(n * per + o)] = x.data[size_t(n * per + src(o))];
  return y;
}

}  // namespace

TEST_CASE("Reshape -> Transpose -> Reshape: channel and pixel shuffles at a fixed batch keep the batch free") {
  // Exported at batch 2 where 2 is also a per-sample dim (groups, block, a height): the chain is
  // per-sample, so the leading 2 is the batch (a plain Reshape like it would keep the model at 2).
  struct Case {
    const char* name;
    std::vector<int64_t> to, perm, back;
    OpType op;
    Shape out;  // per sample
    std::function<int64_t(int64_t)> src;  // output element -> input element, per sample
  };
  // x per sample: C = 8, H = 2, W = 3 (48 elements).
  const auto d2s = [](bool crd) {  // block 2, C' = 2: output (c, h*2+i, w*2+j)
    return [crd](int64_t o) {
      const int64_t c = o / 24, oh = o / 6 % 4, ow = o % 6, h = oh / 2, i = oh % 2, w = ow / 2, j = ow % 2;
      const int64_t ch = crd ? c * 4 + i * 2 + j : (i * 2 + j) * 2 + c;
      return (ch * 2 + h) * 3 + w;
    };
  };
  const std::vector<Case> cases = {
      {"channel_shuffle", {2, 2, 4, 2, 3}, {0, 2, 1, 3, 4}, {2, -1, 2, 3}, OpType::ChannelShuffle, {8, 2, 3},
       [](int64_t o) { const int64_t c = o / 6; return ((c % 2) * 4 + c / 2) * 6 + o % 6; }},
      {"pixel_shuffle_crd", {-1, 2, 2, 2, 2, 3}, {0, 1, 4, 2, 5, 3}, {-1, 2, 4, 6}, OpType::DepthToSpace,
       {2, 4, 6}, d2s(true)},
      {"pixel_shuffle_dcr", {2, 2, 2, 2, 2, 3}, {0, 3, 4, 1, 5, 2}, {2, 2, 4, 6}, OpType::DepthToSpace,
       {2, 4, 6}, d2s(false)},
      {"pixel_shuffle_dcr_zero", {0, 2, 2, 2, 2, 3}, {0, 3, 4, 1, 5, 2}, {0, 0, 4, -1}, OpType::DepthToSpace,
       {2, 4, 6}, d2s(false)},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const Model model = import_model(reshape_chain({2, 8, 2, 3}, c.to, c.perm, c.back));
    CHECK(model.inputs()[0].shape == Shape{-1, 8, 2, 3});
    CHECK(model.meta("batch.fixed").empty());
    REQUIRE(model.num_nodes() == 1);
    CHECK(model.graph().nodes[0].op() == c.op);
    CHECK(model.graph().nodes[0].name == "the_back");
    if (c.op == OpType::DepthToSpace)
      CHECK(std::get<DepthToSpaceParams>(model.graph().nodes[0].params).mode ==
            (std::string(c.name) == "pixel_shuffle_crd" ? DepthToSpaceMode::CRD : DepthToSpaceMode::DCR));
    Shape out{3};
    out.insert(out.end(), c.out.begin(), c.out.end());
    const Tensor x({3, 8, 2, 3}, iota_data(144));
    const Tensor want = permuted(x, out, c.src);
    for (const std::string& backend : kBackends) {
      CAPTURE(backend);
      Tensor y;
      if (!run_on(model, backend, x, y)) continue;
      CHECK(y.shape == want.shape);
      CHECK(y.data == want.data);
    }
  }
  // Not the patterns: a perm of neither kind, a Reshape back to another shape, a view read twice.
  std::string e = import_error(reshape_chain({2, 8, 2, 3}, {2, 2, 2, 2, 2, 3}, {0, 1, 4, 2, 3, 5}, {2, 2, 4, 6}));
  CHECK(e.find("node 'the_transpose' (Transpose): unsupported: Transpose of an activation") != std::string::npos);
  e = import_error(reshape_chain({2, 8, 2, 3}, {2, 2, 2, 2, 2, 3}, {0, 1, 4, 2, 5, 3}, {2, 2, 6, 4}));
  CHECK(e.find("node 'the_back' (Reshape): unsupported: shape [2,2,6,4] after a pixel shuffle (needs [N,2,4,6])") !=
        std::string::npos);
  e = import_error(reshape_chain({2, 8, 2, 3}, {2, 2, 4, 2, 3}, {0, 2, 1, 3, 4}, {1, 8, 2, 3}));
  CHECK(e.find("unsupported: shape [1,8,2,3] after a channel shuffle (needs [N,8,2,3])") != std::string::npos);
  onnx::ModelProto twice = reshape_chain({2, 8, 2, 3}, {2, 2, 4, 2, 3}, {0, 2, 1, 3, 4}, {2, 8, 2, 3});
  twice.mutable_graph()->add_output()->set_name("v");
  e = import_error(twice);  // the view is also a graph output: a plain Reshape at the pinned batch, then refused
  CHECK(e.find("Transpose of an activation") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
}
