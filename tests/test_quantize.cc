// quantize_linear / dequantize_linear: the reference kernels against an independent formula on random
// shapes (ranks 1-5, per tensor and per axis on every axis, i8 / u8 / i32, exact ties, saturation),
// outputs poisoned first; the shape and dtype rules; a QDQ model through the builder, the loader's
// folding (Value::dequantized) and a cpu session, against the same model in float32; files the loader
// must reject (bad scales, zero points, dtypes), written with the generated FlatBuffers API; and
// files written before these dtypes and ops existed, which still load. And `infer quantize`'s parts
// (apps/common/quantizer.h): observer ranges (min-max, percentile, entropy), scales and zero points,
// per-channel weights, and the QDQ rewrite of a float model, run against it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "graph.h"
#include "infer/error.h"
#include "infer/model.h"
#include "infer/model_builder.h"
#include "infer/session.h"
#include "model_generated.h"
#include "quant_test_util.h"
#include "quantizer.h"
#include "shape_inference.h"
#include "test_util.h"

using namespace infer;
using doctest::Contains;

namespace {

// Round half to even written without nearbyint (floor and a tie test), as the check of the kernel.
float round_half_even(float v) {
  const float f = std::floor(v);
  const float d = v - f;
  if (d > 0.5f) return f + 1.f;
  if (d < 0.5f) return f;
  return std::fmod(f, 2.f) == 0.f ? f : f + 1.f;
}

struct Case {
  Shape shape;
  int axis = 1;
  bool per_axis = false;
  int64_t channels = 1;
  int64_t inner = 1;
};

Case random_case(std::mt19937_64& rng, int t) {
  Case c;
  const int rank = test::uniform(rng, 1, 5);
  for (int d = 0; d < rank; ++d) c.shape.push_back(test::uniform(rng, 1, d == 0 ? 3 : 7));
  c.per_axis = t % 3 != 0;
  c.axis = test::uniform(rng, 0, rank - 1);
  if (t % 2 == 1) c.axis -= rank;  // negative axes count from the end
  const int a = c.axis < 0 ? c.axis + rank : c.axis;
  c.channels = c.per_axis ? c.shape[static_cast<size_t>(a)] : 1;
  for (int d = a + 1; d < rank; ++d) c.inner *= c.shape[static_cast<size_t>(d)];
  return c;
}

int64_t channel_of(const Case& c, int64_t i) { return c.per_axis ? (i / c.inner) % c.channels : 0; }

std::vector<float> run_reference(const OpParams& p, const std::vector<Shape>& shapes,
                                 const std::vector<std::vector<float>>& inputs) {
  NodeDesc node;
  node.params = p;
  node.input_shapes = shapes;
  node.output_shapes = {shapes[0]};
  return test::run_cpu_variant("reference", node, inputs);
}

}  // namespace

TEST_CASE("quantize_linear reference: round half to even, saturation, per tensor and per axis") {
  std::mt19937_64 rng(30);
  for (int t = 0; t < 300; ++t) {
    const Case c = random_case(rng, t);
    const bool s8 = t % 2 == 0;
    const int64_t n = shape_numel(c.shape);
    // Scales that are powers of two make x / scale exact, so ties (k + 0.5) really are ties.
    std::vector<float> scale(static_cast<size_t>(c.channels)), zp(static_cast<size_t>(c.channels));
    for (size_t k = 0; k < scale.size(); ++k) {
      scale[k] = t % 4 == 0 ? std::ldexp(1.f, test::uniform(rng, -6, 2)) : 0.001f + 0.05f * float(k % 5) + 0.003f * float(t % 7);
      zp[k] = static_cast<float>(s8 ? test::uniform(rng, -20, 20) : test::uniform(rng, 0, 255));
    }
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const float s = scale[static_cast<size_t>(channel_of(c, i))];
      const int kind = test::uniform(rng, 0, 3);
      if (kind == 0) x[static_cast<size_t>(i)] = (float(test::uniform(rng, -140, 140)) + 0.5f) * s;  // a tie
      else if (kind == 1) x[static_cast<size_t>(i)] = float(test::uniform(rng, -1000, 1000)) * s;    // saturates
      else x[static_cast<size_t>(i)] = std::uniform_real_distribution<float>(-200.f, 200.f)(rng) * s;
    }
    const Shape sshape{static_cast<int64_t>(scale.size())};
    QuantizeLinearParams p;
    p.axis = c.axis;
    p.dtype = s8 ? DType::I8 : DType::U8;
    const bool with_zp = t % 5 != 4 || s8;  // no zero point: u8 with zero point 0 (ONNX)
    std::vector<Shape> shapes{c.shape, sshape};
    std::vector<std::vector<float>> inputs{x, scale};
    if (with_zp) {
      shapes.push_back(sshape);
      inputs.push_back(zp);
    }
    const std::vector<float> y = run_reference(p, shapes, inputs);
    const float lo = s8 ? -128.f : 0.f, hi = s8 ? 127.f : 255.f;
    int ties = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t ch = static_cast<size_t>(channel_of(c, i));
      const float v = x[static_cast<size_t>(i)] / scale[ch];
      ties += v - std::floor(v) == 0.5f;
      const float want = std::clamp(round_half_even(v) + (with_zp ? zp[ch] : 0.f), lo, hi);
      REQUIRE_MESSAGE(y[static_cast<size_t>(i)] == want, "case " << t << " element " << i << " x " << x[size_t(i)]);
    }
    if (t % 4 == 0 && n > 8) CHECK(ties > 0);
  }
  // Exact ties both ways, saturation at both ends, NaN to the low end.
  const std::vector<float> y = run_reference(QuantizeLinearParams{1, DType::I8}, {{1, 8}, {1}, {1}},
                                             {{0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 1e9f, -1e9f, NAN}, {1.f}, {0.f}});
  CHECK(y == std::vector<float>{0.f, 2.f, 2.f, -0.f, -2.f, 127.f, -128.f, -128.f});
}

