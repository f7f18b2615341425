// ONNX import (apps/onnx2fb) against PyTorch: every golden case written by tests/golden/make_golden.py
// (the ctest fixture, into GOLDEN_DIR) is converted by the onnx2fb binary and run on the reference
// backend and every other backend this build has; outputs must match PyTorch's float64 forward within
// rel err 1e-5. Also: model-zoo --weights and onnx2fb give identical models for the same weights,
// metadata passes through byte-exact, unsupported ops fail in one listing error, malformed or hostile
// protobuf input is an error (exit 2) and never a crash, and unsupported attributes say so.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
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
    CHECK(model.inputs()[0].shape[0] == -1);  // the ONNX batch (symbolic or 1) became -1
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
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  const ModelBuilder b = onnx_import::import_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), "t", "");
  const Model model = Model::from_bytes(b.finish());
  Tensor x({1, 2, 6, 6}, std::vector<float>(72, 1.f));
  Tensor y;
  REQUIRE(run_on(model, "reference", x, y));
  CHECK(y.shape == Shape{1, 4, 4, 4});
  for (float v : y.data) CHECK(v == doctest::Approx(0.5 * 18));
}

TEST_CASE("unsupported attributes and bad tensors are clear errors") {
  {
    onnx::ModelProto m = one_node("Conv", {4, 1, 3, 3});
    add_int(m.mutable_graph()->mutable_node(0), "group", 2);
    const std::string e = import_error(m);
    CHECK(e.find("the_node") != std::string::npos);
    CHECK(e.find("unsupported: group 2") != std::string::npos);
  }
  {
    onnx::ModelProto m = one_node("Conv", {4, 2, 3, 3});
    add_ints(m.mutable_graph()->mutable_node(0), "dilations", {2, 2});
    CHECK(import_error(m).find("unsupported: dilation 2") != std::string::npos);
  }
  {
    onnx::ModelProto m = one_node("ConvTranspose", {2, 4, 3, 3});
    add_ints(m.mutable_graph()->mutable_node(0), "dilations", {1, 2});
    CHECK(import_error(m).find("unsupported: dilation 2") != std::string::npos);
  }
  {
    onnx::ModelProto m = one_node("ConvTranspose", {2, 4, 3, 3});
    add_int(m.mutable_graph()->mutable_node(0), "group", 2);
    CHECK(import_error(m).find("unsupported: group 2") != std::string::npos);
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
