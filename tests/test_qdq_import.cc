// QDQ import (onnx2fb, issue 30): tests/data/qdq holds two models ONNX Runtime's quantize_static wrote
// (Conv, 1x1 Conv, Add, ConvTranspose, Gemm; per-channel int8 weights, int32 biases; uint8 or int8
// activations), an input and ORT's output (make_qdq.py). Each is converted by the onnx2fb binary and
// run on the cpu and reference backends; the output must match ORT's to one quantization step of the
// output (a sum rounded differently may move one element across a rounding boundary), most elements
// to 1e-5. Also: the weights stay int8 in the file; hand-built graphs with int16, float8, block or
// opset-19 attributes are refused in one line.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <onnx/onnx_pb.h>

#include "graph.h"
#include "infer/infer.h"
#include "npy.h"
#include "onnx_import.h"

using namespace infer;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(INFER_SOURCE_DIR) + "/tests/data/qdq";
const std::string kWork = std::string(INFER_BINARY_DIR) + "/tests/qdq_work";

int run(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The scale of the model's last DequantizeLinear (the output's quantization step).
float output_step(const std::string& onnx_path) {
  onnx::ModelProto m;
  std::ifstream f(onnx_path, std::ios::binary);
  REQUIRE(m.ParseFromIstream(&f));
  const onnx::NodeProto& last = m.graph().node(m.graph().node_size() - 1);
  REQUIRE(last.op_type() == "DequantizeLinear");
  for (const onnx::TensorProto& t : m.graph().initializer())
    if (t.name() == last.input(1)) {
      if (t.float_data_size() == 1) return t.float_data(0);
      float s;
      REQUIRE(t.raw_data().size() == 4);
      std::memcpy(&s, t.raw_data().data(), 4);
      return s;
    }
  FAIL("no scale initializer");
  return 0.f;
}

}  // namespace

TEST_CASE("onnx2fb imports quantize_static's QDQ models; infer matches ONNX Runtime") {
  fs::create_directories(kWork);
  const Tensor x = read_npy(kData + "/input.npy");
  for (const std::string name : {"qdq_u8", "qdq_s8"}) {
    CAPTURE(name);
    const std::string onnx_path = kData + "/" + name + ".onnx";
    const std::string fb_path = kWork + "/" + name + ".fb";
    std::string log;
    const int code = run(std::string("'") + ONNX2FB_BIN + "' '" + onnx_path + "' '" + fb_path + "'", &log);
    INFO(log);
    REQUIRE(code == 0);
    const Model model = Model::load(fb_path);
    // Every weight and bias is stored as integers and folded when the model loads.
    int i8 = 0, i32 = 0, folded = 0;
    const auto& values = model.graph().values;
    for (const detail::Value& v : values) {
      if (!v.dequantized) continue;
      ++folded;
      const detail::Value& src = values[static_cast<size_t>(v.dequantized->source)];
      i8 += src.dtype == DType::I8 && src.shape.size() >= 2;
      i32 += src.dtype == DType::I32;
    }
    CHECK(i8 == 4);
    CHECK(i32 == 4);
    CHECK(folded == 8);
    int q = 0, dq = 0;
    for (const ModelNode& n : model.nodes()) {
      q += n.op == "quantize_linear";
      dq += n.op == "dequantize_linear";
    }
    CHECK(q == 7);
    CHECK(dq == 7);

    const Tensor want = read_npy(kData + "/" + name + "_ort.npy");
    const float step = output_step(onnx_path);
    for (const std::string backend : {"cpu", "reference"}) {
      CAPTURE(backend);
      SessionOptions o;
      o.backend = backend;
      Session s(model, o);
      const Tensor got = s.run({x})[0];
      REQUIRE(got.shape == want.shape);
      size_t off = 0;
      for (size_t i = 0; i < got.data.size(); ++i) {
        const float d = std::fabs(got.data[i] - want.data[i]);
        REQUIRE_MESSAGE(d <= step * 1.001f + 1e-5f, "element " << i << ": " << got.data[i] << " vs ORT " << want.data[i]);
        off += d > 1e-5f;
      }
      MESSAGE(name << " on " << backend << ": " << off << " of " << got.data.size()
                   << " elements differ from ORT (by one output step, " << step << ")");
      CHECK(off <= got.data.size() / 10);
    }
  }
}

namespace {

// x [1,4] -> QuantizeLinear(scale, zero point of `zp_type`) -> DequantizeLinear -> y, at `opset`.
onnx::ModelProto qdq_graph(int zp_type, int opset, const std::string& extra_attr = "") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  auto value = [](onnx::ValueInfoProto* v, const char* name) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(1);
    t->mutable_shape()->add_dim()->set_dim_value(4);
  };
  value(g->add_input(), "x");
  value(g->add_output(), "y");
  onnx::TensorProto* s = g->add_initializer();
  s->set_name("s");
  s->set_data_type(onnx::TensorProto::FLOAT);
  s->add_float_data(0.5f);
  onnx::TensorProto* z = g->add_initializer();
  z->set_name("z");
  z->set_data_type(zp_type);
  z->add_int32_data(0);
  onnx::NodeProto* q = g->add_node();
  q->set_op_type("QuantizeLinear");
  q->set_name("q");
  q->add_input("x");
  q->add_input("s");
  q->add_input("z");
  q->add_output("xq");
  if (!extra_attr.empty()) {
    onnx::AttributeProto* a = q->add_attribute();
    a->set_name(extra_attr);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(1);
  }
  onnx::NodeProto* d = g->add_node();
  d->set_op_type("DequantizeLinear");
  d->set_name("dq");
  d->add_input("xq");
  d->add_input("s");
  d->add_input("z");
  d->add_output("y");
  return m;
}

std::string import_error(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  try {
    onnx_import::import_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), "m.onnx", "", {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("onnx2fb: QDQ at opsets 10-18, refusals in one line") {
  CHECK(import_error(qdq_graph(onnx::TensorProto::UINT8, 10)) == "");
  CHECK(import_error(qdq_graph(onnx::TensorProto::INT8, 13)) == "");
  CHECK(import_error(qdq_graph(onnx::TensorProto::INT8, 18)) == "");
  CHECK(import_error(qdq_graph(onnx::TensorProto::INT16, 13)) ==
        "m.onnx: initializer 'z': element type 5 (int16, int4 or float8) is not supported (quantized tensors: "
        "int8, uint8; int32 biases)");
  CHECK(import_error(qdq_graph(22, 13)) ==
        "m.onnx: initializer 'z': element type 22 (int16, int4 or float8) is not supported (quantized tensors: "
        "int8, uint8; int32 biases)");
  CHECK(import_error(qdq_graph(onnx::TensorProto::INT8, 13, "saturate")) ==
        "m.onnx: node 'q' (QuantizeLinear): unsupported: attribute 'saturate' (opset >= 19 / 21: saturate, "
        "block_size, output_dtype)");
  CHECK(import_error(qdq_graph(onnx::TensorProto::INT8, 13, "block_size")) ==
        "m.onnx: node 'q' (QuantizeLinear): unsupported: attribute 'block_size' (opset >= 19 / 21: saturate, "
        "block_size, output_dtype)");
  CHECK(import_error(qdq_graph(onnx::TensorProto::INT8, 19)) == "m.onnx: opset 19 is not supported (supported: 7-18)");
  CHECK(import_error(qdq_graph(onnx::TensorProto::INT32, 13)) ==
        "m.onnx: node 'q' (QuantizeLinear): unsupported: zero point of element type 6 (supported: int8, uint8)");
}