TEST_CASE("dequantize_linear reference: (q - zero point) * scale for i8, u8 and i32") {
  std::mt19937_64 rng(31);
  for (int t = 0; t < 300; ++t) {
    const Case c = random_case(rng, t);
    const int kind = t % 3;  // i8, u8, i32
    const int64_t n = shape_numel(c.shape);
    std::vector<float> scale(static_cast<size_t>(c.channels)), zp(static_cast<size_t>(c.channels));
    for (size_t k = 0; k < scale.size(); ++k) {
      scale[k] = std::uniform_real_distribution<float>(1e-4f, 0.5f)(rng);
      zp[k] = kind == 0 ? float(test::uniform(rng, -128, 127)) : kind == 1 ? float(test::uniform(rng, 0, 255)) : 0.f;
    }
    std::vector<float> q(static_cast<size_t>(n));
    for (float& v : q)
      v = kind == 0 ? float(test::uniform(rng, -128, 127))
          : kind == 1 ? float(test::uniform(rng, 0, 255))
                      : float(test::uniform(rng, -(1 << 24), 1 << 24));
    const Shape sshape{static_cast<int64_t>(scale.size())};
    const std::vector<float> y = run_reference(DequantizeLinearParams{c.axis}, {c.shape, sshape, sshape}, {q, scale, zp});
    for (int64_t i = 0; i < n; ++i) {
      const size_t ch = static_cast<size_t>(channel_of(c, i));
      const float want = static_cast<float>(static_cast<int32_t>(q[size_t(i)]) - static_cast<int32_t>(zp[ch])) * scale[ch];
      REQUIRE_MESSAGE(y[static_cast<size_t>(i)] == want, "case " << t << " element " << i);
    }
  }
}

TEST_CASE("quantize ops: shape rules name what is wrong") {
  const QuantizeLinearParams q{1, DType::I8};
  CHECK(test::shape_error(q, {{2, 3, 4}, {1}, {1}}) == "");
  CHECK(test::shape_error(q, {{2, 3, 4}, {3}, {3}}) == "");
  CHECK(test::shape_error(QuantizeLinearParams{-1, DType::I8}, {{2, 3, 4}, {4}, {4}}) == "");
  CHECK(test::shape_error(q, {{2, 3, 4}, {4}, {4}}) ==
        "m.fb: node 1 'n': input 1 (scale) has shape 4 but must have one element (per tensor) or be [3] (per axis 1)");
  CHECK(test::shape_error(q, {{2, 3, 4}, {3}, {1}}) ==
        "m.fb: node 1 'n': input 2 (zero_point) has shape 1 but must equal the scale's 3");
  CHECK(test::shape_error(QuantizeLinearParams{3, DType::I8}, {{2, 3, 4}, {3}}) ==
        "m.fb: node 1 'n': axis 3 is out of range for input 0 of rank 3 ([-3, 2])");
  CHECK(test::shape_error(QuantizeLinearParams{3, DType::U8}, {{2, 3, 4}, {1}}) == "");  // per tensor: ignored
  CHECK(test::shape_error(QuantizeLinearParams{1, DType::F32}, {{2, 3}, {1}}) ==
        "m.fb: node 1 'n': dtype is f32 (quantize_linear writes i8 or u8)");
  CHECK(test::shape_error(DequantizeLinearParams{1}, {{2, 3}}) == "m.fb: node 1 'n': expects 2 or 3 inputs, got 1");
  // An activation's per-axis scale never runs along the batch; a constant's may (axis 0 of a weight).
  const std::vector<bool> activation{false, true, true}, constant{true, true, true};
  CHECK_THROWS_WITH(detail::infer_node_shapes(DequantizeLinearParams{0}, {{2, 3}, {2}, {2}}, "w", &activation),
                    "w: axis 0 is the batch (per-axis scales of an activation need axis >= 1)");
  CHECK(detail::infer_node_shapes(DequantizeLinearParams{0}, {{2, 3}, {2}, {2}}, "w", &constant) ==
        std::vector<Shape>{{2, 3}});
}

namespace {

// x [-1,3,5,5] -> quantize (u8, per tensor) -> dequantize -> conv2d(weight: dequantize of i8 per output
// channel, bias: dequantize of i32 per channel) -> output. `reference`: the same graph in float32, with
// the input fake-quantized by the caller.
struct QdqConv {
  std::vector<float> w_q, w_scale, b_q, b_scale;
  float x_scale = 0.02f, x_zp = 128.f;
  QdqConv() {
    std::mt19937_64 rng(5);
    for (int i = 0; i < 4 * 3 * 3 * 3; ++i) w_q.push_back(float(test::uniform(rng, -127, 127)));
    for (int k = 0; k < 4; ++k) {
      w_scale.push_back(0.001f * float(k + 1));
      b_q.push_back(float(test::uniform(rng, -50000, 50000)));
      b_scale.push_back(x_scale * w_scale.back());
    }
  }
  std::vector<uint8_t> quantized() const {
    ModelBuilder b("qdq");
    const int x = b.input("x", {-1, 3, 5, 5});
    const int xs = b.constant("x_scale", {1}, {x_scale});
    const int xz = b.constant("x_zp", {1}, {x_zp}, DType::U8);
    const int q = b.node("q", QuantizeLinearParams{1, DType::U8}, {x, xs, xz});
    const int dq = b.node("dq", DequantizeLinearParams{1}, {q, xs, xz});
    const int wq = b.constant("w_q", {4, 3, 3, 3}, w_q, DType::I8);
    const int ws = b.constant("w_scale", {4}, w_scale);
    const int w = b.node("w", DequantizeLinearParams{0}, {wq, ws});
    const int bq = b.constant("b_q", {4}, b_q, DType::I32);
    const int bs = b.constant("b_scale", {4}, b_scale);
    const int bias = b.node("b", DequantizeLinearParams{0}, {bq, bs});
    Conv2DParams p;
    p.pad = {1, 1, 1, 1};
    b.output(b.node("conv", p, {dq, w, bias}));
    return b.finish();
  }
  std::vector<uint8_t> reference() const {
    ModelBuilder b("f32");
    const int x = b.input("x", {-1, 3, 5, 5});
    std::vector<float> w(w_q.size()), bias(4);
    for (size_t i = 0; i < w.size(); ++i) w[i] = w_q[i] * w_scale[i / 27];
    for (size_t k = 0; k < 4; ++k) bias[k] = b_q[k] * b_scale[k];
    Conv2DParams p;
    p.pad = {1, 1, 1, 1};
    b.output(b.node("conv", p, {x, b.constant("w", {4, 3, 3, 3}, w), b.constant("b", {4}, bias)}));
    return b.finish();
  }
};

}  // namespace

TEST_CASE("a QDQ model: weights fold at load, activations fake-quantize, outputs match float32") {
  const QdqConv m;
  const Model quant = Model::from_bytes(m.quantized(), "qdq.fb");
  CHECK(quant.format_version() == 1);
  // The weight and bias dequantize nodes were evaluated at load: quantize, dequantize, conv remain.
  REQUIRE(quant.num_nodes() == 3);
  CHECK(quant.nodes()[0].op == "quantize_linear");
  CHECK(quant.nodes()[1].op == "dequantize_linear");
  const detail::Graph& g = quant.graph();
  int folded = 0;
  for (const detail::Value& v : g.values) {
    if (!v.dequantized) continue;
    ++folded;
    CHECK(v.is_constant());
    const detail::Value& src = g.values[static_cast<size_t>(v.dequantized->source)];
    CHECK((src.dtype == DType::I8 || src.dtype == DType::I32));
    CHECK(src.raw != nullptr);
    CHECK(v.dequantized->axis == 0);
    CHECK(v.dequantized->zero_point == -1);
  }
  CHECK(folded == 2);
  const Model ref = Model::from_bytes(m.reference(), "f32.fb");

  std::mt19937_64 rng(7);
  for (int batch : {1, 3}) {
    Tensor x({batch, 3, 5, 5});
    for (float& v : x.data) v = std::uniform_real_distribution<float>(-3.f, 3.f)(rng);
    x.data[0] = 0.01f;  // exactly a tie: 0.5 steps
    Tensor xq = x;  // what quantize -> dequantize makes of x (ONNX: round half to even, saturate)
    for (float& v : xq.data) v = (std::clamp(round_half_even(v / m.x_scale) + m.x_zp, 0.f, 255.f) - m.x_zp) * m.x_scale;
    for (const char* backend : {"cpu", "reference"}) {
      SessionOptions o;
      o.backend = backend;
      Session sq(quant, o), sr(ref, o);
      const std::vector<float> got = sq.run({x})[0].data;
      const std::vector<float> want = sr.run({xq})[0].data;
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) REQUIRE_MESSAGE(got[i] == want[i], backend << " element " << i);
    }
  }
}

TEST_CASE("the model builder refuses integers out of range and wrong dtypes") {
  ModelBuilder b("bad");
  CHECK_THROWS_WITH(b.constant("a", {2}, {1.f, 128.f}, DType::I8),
                    "model builder: constant 'a': element 1 (128.000000) is not a i8 value");
  CHECK_THROWS_WITH(b.constant("b", {1}, {0.5f}, DType::U8),
                    "model builder: constant 'b': element 0 (0.500000) is not a u8 value");
  const int x = b.input("x", {-1, 4});
  const int w = b.constant("w", {4, 4}, std::vector<float>(16, 1.f), DType::I8);
  CHECK_THROWS_WITH(b.node("d", DenseParams{}, {x, w}),
                    "model builder: node 'd' (dense): input 1 (weight) is i8; dense takes float tensors "
                    "(dequantize_linear it first)");
  const int s = b.constant("s", {1}, {0.f});
  CHECK_THROWS_WITH(b.node("q", QuantizeLinearParams{1, DType::U8}, {x, s}),
                    Contains("input 1 (scale) element 0 is 0.000000 (scales must be finite and > 0)"));
  const int s1 = b.constant("s1", {1}, {0.5f});
  const int z8 = b.constant("z8", {1}, {0.f}, DType::I8);
  CHECK_THROWS_WITH(b.node("q2", QuantizeLinearParams{1, DType::U8}, {x, s1, z8}),
                    "model builder: node 'q2' (quantize_linear): input 2 (zero_point) is i8 but must be u8 "
                    "(the node's dtype)");
  CHECK_THROWS_WITH(b.node("dq", DequantizeLinearParams{1}, {x, s1}),
                    "model builder: node 'dq' (dequantize_linear): input 0 is f32 but must be i8, u8 or i32");
}

namespace {

// x [-1,4] -> one quantize_linear / dequantize_linear node -> output, written field by field so that
// anything the builder refuses can be put in a file.
struct RawQ {
  bool dequantize = false;
  int x_dtype = 0;          // the input tensor's dtype
  int out_dtype = 3;        // the output tensor's declared dtype
  int node_dtype = 3;       // QuantizeLinear.dtype
  std::vector<float> scale{0.5f};
  int zp_dtype = 3;         // -1: no zero point
  std::vector<uint8_t> zp_bytes{0};
  int64_t zp_len = 1;
  bool constant_x = false;  // x a constant [4] (dequantize folds at load)
  std::vector<uint8_t> x_bytes{1, 2, 3, 4};
};

std::vector<uint8_t> raw_model(const RawQ& r) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers{fb::CreateBuffer(fbb)};
  auto buffer = [&](const std::vector<uint8_t>& bytes) {
    buffers.push_back(fb::CreateBuffer(fbb, fbb.CreateVector(bytes)));
    return static_cast<uint32_t>(buffers.size() - 1);
  };
  std::vector<uint8_t> sbytes(r.scale.size() * 4);
  std::memcpy(sbytes.data(), r.scale.data(), sbytes.size());
  const uint32_t sb = buffer(sbytes);
  const uint32_t zb = r.zp_dtype >= 0 ? buffer(r.zp_bytes) : 0;
  const uint32_t xb = r.constant_x ? buffer(r.x_bytes) : 0;
  const std::vector<int64_t> act{-1, 4}, cx{4}, sshape{static_cast<int64_t>(r.scale.size())}, zshape{r.zp_len};
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors{
      fb::CreateTensorDirect(fbb, "x", r.constant_x ? &cx : &act, static_cast<fb::DType>(r.x_dtype), xb),
      fb::CreateTensorDirect(fbb, "s", &sshape, fb::DType::F32, sb),
      fb::CreateTensorDirect(fbb, "y", r.constant_x ? &cx : &act, static_cast<fb::DType>(r.out_dtype), 0),
      fb::CreateTensorDirect(fbb, "in", &act, fb::DType::F32, 0),
      fb::CreateTensorDirect(fbb, "z", &zshape, static_cast<fb::DType>(r.zp_dtype < 0 ? 0 : r.zp_dtype), zb)};
  std::vector<uint32_t> ins{0, 1};
  if (r.zp_dtype >= 0) ins.push_back(4);
  const auto options = r.dequantize ? fb::CreateDequantizeLinear(fbb, 1).Union()
                                    : fb::CreateQuantizeLinear(fbb, 1, static_cast<fb::DType>(r.node_dtype)).Union();
  const std::vector<uint32_t> outs{2};
  std::vector<flatbuffers::Offset<fb::Node>> nodes{fb::CreateNodeDirect(
      fbb, "node", &ins, &outs, r.dequantize ? fb::Op::DequantizeLinear : fb::Op::QuantizeLinear, options)};
  const std::vector<uint32_t> inputs{r.constant_x ? 3u : 0u}, outputs{2};
  const auto root = fb::CreateModelDirect(fbb, 1, "raw", "", "", &tensors, &nodes, &inputs, &outputs, &buffers);
  fb::FinishModelBuffer(fbb, root);
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

std::string load_error(const RawQ& r) {
  try {
    Model::from_bytes(raw_model(r), "m.fb");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the loader rejects bad scales, zero points and dtypes with one line") {
  CHECK(load_error(RawQ{}) == "");  // the valid base: quantize to u8 with a u8 zero point
  RawQ r;
  r.scale = {0.f};
  CHECK(load_error(r) == "m.fb: node 0 'node' (quantize_linear): input 1 (scale) element 0 is 0.000000 "
                         "(scales must be finite and > 0)");
  r.scale = {NAN};
  CHECK(load_error(r) == "m.fb: node 0 'node' (quantize_linear): input 1 (scale) element 0 is nan "
                         "(scales must be finite and > 0)");
  r = RawQ{};
  r.zp_dtype = 2;  // i8 zero point, u8 node
  CHECK(load_error(r) == "m.fb: node 0 'node' (quantize_linear): input 2 (zero_point) is i8 but must be u8 "
                         "(the node's dtype)");
  r = RawQ{};
  r.out_dtype = 0;  // output declared f32
  CHECK(load_error(r) == "m.fb: node 0 'node' (quantize_linear): output 0: tensor 2 'y' is declared f32 but "
                         "quantize_linear makes u8");
  r = RawQ{};
  r.node_dtype = 4;
  CHECK(load_error(r) == "m.fb: node 0 'node' (quantize_linear): field dtype is i32 (quantize_linear writes i8 or u8)");
  r = RawQ{};
  r.node_dtype = 9;
  CHECK(load_error(r) == "m.fb: node 0 'node' (quantize_linear): field dtype is unknown (9) (quantize_linear "
                         "writes i8 or u8)");
  r = RawQ{};
  r.zp_len = 2;
  r.zp_bytes = {0, 0};
  CHECK(load_error(r) == "m.fb: node 0 'node' (quantize_linear): input 2 (zero_point) has shape 2 but must "
                         "equal the scale's 1");
  r = RawQ{};
  r.scale = {0.5f, 0.5f, 0.5f};
  CHECK(load_error(r) == "m.fb: node 0 'node' (quantize_linear): input 1 (scale) has shape 3 but must have one "
                         "element (per tensor) or be [4] (per axis 1)");
  // dequantize_linear of an i32 constant with a zero point other than 0; of a float activation.
  r = RawQ{};
  r.dequantize = true;
  r.constant_x = true;
  r.x_dtype = 2;
  r.out_dtype = 0;
  r.zp_dtype = 2;
  r.zp_bytes = {200};  // i8: -56
  // Folded at load: y is a constant now, which a model output may not be (here: the node was evaluated).
  const std::string folded = "m.fb: outputs[0] is tensor 2 'y', a constant (a node of constants only, folded at load)";
  CHECK(load_error(r) == folded);
  r.x_dtype = 4;
  r.zp_dtype = 4;
  r.zp_bytes = {0, 0, 0, 0};
  CHECK(load_error(r) == "m.fb: tensor 0 'x': buffer 3 holds 4 bytes but shape 4 in i32 needs 16");
  r.x_bytes.assign(16, 0);
  CHECK(load_error(r) == folded);
  r.zp_bytes = {1, 0, 0, 0};
  CHECK(load_error(r) == "m.fb: node 0 'node' (dequantize_linear): input 2 (zero_point) element 0 is 1 (an i32 "
                         "zero point must be 0, as ONNX)");
  r.x_bytes = {1, 2, 3, 4};
  r.x_dtype = 3;
  r.zp_dtype = 2;
  r.zp_bytes = {0};
  CHECK(load_error(r) == "m.fb: node 0 'node' (dequantize_linear): input 2 (zero_point) is i8 but must be u8 "
                         "(input 0's type)");
  r = RawQ{};
  r.dequantize = true;
  r.out_dtype = 0;
  r.zp_dtype = -1;
  CHECK(load_error(r) == "m.fb: node 0 'node' (dequantize_linear): input 0 is f32 but must be i8, u8 or i32");
  // A dtype past the schema's enum.
  r = RawQ{};
  r.zp_dtype = 7;
  CHECK(load_error(r) == "m.fb: tensor 4 'z': field dtype has unknown value 7");
}

TEST_CASE("files written before the quantized dtypes and ops still load") {
  for (const char* path : {"models/lenet5_fashion.fb", "fuzz/corpus/model/valid_all_ops.fb",
                           "fuzz/corpus/model/zoo_lenet5_12px_fp16.fb"}) {
    CAPTURE(path);
    const Model m = Model::load(std::string(INFER_SOURCE_DIR) + "/" + path);
    CHECK(m.format_version() == 1);
    Session s(m, SessionOptions{});
    std::vector<Tensor> in;
    for (const TensorInfo& t : m.inputs()) {
      Shape shape = t.shape;
      if (shape[0] == -1) shape[0] = 1;
      in.emplace_back(shape);
    }
    const std::vector<Tensor> out = s.run(in);
    CHECK(test::all_finite(out.at(0).data));
  }
}

// ---- infer quantize's building blocks (apps/common/quantizer.h) ----------------------------------------

TEST_CASE("quantizer: observer ranges by min-max, percentile and entropy") {
  quant::Observer ob;
  std::vector<float> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) / 1000.f;  // [0, 0.999]
  ob.add(a.data(), int64_t(a.size()));
  // A second batch widens the histogram (the first batch's counts are re-binned, none lost).
  std::vector<float> b = {-2.f, 4.f, NAN, INFINITY};
  ob.add(b.data(), int64_t(b.size()));
  CHECK(ob.count() == 1002);
  CHECK(ob.nonfinite() == 2);
  CHECK(ob.min() == -2.f);
  CHECK(ob.max() == 4.f);
  CHECK(ob.amax() == 4.f);
  double total = 0;
  for (double c : ob.histogram()) total += c;
  CHECK(total == 1002.0);
  const auto mm = ob.range(quant::Method::MinMax, 99.99);
  CHECK(mm.first == -2.f);
  CHECK(mm.second == 4.f);
  // 99% of |x| lies below ~0.99: the two outliers are clipped.
  const auto pc = ob.range(quant::Method::Percentile, 99.0);
  CHECK(pc.second == doctest::Approx(0.99).epsilon(0.01));
  CHECK(pc.first == doctest::Approx(-0.99).epsilon(0.01));

  // Entropy: N(0, 1) with a few far outliers clips well inside them and well outside the bulk.
  quant::Observer g;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(200000);
  for (float& v : x) v = normal(rng);
  x[0] = 60.f;
  x[1] = -55.f;
  g.add(x.data(), int64_t(x.size()));
  const float t = g.entropy_threshold();
  MESSAGE("entropy threshold of N(0,1) + outliers at 60: " << t);
  CHECK(t > 2.5f);
  CHECK(t < 20.f);
  CHECK(g.range(quant::Method::Entropy, 0).second == doctest::Approx(t));
  // Nothing seen: an all-zero range.
  const quant::Observer empty;
  CHECK(empty.range(quant::Method::Entropy, 99).first == 0.f);
  CHECK(empty.range(quant::Method::Entropy, 99).second == 0.f);
}

TEST_CASE("quantizer: activation scales and zero points, weights per output channel") {
  const quant::QuantParams u = quant::activation_params(-1.f, 3.f, DType::U8);
  CHECK(u.scale == doctest::Approx(4.0 / 255));
  CHECK(u.zero_point == 64);  // round(1 / (4/255)) = round(63.75)
  const quant::QuantParams r = quant::activation_params(0.f, 6.f, DType::U8);  // after a ReLU6
  CHECK(r.zero_point == 0);
  CHECK(r.scale == doctest::Approx(6.0 / 255));
  const quant::QuantParams s = quant::activation_params(-1.f, 3.f, DType::I8);
  CHECK(s.zero_point == 0);
  CHECK(s.scale == doctest::Approx(3.0 / 127));
  CHECK(quant::activation_params(0.f, 0.f, DType::U8).scale == 1.f);  // scales must be > 0

  // [2, 3, 2] per axis: channel c's largest |w| maps to +-127 (+-64 with reduce_range: 7-bit weights),
  // the rest within half a step.
  std::mt19937_64 rng(5);
  for (bool reduce : {false, true})
    for (int axis : {0, 1, 2}) {
      CAPTURE(reduce);
      const float qmax = reduce ? 64.f : 127.f;
      const Shape shape{2, 3, 2};
      std::vector<float> w(12);
      for (float& v : w) v = std::uniform_real_distribution<float>(-2.f, 2.f)(rng);
      w[4] = 0.f;  // a zero stays zero
      const quant::QuantizedWeight q = quant::quantize_weight(w.data(), shape, axis, reduce);
      REQUIRE(q.scale.size() == size_t(shape[size_t(axis)]));
      std::vector<float> amax(q.scale.size(), 0.f), qabs(q.scale.size(), 0.f);
      int64_t inner = 1;
      for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
      for (size_t i = 0; i < w.size(); ++i) {
        const size_t c = (i / size_t(inner)) % q.scale.size();
        amax[c] = std::max(amax[c], std::fabs(w[i]));
        qabs[c] = std::max(qabs[c], std::fabs(q.q[i]));
        CHECK(q.q[i] == std::nearbyint(q.q[i]));
        CHECK(std::fabs(q.q[i]) <= qmax);
        CHECK(std::fabs(q.q[i] * q.scale[c] - w[i]) <= 0.5f * q.scale[c] * 1.0001f);
      }
      CHECK(q.q[4] == 0.f);
      for (size_t c = 0; c < amax.size(); ++c) {
        CHECK(q.scale[c] == doctest::Approx(amax[c] / qmax));
        CHECK(qabs[c] == qmax);
      }
    }
}

namespace {

// conv -> relu -> conv_transpose2d -> flatten -> dense, with a conv reading the model input.
std::vector<uint8_t> small_float_model() {
  std::mt19937_64 rng(11);
  const auto weights = [&](int64_t n, float r) { return test::uniform_weights(rng, n, r); };
  ModelBuilder b("small");
  b.set_metadata("task", "classifier");
  const int x = b.input("image", {-1, 2, 6, 6});
  Conv2DParams c;
  c.pad = {1, 1, 1, 1};
  int h = b.node("c1", c, {x, b.constant("c1.w", {4, 2, 3, 3}, weights(72, 0.4f)), b.constant("c1.b", {4}, weights(4, 0.1f))},
                 "c1_out");
  h = b.node("r1", ActivationParams{}, {h}, "r1_out");
  ConvTranspose2DParams t;
  t.stride_h = t.stride_w = 2;
  t.pad = {1, 1, 1, 1};
  t.output_padding_h = t.output_padding_w = 1;  // 6 -> 12
  h = b.node("t1", t, {h, b.constant("t1.w", {4, 3, 3, 3}, weights(108, 0.3f))}, "t1_out");
  h = b.node("f1", FlattenParams{}, {h}, "f1_out");
  h = b.node("d1", DenseParams{}, {h, b.constant("d1.w", {5, 432}, weights(5 * 432, 0.05f))}, "logits");
  b.output(h);
  return b.finish();
}

}  // namespace

TEST_CASE("quantizer: the QDQ rewrite keeps names, folds int8 weights at load and stays close to float") {
  const Model model = Model::from_bytes(small_float_model(), "small.fb");
  quant::Options o;
  const quant::Plan plan = quant::plan(model, o);
  REQUIRE(plan.nodes.size() == 3);
  CHECK(plan.nodes[0].name == "c1");
  CHECK(plan.nodes[1].axis == 1);  // conv_transpose2d: weight [C_in, C_out, KH, KW]
  CHECK(plan.activations == std::vector<std::string>{"image", "r1_out", "f1_out"});

  // Ranges from the float model over random inputs, as infer quantize gathers them.
  std::mt19937_64 rng(2);
  Tensor in({8, 2, 6, 6});
  for (float& v : in.data) v = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  SessionOptions so;
  so.backend = "cpu";
  so.extra_outputs = {"r1_out", "f1_out"};
  Session fs(model, so);
  const std::vector<Tensor> outs = fs.run({in});
  REQUIRE(outs.size() == 3);
  std::map<std::string, quant::Observer> ob;
  ob["image"].add(in.data.data(), in.numel());
  ob["r1_out"].add(outs[1].data.data(), outs[1].numel());
  ob["f1_out"].add(outs[2].data.data(), outs[2].numel());
  std::map<std::string, std::pair<float, float>> ranges;
  for (auto& [name, o2] : ob) ranges[name] = o2.range(quant::Method::MinMax, 0);
  CHECK(ranges["r1_out"].first == 0.f);  // after a ReLU

  for (DType act : {DType::U8, DType::I8}) {
    CAPTURE(dtype_name(act));
    o.activation = act;
    const Model q = Model::from_bytes(quant::rewrite(model, plan, ranges, o, "test", {{"quantization", "yes"}}), "q.fb");
    CHECK(q.producer() == "test");
    CHECK(q.meta("task") == "classifier");
    CHECK(q.meta("quantization") == "yes");
    CHECK(q.inputs()[0].name == "image");
    CHECK(q.outputs()[0].name == "logits");
    int dequantized = 0;
    for (const ModelConstant& c : q.constants()) dequantized += c.dequantized;
    CHECK(dequantized == 3);  // c1.w, t1.w, d1.w
    int qnodes = 0;
    for (const ModelNode& n : q.nodes()) qnodes += n.op == "quantize_linear";
    CHECK(qnodes == 3);
    CHECK(q.weight_bytes() < model.weight_bytes() / 2);
    // The int8 weights are what quantize_weight makes of the float ones.
    const detail::Graph& g = q.graph();
    for (const detail::Value& v : g.values)
      if (v.name == "d1.w") {
        REQUIRE(v.dequantized);
        CHECK(g.values[size_t(v.dequantized->source)].dtype == DType::I8);
        CHECK(v.dequantized->axis == 0);
      }
    SessionOptions co;
    co.backend = "cpu";
    Session qs(q, co), rs(model, co);
    const double err = infer::test::rel_error(qs.run({in})[0].data, rs.run({in})[0].data);
    MESSAGE(std::string(dtype_name(act)) << ": relative error of the logits " << err);
    CHECK(err < 0.05);
    CHECK(err > 0.0);  // it is quantized
  }
  // --reduce-range: every int8 weight in [-64, 64], each weight's largest at +-64; still close
  o.activation = DType::U8;
  o.reduce_range = true;
  const Model r = Model::from_bytes(quant::rewrite(model, plan, ranges, o, "test", {}), "r.fb");
  const detail::Graph& rg = r.graph();
  int weights = 0;
  for (const detail::Value& v : rg.values) {
    if (!v.dequantized) continue;
    const detail::Value& src = rg.values[size_t(v.dequantized->source)];
    REQUIRE(src.dtype == DType::I8);
    const auto [lo, hi] = std::minmax_element(src.data, src.data + shape_numel(src.shape));
    CHECK(*lo >= -64.f);
    CHECK(*hi <= 64.f);
    CHECK(std::max(-*lo, *hi) == 64.f);
    ++weights;
  }
  CHECK(weights == 3);
  SessionOptions co;
  co.backend = "cpu";
  Session rs7(r, co), f32(model, co);
  const double err7 = infer::test::rel_error(rs7.run({in})[0].data, f32.run({in})[0].data);
  MESSAGE("7-bit weights: relative error of the logits " << err7);
  CHECK(err7 < 0.05);

  // Refusals: an already quantized model, an --exclude naming no node; an excluded node stays float.
  o.activation = DType::U8;
  const Model q = Model::from_bytes(quant::rewrite(model, plan, ranges, o, "test", {}), "q.fb");
  CHECK_THROWS_WITH_AS(quant::plan(q, o), Contains("already quantized"), Error);
  o.exclude = {"nope"};
  CHECK_THROWS_WITH_AS(quant::plan(model, o), Contains("'nope'"), Error);
  o.exclude = {"t1"};
  const quant::Plan partial = quant::plan(model, o);
  CHECK(partial.nodes.size() == 2);
  CHECK(partial.activations == std::vector<std::string>{"image", "f1_out"});
  CHECK_THROWS_WITH_AS(quant::parse_method("kl"), Contains("unknown calibration method 'kl'"), Error);
}
