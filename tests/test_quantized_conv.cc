// quantized_conv2d and the fuse_quantized_conv2d pass (issue 30 must 3, cpu): the shape rule's errors;
// the reference against quantize -> dequantize -> float conv2d (the QDQ nodes it replaces); the cpu
// "qgemm" kernel against the reference on random shapes (odd channel counts and sizes, kernels 1-5,
// strides 1-3, dilation, asymmetric padding, groups, u8 and i8 inputs with any zero point and
// saturation, per-channel and per-tensor weight scales, a residual, bounded activations, batch 1-3) in
// NCHW and NHWC, outputs and workspace poisoned; and the pass on a quantized model from infer
// quantize's rewrite: what fuses, what stays (a 4-channel conv, a value read back), the log, the same
// outputs as fake quantization up to float rounding; per-axis quantize_linear / dequantize_linear in
// NHWC against NCHW; their cpu "direct" kernels (per tensor) bit for bit against the reference (ties,
// NaN, saturation, both layouts); the cpu "depthwise" kernel against the reference on random depthwise
// shapes, a MobileNet grid and quantize_linear's edge cases (bit for bit without a residual), and the
// pass on a MobileNet-like model (no float depthwise left); 8-bit inputs and outputs (x_quantized, y_dtype)
// of each variant against its own float path, bit for bit, and the quantized_activations pass (the same
// outputs, one byte an element in the arena); transposed convolutions through the pass as int8 stride
// phases (a generator with BatchNorms folded into int8 weights, the 1x1-input and stride-1 forms, and
// 48 random geometries: fused exactly where the geometry splits, the fake-quantized values either
// way). Run per CPU ISA level by ctest (INFER_CPU_ISA).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/infer.h"
#include "infer/kernel.h"
#include "infer/model_builder.h"
#include "plan.h"
#include "quant_test_util.h"
#include "quantizer.h"
#include "shape_inference.h"
#include "test_util.h"

using namespace infer;
using doctest::Contains;
using infer::test::poison;
using infer::test::shaped_node;
using infer::test::random_activation;
using infer::test::random_vector;
using infer::test::rel_error;
using infer::test::to_nchw;
using infer::test::to_nhwc;
using infer::test::uniform;
using infer::test::pass_line;
using infer::test::permute_bytes;
using infer::test::quantize_bytes;
using infer::test::quantized_model;

namespace {

// A random quantized_conv2d with its inputs (x, weight_q, weight_scale, bias [, residual]), NCHW.
struct Case {
  QuantizedConv2DParams p;
  std::vector<Shape> shapes;
  std::vector<std::vector<float>> inputs;
};

Case random_case(std::mt19937_64& rng, int t) {
  Case c;
  Conv2DParams& p = c.p.conv;
  const test::QConvGeometry geo = test::random_qconv_geometry(rng, p, 4);
  const int kh = geo.kh, kw = geo.kw, ekh = geo.ekh, ekw = geo.ekw;
  p.groups = t % 5 == 4 ? uniform(rng, 2, 3) : 1;
  p.add_residual = t % 3 == 2;
  const int64_t N = uniform(rng, 1, 3), CG = uniform(rng, 1, 37), KG = uniform(rng, 8, 45);
  int64_t H, W;
  do {
    H = uniform(rng, 1, 17), W = uniform(rng, 1, 17);
  } while (H + p.pad.top + p.pad.bottom < ekh || W + p.pad.left + p.pad.right < ekw);
  const int64_t C = CG * p.groups, K = KG * p.groups;
  test::random_x_quantization(rng, c.p, t);
  const bool per_channel = t % 4 != 1;
  const Shape y{N, K, (H + p.pad.top + p.pad.bottom - ekh) / p.stride_h + 1,
                (W + p.pad.left + p.pad.right - ekw) / p.stride_w + 1};
  c.shapes = {{N, C, H, W}, {K, CG, kh, kw}, {per_channel ? K : 1}, {K}};
  if (p.add_residual) c.shapes.push_back(y);
  const uint64_t seed = rng();
  c.inputs.push_back(test::random_x_values(c.p, t, size_t(shape_numel(c.shapes[0])), seed));
  std::vector<float> wq(size_t(shape_numel(c.shapes[1])));
  // 7-bit weights one time in three (quantized_conv2d.qgemm's u8s8 form on AVX2 / AVX-512), at the
  // ends of their range one time in six
  const int wbits = t % 3 == 0 ? 7 : 8;
  for (float& v : wq) v = wbits == 7 ? float(t % 6 == 0 ? (rng() % 2 ? 64 : -64) : uniform(rng, -64, 64))
                                     : float(uniform(rng, -128, 127));
  c.inputs.push_back(wq);
  c.inputs.push_back(random_vector(size_t(c.shapes[2][0]), seed + 1, 0.0005f, 0.01f));
  c.inputs.push_back(random_vector(size_t(K), seed + 2, -0.5f, 0.5f));
  if (p.add_residual) c.inputs.push_back(random_vector(size_t(shape_numel(y)), seed + 3));
  return c;
}

// Runs cpu variant `name` on the case in `layout` (activations converted to NHWC and back), the
// weight, its scale and the bias as constants; output and workspace poisoned.
std::vector<float> run_in(Layout layout, const std::string& name, const Case& c) {
  NodeDesc node = shaped_node(c.p, c.shapes);
  node.layout = layout;
  for (size_t k : {size_t(1), size_t(2), size_t(3)}) node.constants[k] = c.inputs[k].data();
  const KernelVariant* v = KernelRegistry::global().find("cpu", "quantized_conv2d", name);
  REQUIRE_MESSAGE(v != nullptr, "no variant cpu/quantized_conv2d/" << name);
  REQUIRE_MESSAGE(variant_applies(*v, node), name << " does not apply");
  std::vector<std::vector<float>> in = c.inputs;
  const bool nhwc = layout == Layout::NHWC;
  if (nhwc) {
    in[0] = to_nhwc(in[0], c.shapes[0]);
    if (c.p.conv.add_residual) in[4] = to_nhwc(in[4], c.shapes[4]);
  }
  std::vector<float> workspace(v->workspace_bytes ? v->workspace_bytes(node) / sizeof(float) + 1 : 0);
  poison(workspace);
  const std::shared_ptr<void> prepared = v->prepare ? v->prepare(node) : nullptr;
  const Shape& ys = node.output_shapes.at(0);
  std::vector<float> out(static_cast<size_t>(shape_numel(ys)));
  poison(out);
  KernelCall call{node, {}, {out.data()}, workspace.empty() ? nullptr : workspace.data(), prepared.get()};
  for (const auto& x : in) call.inputs.push_back(x.data());
  v->run(call);
  return nhwc ? to_nchw(out, ys) : out;
}

// A random depthwise quantized_conv2d (groups == C_in == C_out, weight [C,1,KH,KW]): channel counts
// from a list of odd and vector-edge sizes, kernels mostly 3x3 and 5x5 (sometimes 1-7, KH != KW),
// strides 1-2 (3 at times), dilation 2 at times, padding 0 .. K-1 per side (asymmetric one time in
// three), odd H and W, no activation / ReLU / ReLU6 / another bounded one in turn, a zero bias
// (the pass's) one time in four, a residual one time in three, u8 and i8 inputs.
Case random_dw_case(std::mt19937_64& rng, int t) {
  static const int64_t kChannels[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 47, 64, 96, 97};
  Case c;
  Conv2DParams& p = c.p.conv;
  const int kh = t % 8 == 7 ? uniform(rng, 1, 7) : (t % 2 ? 5 : 3);
  const int kw = t % 8 == 7 && rng() % 2 ? uniform(rng, 1, 7) : kh;
  p.stride_h = t % 11 == 10 ? 3 : uniform(rng, 1, 2);
  p.stride_w = rng() % 5 == 0 ? uniform(rng, 1, 3) : p.stride_h;
  p.dilation_h = rng() % 6 == 0 ? 2 : 1;
  p.dilation_w = rng() % 6 == 0 ? 2 : p.dilation_h;
  const int ekh = p.dilation_h * (kh - 1) + 1, ekw = p.dilation_w * (kw - 1) + 1;
  p.pad.top = uniform(rng, 0, std::min(ekh - 1, 2));
  p.pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, ekh - 1) : p.pad.top;
  p.pad.left = uniform(rng, 0, std::min(ekw - 1, 2));
  p.pad.right = rng() % 3 == 0 ? uniform(rng, 0, ekw - 1) : p.pad.left;
  const int a = t % 4;
  p.activation = a == 0 ? Activation{} : a == 1 ? Activation{ActivationKind::Relu, 0.01f, 0.f}
                 : a == 2 ? Activation{ActivationKind::Clip, 0.f, 6.f} : random_activation(rng);
  p.add_residual = t % 3 == 2;
  const int64_t C = kChannels[rng() % (sizeof kChannels / sizeof kChannels[0])];
  p.groups = static_cast<int>(C);
  const int64_t N = uniform(rng, 1, 2);
  int64_t H, W;
  do {
    H = 2 * uniform(rng, 0, 9) + 1, W = 2 * uniform(rng, 0, 9) + 1;  // odd, 1 .. 19
    if (rng() % 4 == 0) W += 1;
  } while (H + p.pad.top + p.pad.bottom < ekh || W + p.pad.left + p.pad.right < ekw);
  c.p.x_dtype = t % 2 ? DType::I8 : DType::U8;
  if (t % 3 == 1) c.p.x_dtype = c.p.x_dtype == DType::I8 ? DType::U8 : DType::I8;  // both types with both kernels
  c.p.x_zero_point = c.p.x_dtype == DType::U8 ? uniform(rng, 0, 255) : uniform(rng, -128, 127);
  if (t % 7 == 3) c.p.x_zero_point = 0;
  c.p.x_scale = std::uniform_real_distribution<float>(0.004f, 0.03f)(rng);
  const bool per_channel = t % 5 != 1;
  const Shape y{N, C, (H + p.pad.top + p.pad.bottom - ekh) / p.stride_h + 1,
                (W + p.pad.left + p.pad.right - ekw) / p.stride_w + 1};
  c.shapes = {{N, C, H, W}, {C, 1, kh, kw}, {per_channel ? C : 1}, {C}};
  if (p.add_residual) c.shapes.push_back(y);
  const uint64_t seed = rng();
  const float lo_q = (c.p.x_dtype == DType::U8 ? 0.f : -128.f) - float(c.p.x_zero_point);
  const float hi_q = (c.p.x_dtype == DType::U8 ? 255.f : 127.f) - float(c.p.x_zero_point);
  const float widen = t % 4 == 0 ? 1.3f : 0.9f;  // saturation one time in four
  c.inputs.push_back(random_vector(size_t(shape_numel(c.shapes[0])), seed, lo_q * c.p.x_scale * widen - 0.05f,
                                   hi_q * c.p.x_scale * widen + 0.05f));
  std::vector<float> wq(size_t(shape_numel(c.shapes[1])));
  for (float& v : wq) v = float(uniform(rng, -128, 127));
  if (t % 9 == 4)  // the extremes everywhere: the largest sums
    for (size_t i = 0; i < wq.size(); ++i) wq[i] = i % 2 ? -128.f : 127.f;
  c.inputs.push_back(wq);
  c.inputs.push_back(random_vector(size_t(c.shapes[2][0]), seed + 1, 0.0005f, 0.01f));
  c.inputs.push_back(t % 4 == 3 ? std::vector<float>(size_t(C), 0.f) : random_vector(size_t(C), seed + 2, -0.5f, 0.5f));
  if (p.add_residual) c.inputs.push_back(random_vector(size_t(shape_numel(y)), seed + 3));
  return c;
}

// The largest |got - want| / (1 + |want|) over the outputs.
double worst_error(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(double(want[i]))));
  return worst;
}

std::string error_of(const QuantizedConv2DParams& p, const std::vector<Shape>& in) {
  return infer::test::shape_error(p, in, "qc");
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }


// A float model: c1 3->16 3x3 (ReLU), c2 16->16 3x3 with a residual add of c1's output (ReLU after),
// c3 16->4 1x1 (4 output channels: stays float), global average pool. Quantized by infer quantize's
// plan and rewrite with min-max ranges over `calib`.
std::vector<uint8_t> float_model() {
  std::mt19937_64 rng(21);
  const auto weights = [&](int64_t n, float r) { return test::uniform_weights(rng, n, r); };
  ModelBuilder b("qnet");
  const int x = b.input("image", {-1, 3, 9, 11});
  Conv2DParams c;
  c.pad = {1, 1, 1, 1};
  c.activation = Activation{ActivationKind::Relu, 0.01f, 0.f};
  const int h1 = b.node("c1", c, {x, b.constant("c1.w", {16, 3, 3, 3}, weights(432, 0.4f)),
                                  b.constant("c1.b", {16}, weights(16, 0.1f))}, "c1_out");
  Conv2DParams c2 = c;
  c2.activation = Activation{};
  const int h2 = b.node("c2", c2, {h1, b.constant("c2.w", {16, 16, 3, 3}, weights(16 * 144, 0.15f))}, "c2_out");
  AddParams add;
  add.activation = Activation{ActivationKind::Relu, 0.01f, 0.f};
  const int h3 = b.node("add", add, {h2, h1}, "add_out");
  Conv2DParams c3;
  const int h4 = b.node("c3", c3, {h3, b.constant("c3.w", {4, 16, 1, 1}, weights(64, 0.3f)),
                                   b.constant("c3.b", {4}, weights(4, 0.1f))}, "c3_out");
  Pool2DParams gap;
  gap.kind = PoolKind::Average;
  gap.kernel_h = gap.stride_h = 9, gap.kernel_w = gap.stride_w = 11;
  b.output(b.node("gap", gap, {h4}, "scores"));
  return b.finish();
}

// A MobileNetV2-like float model: c1 3->16 3x3 s2 (ReLU6), dw1 16 3x3 depthwise (ReLU6), pw1 16->16
// 1x1, dw2 16 5x5 s2 depthwise with asymmetric padding (no activation), pw2 16->24 1x1 (ReLU6), c3 24->4
// 1x1 (4 output channels: stays float), global average pool.
std::vector<uint8_t> depthwise_model() {
  std::mt19937_64 rng(22);
  const auto weights = [&](int64_t n, float r) { return test::uniform_weights(rng, n, r); };
  const Activation relu6{ActivationKind::Clip, 0.f, 6.f};
  ModelBuilder b("dwnet");
  const int x = b.input("image", {-1, 3, 17, 15});
  Conv2DParams c1;
  c1.stride_h = c1.stride_w = 2;
  c1.pad = {1, 1, 1, 1};
  c1.activation = relu6;
  const int h1 = b.node("c1", c1, {x, b.constant("c1.w", {16, 3, 3, 3}, weights(432, 0.5f)),
                                   b.constant("c1.b", {16}, weights(16, 0.1f))}, "c1_out");
  Conv2DParams dw1;
  dw1.groups = 16;
  dw1.pad = {1, 1, 1, 1};
  dw1.activation = relu6;
  const int h2 = b.node("dw1", dw1, {h1, b.constant("dw1.w", {16, 1, 3, 3}, weights(144, 0.6f)),
                                     b.constant("dw1.b", {16}, weights(16, 0.1f))}, "dw1_out");
  Conv2DParams pw;
  const int h3 = b.node("pw1", pw, {h2, b.constant("pw1.w", {16, 16, 1, 1}, weights(256, 0.4f)),
                                    b.constant("pw1.b", {16}, weights(16, 0.1f))}, "pw1_out");
  Conv2DParams dw2;
  dw2.groups = 16;
  dw2.stride_h = dw2.stride_w = 2;
  dw2.pad = {1, 1, 2, 2};
  const int h4 = b.node("dw2", dw2, {h3, b.constant("dw2.w", {16, 1, 5, 5}, weights(400, 0.3f))}, "dw2_out");
  Conv2DParams pw2;
  pw2.activation = relu6;
  const int h5 = b.node("pw2", pw2, {h4, b.constant("pw2.w", {24, 16, 1, 1}, weights(384, 0.4f)),
                                     b.constant("pw2.b", {24}, weights(24, 0.1f))}, "pw2_out");
  Conv2DParams c3;
  const int h6 = b.node("c3", c3, {h5, b.constant("c3.w", {4, 24, 1, 1}, weights(96, 0.3f)),
                                   b.constant("c3.b", {4}, weights(4, 0.1f))}, "c3_out");
  Pool2DParams gap;
  gap.kind = PoolKind::Average;
  gap.kernel_h = gap.stride_h = 3, gap.kernel_w = gap.stride_w = 2;
  gap.pad = {0, 0, 0, 0};
  b.output(b.node("gap", gap, {h6}, "scores"));
  return b.finish();
}


}  // namespace

TEST_CASE("quantized_conv2d: the shape rule names what is wrong") {
  QuantizedConv2DParams p;
  p.conv.pad = {1, 1, 1, 1};
  const std::vector<Shape> ok{{1, 3, 5, 5}, {8, 3, 3, 3}, {8}, {8}};
  CHECK(error_of(p, ok).empty());
  CHECK(error_of(p, {{1, 3, 5, 5}, {8, 3, 3, 3}, {1}, {8}}).empty());  // per tensor
  CHECK_MESSAGE(has(error_of(p, {{1, 3, 5, 5}, {8, 3, 3, 3}, {4}, {8}}), "input 2 (weight_scale) has shape 4"), error_of(p, {{1, 3, 5, 5}, {8, 3, 3, 3}, {4}, {8}}));
  CHECK_MESSAGE(has(error_of(p, {{1, 3, 5, 5}, {8, 3, 3, 3}, {8}}), "4 inputs"), error_of(p, {{1, 3, 5, 5}, {8, 3, 3, 3}, {8}}));
  QuantizedConv2DParams bad = p;
  bad.x_scale = 0.f;
  CHECK_MESSAGE(has(error_of(bad, ok), "x_scale must be finite and > 0"), error_of(bad, ok));
  bad = p;
  bad.x_zero_point = 256;
  CHECK_MESSAGE(has(error_of(bad, ok), "x_zero_point 256 is outside u8's range"), error_of(bad, ok));
  bad = p;
  bad.x_dtype = DType::I8;
  bad.x_zero_point = 128;
  CHECK_MESSAGE(has(error_of(bad, ok), "x_zero_point 128 is outside i8's range"), error_of(bad, ok));
  bad = p;
  bad.x_dtype = DType::F32;
  CHECK_MESSAGE(has(error_of(bad, ok), "x_dtype is f32"), error_of(bad, ok));
  bad = p;
  bad.conv.activation = Activation{ActivationKind::PRelu, 0.f, 0.f};
  CHECK_MESSAGE(has(error_of(bad, ok), "prelu"), error_of(bad, ok));
  bad = p;
  bad.conv.add_residual = true;
  CHECK_MESSAGE(has(error_of(bad, {{1, 3, 5, 5}, {8, 3, 3, 3}, {8}, {8}, {1, 8, 4, 5}}), "residual"), error_of(bad, {{1, 3, 5, 5}, {8, 3, 3, 3}, {8}, {8}, {1, 8, 4, 5}}));
}

TEST_CASE("quantized_conv2d reference: the quantize -> dequantize -> conv2d it replaces, up to rounding") {
  std::mt19937_64 rng(31);
  const KernelVariant* qdq_q = KernelRegistry::global().find("cpu", "quantize_linear", "reference");
  const KernelVariant* conv = KernelRegistry::global().find("cpu", "conv2d", "reference");
  REQUIRE(qdq_q);
  REQUIRE(conv);
  for (int t = 0; t < 40; ++t) {
    CAPTURE(t);
    const Case c = random_case(rng, t);
    const std::vector<float> got = infer::test::run_cpu_variant("reference", shaped_node(c.p, c.shapes), c.inputs);
    // the QDQ pair in float, then the float conv with the dequantized weight
    std::vector<float> xdq(c.inputs[0].size());
    const float lo = c.p.x_dtype == DType::U8 ? 0.f : -128.f, hi = c.p.x_dtype == DType::U8 ? 255.f : 127.f;
    for (size_t i = 0; i < xdq.size(); ++i)
      xdq[i] = (std::clamp(std::nearbyint(c.inputs[0][i] / c.p.x_scale) + float(c.p.x_zero_point), lo, hi) -
                float(c.p.x_zero_point)) *
               c.p.x_scale;
    std::vector<float> w(c.inputs[1].size());
    const int64_t per = shape_numel(c.shapes[1]) / c.shapes[1][0];
    for (size_t i = 0; i < w.size(); ++i) w[i] = c.inputs[1][i] * c.inputs[2][c.shapes[2][0] == 1 ? 0 : i / size_t(per)];
    std::vector<Shape> fs{c.shapes[0], c.shapes[1], c.shapes[3]};
    std::vector<std::vector<float>> fi{xdq, w, c.inputs[3]};
    if (c.p.conv.add_residual) {
      fs.push_back(c.shapes[4]);
      fi.push_back(c.inputs[4]);
    }
    const std::vector<float> want = infer::test::run_cpu_variant("reference", shaped_node(c.p.conv, fs), fi);
    CHECK(rel_error(got, want) <= 1e-5);
  }
}

namespace {

// No activation, and an input made of rounding ties ((k +- 0.5) steps, the scale a power of two one
// time in three so that they are exact, else as near as float gets), other values, and every fifth a
// special one (NaN, +-inf, far out of range, -0): quantize_linear's edge cases.
void rounding_input(Case& c, std::mt19937_64& rng, int t) {
  c.p.conv.activation = Activation{};
  c.p.x_scale = t % 3 == 0 ? 0.015625f : std::uniform_real_distribution<float>(0.004f, 0.03f)(rng);
  std::vector<float>& x = c.inputs[0];
  for (size_t i = 0; i < x.size(); ++i) {
    const float k = float(uniform(rng, -300, 300));
    x[i] = i % 3 == 0 ? (k + 0.5f) * c.p.x_scale : i % 3 == 1 ? (k - 0.5f) * c.p.x_scale : k * c.p.x_scale * 0.37f;
  }
  const float specials[] = {std::nanf(""), INFINITY, -INFINITY, 1e30f, -1e30f, 3e9f, -3e9f, -0.f};
  for (size_t i = 0; i < x.size(); i += 5) x[i] = specials[(i / 5) % 8];
}

// The largest |got - want| / (1 + |want|) of qgemm's output in `layout` against the reference's `want`.
double qgemm_error(Layout layout, const Case& c, const std::vector<float>& want) {
  const std::vector<float> got = run_in(layout, "qgemm", c);
  REQUIRE(got.size() == want.size());
  CHECK(infer::test::all_finite(got));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(double(want[i]))));
  return worst;
}

}  // namespace

TEST_CASE("quantized_conv2d.qgemm: the reference's values on random shapes, NCHW and NHWC") {
  std::mt19937_64 rng(41);
  for (int t = 0; t < 160; ++t) {
    CAPTURE(t);
    const Case c = random_case(rng, t);
    CAPTURE(shape_str(c.shapes[0]));
    CAPTURE(shape_str(c.shapes[1]));
    const std::vector<float> want = infer::test::run_cpu_variant("reference", shaped_node(c.p, c.shapes), c.inputs);
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      CAPTURE(layout == Layout::NHWC);
      CHECK(qgemm_error(layout, c, want) <= 2e-6);  // one rounding of float(acc) * m + b and the activation's few ulp
    }
  }
}

// The input's quantization in both GEMM forms (int16 pairs; uint8 with 7-bit weights on AVX2 / AVX-512):
// ties, NaN, infinities and saturation as quantize_linear rounds them, against the reference.
TEST_CASE("quantized_conv2d.qgemm: quantize_linear's rounding of ties, NaN, infinities and saturation") {
  std::mt19937_64 rng(93);
  for (int t = 0; t < 24; ++t) {
    CAPTURE(t);
    Case c = random_case(rng, 3 * (t / 2) + (t % 2 ? 1 : 0));  // 7-bit weights for even t, never a residual
    c.p.conv.add_residual = false;
    c.shapes.resize(4);
    c.inputs.resize(4);
    rounding_input(c, rng, t);
    const std::vector<float> want = infer::test::run_cpu_variant("reference", shaped_node(c.p, c.shapes), c.inputs);
    REQUIRE(infer::test::all_finite(want));
    for (Layout layout : {Layout::NHWC, Layout::NCHW}) {
      CAPTURE(layout == Layout::NHWC);
      CHECK(qgemm_error(layout, c, want) <= 2e-6);
    }
  }
}

TEST_CASE("quantized_conv2d.qgemm: a weight that is not int8 is refused when prepared") {
  QuantizedConv2DParams p;
  NodeDesc node = shaped_node(p, {{1, 3, 4, 4}, {8, 3, 1, 1}, {1}, {8}});
  std::vector<float> w(24, 3.f), s{0.01f}, b(8, 0.f);
  node.constants = {nullptr, w.data(), s.data(), b.data()};
  const KernelVariant* v = KernelRegistry::global().find("cpu", "quantized_conv2d", "qgemm");
  REQUIRE(v);
  CHECK_NOTHROW(v->prepare(node));
  w[5] = 2.5f;
  CHECK_THROWS_WITH_AS(v->prepare(node), Contains("weight_q holds 2.5"), Error);
  w[5] = 200.f;
  CHECK_THROWS_WITH_AS(v->prepare(node), Contains("not an int8 value"), Error);
  w[5] = 1.f;
  s[0] = -1.f;
  CHECK_THROWS_WITH_AS(v->prepare(node), Contains("weight_scale holds"), Error);
  // depthwise-like groups (fewer than 8 outputs a group) stay on the float path
  QuantizedConv2DParams dw;
  dw.conv.groups = 8;
  NodeDesc dwn = shaped_node(dw, {{1, 8, 4, 4}, {8, 1, 3, 3}, {8}, {8}});
  std::vector<float> dww(72, 1.f), dws(8, 0.01f);
  dwn.constants = {nullptr, dww.data(), dws.data(), b.data()};
  CHECK_FALSE(variant_applies(*v, dwn));
}

TEST_CASE("quantized_conv2d.depthwise: the reference's values on random depthwise shapes, NCHW and NHWC") {
  std::mt19937_64 rng(71);
  int exact_cases = 0;
  for (int t = 0; t < 240; ++t) {
    CAPTURE(t);
    const Case c = random_dw_case(rng, t);
    CAPTURE(shape_str(c.shapes[0]));
    CAPTURE(shape_str(c.shapes[1]));
    CAPTURE(c.p.conv.stride_h);
    CAPTURE(c.p.conv.stride_w);
    CAPTURE(c.p.conv.dilation_h);
    CAPTURE(c.p.conv.dilation_w);
    CAPTURE(c.p.conv.pad.top);
    CAPTURE(c.p.conv.pad.left);
    CAPTURE(c.p.conv.pad.bottom);
    CAPTURE(c.p.conv.pad.right);
    CAPTURE(dtype_name(c.p.x_dtype));
    const std::vector<float> want = infer::test::run_cpu_variant("reference", shaped_node(c.p, c.shapes), c.inputs);
    REQUIRE(infer::test::all_finite(want));
    // float(acc) * m is the reference's product; + bias is one float rounding of the reference's exact
    // double sum, and ReLU / Clip commute with rounding: bit for bit without a residual
    const ActivationKind k = c.p.conv.activation.kind;
    const bool exact = !c.p.conv.add_residual &&
                       (k == ActivationKind::None || k == ActivationKind::Relu || k == ActivationKind::Clip);
    exact_cases += exact;
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      CAPTURE(layout == Layout::NHWC);
      const std::vector<float> got = run_in(layout, "depthwise", c);
      REQUIRE(got.size() == want.size());
      CHECK(infer::test::all_finite(got));
      if (exact) CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
      CHECK(worst_error(got, want) <= 2e-6);  // a residual: two float roundings; vector activations: few ulp
    }
  }
  CHECK(exact_cases >= 80);
}

TEST_CASE("quantized_conv2d.depthwise: MobileNet's shapes, every channel count edge, both input types") {
  // 3x3 and 5x5, stride 1 and 2, padding 0 / 1 / 2 and asymmetric (0, 1) as a stride-2 'same' export
  // writes it, C around the vector widths; ReLU6 as MobileNetV2's
  std::mt19937_64 rng(81);
  int t = 0;
  for (int64_t C : {1, 3, 7, 17, 32, 33})
    for (int k : {3, 5})
      for (int s : {1, 2})
        for (int pad : {0, 1, 2, -1}) {
          CAPTURE(C);
          CAPTURE(k);
          CAPTURE(s);
          CAPTURE(pad);
          Case c = random_dw_case(rng, 0);
          c.p.x_dtype = t++ % 2 ? DType::I8 : DType::U8;
          c.p.x_zero_point = c.p.x_dtype == DType::U8 ? uniform(rng, 0, 255) : uniform(rng, -128, 127);
          Conv2DParams& p = c.p.conv;
          p.add_residual = false;
          c.inputs.resize(4);
          p.stride_h = p.stride_w = s;
          p.dilation_h = p.dilation_w = 1;
          p.pad = pad < 0 ? Padding2D{0, 0, 1, 1} : Padding2D{pad, pad, pad, pad};
          p.activation = Activation{ActivationKind::Clip, 0.f, 6.f};
          p.groups = static_cast<int>(C);
          const int64_t H = 13, W = 11;
          c.shapes = {{1, C, H, W}, {C, 1, k, k}, {C}, {C}};
          c.inputs[0] = random_vector(size_t(C * H * W), uint64_t(t), -1.f, 3.f);
          c.inputs[1].resize(size_t(C * k * k));
          for (float& v : c.inputs[1]) v = float(uniform(rng, -128, 127));
          c.inputs[2] = random_vector(size_t(C), uint64_t(t) + 7, 0.0005f, 0.01f);
          c.inputs[3] = random_vector(size_t(C), uint64_t(t) + 8, -0.5f, 0.5f);
          const std::vector<float> want = infer::test::run_cpu_variant("reference", shaped_node(c.p, c.shapes), c.inputs);
          for (Layout layout : {Layout::NHWC, Layout::NCHW}) {
            const std::vector<float> got = run_in(layout, "depthwise", c);
            REQUIRE(got.size() == want.size());
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
          }
        }
}

TEST_CASE("quantized_conv2d.depthwise: quantize_linear's rounding of ties, NaN, infinities and saturation, bit for bit") {
  std::mt19937_64 rng(91);
  for (int t = 0; t < 24; ++t) {
    CAPTURE(t);
    Case c = random_dw_case(rng, 0);  // no residual, no activation
    c.p.x_dtype = t % 2 ? DType::I8 : DType::U8;
    c.p.x_zero_point = c.p.x_dtype == DType::U8 ? uniform(rng, 0, 255) : uniform(rng, -128, 127);
    rounding_input(c, rng, t);
    const std::vector<float> want = infer::test::run_cpu_variant("reference", shaped_node(c.p, c.shapes), c.inputs);
    REQUIRE(infer::test::all_finite(want));
    for (Layout layout : {Layout::NHWC, Layout::NCHW}) {
      CAPTURE(layout == Layout::NHWC);
      const std::vector<float> got = run_in(layout, "depthwise", c);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("quantized_conv2d.depthwise: depthwise only, and a weight that is not int8 is refused when prepared") {
  const KernelVariant* v = KernelRegistry::global().find("cpu", "quantized_conv2d", "depthwise");
  REQUIRE(v);
  CHECK(v->layouts == std::vector<Layout>{Layout::NCHW, Layout::NHWC});
  QuantizedConv2DParams p;
  p.conv.pad = {1, 1, 1, 1};
  p.conv.groups = 8;
  NodeDesc node = shaped_node(p, {{1, 8, 6, 6}, {8, 1, 3, 3}, {8}, {8}});
  std::vector<float> w(72, 3.f), s(8, 0.01f), b(8, 0.f);
  node.constants = {nullptr, w.data(), s.data(), b.data()};
  CHECK(variant_applies(*v, node));
  CHECK_NOTHROW(v->prepare(node));
  w[5] = 2.5f;
  CHECK_THROWS_WITH_AS(v->prepare(node), Contains("weight_q holds 2.5"), Error);
  w[5] = -129.f;
  CHECK_THROWS_WITH_AS(v->prepare(node), Contains("not an int8 value"), Error);
  w[5] = 1.f;
  s[3] = 0.f;
  CHECK_THROWS_WITH_AS(v->prepare(node), Contains("weight_scale holds"), Error);
  s[3] = 0.01f;
  NodeDesc no_const = node;
  no_const.constants[1] = nullptr;
  CHECK_FALSE(variant_applies(*v, no_const));
  // not depthwise: one group, grouped (2 channels a group), a channel multiplier of 2
  QuantizedConv2DParams dense = p;
  dense.conv.groups = 1;
  std::vector<float> wd(8 * 8 * 9, 1.f);
  NodeDesc dn = shaped_node(dense, {{1, 8, 6, 6}, {8, 8, 3, 3}, {8}, {8}});
  dn.constants = {nullptr, wd.data(), s.data(), b.data()};
  CHECK_FALSE(variant_applies(*v, dn));
  QuantizedConv2DParams grouped = p;
  grouped.conv.groups = 4;
  NodeDesc gn = shaped_node(grouped, {{1, 8, 6, 6}, {8, 2, 3, 3}, {8}, {8}});
  gn.constants = {nullptr, wd.data(), s.data(), b.data()};
  CHECK_FALSE(variant_applies(*v, gn));
  std::vector<float> s16(16, 0.01f), b16(16, 0.f);
  NodeDesc mn = shaped_node(p, {{1, 8, 6, 6}, {16, 1, 3, 3}, {16}, {16}});
  mn.constants = {nullptr, wd.data(), s16.data(), b16.data()};
  CHECK_FALSE(variant_applies(*v, mn));
  // one channel (groups 1 == C_in == C_out) is depthwise too (qgemm takes 8 outputs or more)
  QuantizedConv2DParams one;
  NodeDesc on = shaped_node(one, {{1, 1, 6, 6}, {1, 1, 3, 3}, {1}, {1}});
  on.constants = {nullptr, w.data(), s.data(), b.data()};
  CHECK(variant_applies(*v, on));
}

TEST_CASE("fuse_quantized_conv2d: a quantized model's convolutions run in int8 on cpu, as fake quantization does") {
  const Model model = Model::from_bytes(float_model(), "qnet.fb");
  Tensor calib({6, 3, 9, 11});
  std::mt19937_64 rng(3);
  for (float& v : calib.data) v = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  Tensor in({2, 3, 9, 11});
  for (float& v : in.data) v = std::uniform_real_distribution<float>(-1.1f, 1.1f)(rng);
  for (DType act : {DType::U8, DType::I8}) {
    CAPTURE(dtype_name(act));
    const Model q = Model::from_bytes(quantized_model(model, calib, act), "q.fb");
    SessionOptions on, off, ref;
    on.backend = off.backend = "cpu";
    ref.backend = "reference";
    off.passes.fuse_quantized_conv2d = false;
    Session fused(q, on), plain(q, off), oracle(q, ref), flt(model, on);
    CHECK(pass_line(fused, "fuse_quantized_conv2d") ==
          "fuse_quantized_conv2d: 2 quantize_linear -> dequantize_linear -> conv2d / dense / conv_transpose2d chains fused into quantized_conv2d");
    CHECK(pass_line(plain, "fuse_quantized_conv2d") == "fuse_quantized_conv2d: off");
    CHECK(pass_line(oracle, "fuse_quantized_conv2d").empty());  // cpu only
    CHECK(pass_line(flt, "fuse_quantized_conv2d").empty());     // no quantize_linear: no line
    int qconv = 0, qdq = 0;
    for (const NodeInfo& n : fused.nodes()) {
      if (n.op == "quantized_conv2d") {
        ++qconv;
        CHECK(n.variant == "qgemm");
        CHECK(n.fused.size() >= 2);  // its quantize_linear and dequantize_linear
      }
      qdq += n.op == "quantize_linear" || n.op == "dequantize_linear";
    }
    CHECK(qconv == 2);  // c1 and c2 (with its residual); c3 has 4 output channels
    CHECK(qdq == 2);    // c3's pair stays
    const std::vector<float> got = fused.run({in})[0].data, fake = plain.run({in})[0].data,
                             want = oracle.run({in})[0].data, f32 = flt.run({in})[0].data;
    CHECK(rel_error(got, fake) <= 1e-5);
    CHECK(rel_error(got, want) <= 1e-5);
    CHECK(rel_error(got, f32) > 0.0);  // quantized
    CHECK(rel_error(got, f32) <= 0.05);
    // a value read back keeps the pair that makes it (and the conv reading it still fuses)
    SessionOptions keep = on;
    for (const ModelNode& n : q.nodes())
      if (n.op == "dequantize_linear") {
        keep.extra_outputs.push_back(n.outputs.at(0));
        break;
      }
    REQUIRE(keep.extra_outputs.size() == 1);
    Session read(q, keep);
    CHECK(pass_line(read, "fuse_quantized_conv2d") ==
          "fuse_quantized_conv2d: 2 quantize_linear -> dequantize_linear -> conv2d / dense / conv_transpose2d chains fused into quantized_conv2d");
    const std::vector<Tensor> r = read.run({in});
    CHECK(rel_error(r[0].data, got) <= 1e-6);
  }
}

// A classifier head: c1 3->16 3x3 (ReLU), global average pool, flatten, fc1 16->24 (ReLU), fc2 24->10.
std::vector<uint8_t> dense_model() {
  std::mt19937_64 rng(23);
  const auto weights = [&](int64_t n, float r) { return test::uniform_weights(rng, n, r); };
  ModelBuilder b("densenet");
  const int x = b.input("image", {-1, 3, 7, 9});
  Conv2DParams c;
  c.pad = {1, 1, 1, 1};
  c.activation = Activation{ActivationKind::Relu, 0.01f, 0.f};
  const int h1 = b.node("c1", c, {x, b.constant("c1.w", {16, 3, 3, 3}, weights(432, 0.5f)),
                                  b.constant("c1.b", {16}, weights(16, 0.1f))}, "c1_out");
  Pool2DParams gap;
  gap.kind = PoolKind::Average;
  gap.kernel_h = gap.stride_h = 7, gap.kernel_w = gap.stride_w = 9;
  const int h2 = b.node("gap", gap, {h1}, "gap_out");
  const int h3 = b.node("flatten", FlattenParams{}, {h2}, "flat");
  DenseParams d1;
  d1.activation = Activation{ActivationKind::Relu, 0.01f, 0.f};
  const int h4 = b.node("fc1", d1, {h3, b.constant("fc1.w", {24, 16}, weights(384, 0.4f)),
                                    b.constant("fc1.b", {24}, weights(24, 0.1f))}, "fc1_out");
  const int h5 = b.node("fc2", DenseParams{}, {h4, b.constant("fc2.w", {10, 24}, weights(240, 0.4f))}, "scores");
  b.output(h5);
  return b.finish();
}

TEST_CASE("fuse_quantized_conv2d: dense layers run as 1x1 quantized convolutions between reshapes, as fake quantization does") {
  const Model model = Model::from_bytes(dense_model(), "densenet.fb");
  Tensor calib({8, 3, 7, 9});
  std::mt19937_64 rng(6);
  for (float& v : calib.data) v = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  Tensor in({3, 3, 7, 9});
  for (float& v : in.data) v = std::uniform_real_distribution<float>(-1.1f, 1.1f)(rng);
  for (DType act : {DType::U8, DType::I8}) {
    CAPTURE(dtype_name(act));
    const Model q = Model::from_bytes(quantized_model(model, calib, act), "q.fb");
    SessionOptions on, off, ref;
    on.backend = off.backend = "cpu";
    ref.backend = "reference";
    off.passes.fuse_quantized_conv2d = false;
    Session fused(q, on), plain(q, off), oracle(q, ref);
    CHECK(pass_line(fused, "fuse_quantized_conv2d") ==
          "fuse_quantized_conv2d: 3 quantize_linear -> dequantize_linear -> conv2d / dense / conv_transpose2d chains fused into quantized_conv2d");
    std::map<std::string, std::string> ops;
    for (const NodeInfo& n : fused.nodes()) ops[n.name] = n.op + "." + n.variant;
    CHECK(ops["fc1"] == "quantized_conv2d.qgemm");
    CHECK(ops["fc2"] == "quantized_conv2d.qgemm");
    CHECK(ops.count("fc1:to_1x1") == 1);
    CHECK(ops.count("fc2:from_1x1") == 1);
    for (const auto& [name, op] : ops) CHECK_MESSAGE(op.rfind("dense.", 0) != 0, name << " stayed a dense node");
    const std::vector<Tensor> got = fused.run({in});
    REQUIRE(got.size() == 1);
    CHECK(got[0].shape == Shape{3, 10});
    const std::vector<float> fake = plain.run({in})[0].data, want = oracle.run({in})[0].data;
    CHECK(rel_error(got[0].data, fake) <= 1e-5);
    CHECK(rel_error(got[0].data, want) <= 1e-5);
  }
}

TEST_CASE("fuse_quantized_conv2d: depthwise convolutions fuse too (quantized_conv2d.depthwise), no float one left between Q / DQ") {
  const Model model = Model::from_bytes(depthwise_model(), "dwnet.fb");
  Tensor calib({6, 3, 17, 15});
  std::mt19937_64 rng(4);
  for (float& v : calib.data) v = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  Tensor in({2, 3, 17, 15});
  for (float& v : in.data) v = std::uniform_real_distribution<float>(-1.1f, 1.1f)(rng);
  for (DType act : {DType::U8, DType::I8}) {
    CAPTURE(dtype_name(act));
    const Model q = Model::from_bytes(quantized_model(model, calib, act), "q.fb");
    SessionOptions on, off, ref, gemm_only;
    on.backend = off.backend = gemm_only.backend = "cpu";
    ref.backend = "reference";
    off.passes.fuse_quantized_conv2d = false;
    gemm_only.kernels["quantized_conv2d"] = "qgemm";  // the behaviour before the depthwise variant
    Session fused(q, on), plain(q, off), oracle(q, ref), before(q, gemm_only);
    CHECK(pass_line(fused, "fuse_quantized_conv2d") ==
          "fuse_quantized_conv2d: 5 quantize_linear -> dequantize_linear -> conv2d / dense / conv_transpose2d chains fused into quantized_conv2d");
    CHECK(pass_line(before, "fuse_quantized_conv2d") ==
          "fuse_quantized_conv2d: 3 quantize_linear -> dequantize_linear -> conv2d / dense / conv_transpose2d chains fused into quantized_conv2d");
    std::map<std::string, std::string> variant;
    int qdq = 0, float_conv = 0;
    for (const NodeInfo& n : fused.nodes()) {
      if (n.op == "quantized_conv2d") variant[n.name] = n.variant;
      if (n.op == "conv2d") ++float_conv;
      qdq += n.op == "quantize_linear" || n.op == "dequantize_linear";
      if (n.name == "dw1" || n.name == "dw2") CHECK(n.layout == Layout::NHWC);
    }
    CHECK(variant == std::map<std::string, std::string>{{"c1", "qgemm"}, {"dw1", "depthwise"}, {"pw1", "qgemm"},
                                                       {"dw2", "depthwise"}, {"pw2", "qgemm"}});
    CHECK(float_conv == 1);  // c3 (4 output channels) and its pair
    CHECK(qdq == 2);
    int before_qdq = 0;
    for (const NodeInfo& n : before.nodes()) before_qdq += n.op == "quantize_linear" || n.op == "dequantize_linear";
    CHECK(before_qdq == 6);  // dw1's, dw2's and c3's pairs
    const std::vector<float> got = fused.run({in})[0].data, fake = plain.run({in})[0].data,
                             want = oracle.run({in})[0].data, old = before.run({in})[0].data;
    CHECK(rel_error(got, fake) <= 1e-5);
    CHECK(rel_error(got, want) <= 1e-5);
    CHECK(rel_error(got, old) <= 1e-5);
  }
}

// A small generator: z [N, 12, 1, 1] -> tc1 (4x4 from the 1x1 input, BatchNorm with negative scales,
// ReLU) -> tc2 (4x4 s2 p1, bias, ReLU) -> tc3 (3x3 s2 p1 output_padding 1, no bias, BatchNorm) -> tc4
// (5x5 s3 p1: three phases of 2, 1 and 2 taps, Clip) -> tc5 (3x3 s1 p1, bias) -> out (4x4 s2 p1 to 3
// channels, tanh: fewer than 8 outputs, stays float).
std::vector<uint8_t> generator_model() {
  std::mt19937_64 rng(29);
  const auto weights = [&](int64_t n, float r) { return test::uniform_weights(rng, n, r); };
  ModelBuilder b("qgen");
  const int z = b.input("z", {-1, 12, 1, 1});
  auto tconv = [&](const std::string& name, int x, int64_t ci, int64_t co, int k, int s, int pad, int op, bool bias,
                   Activation act) {
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = s;
    p.pad = {pad, pad, pad, pad};
    p.output_padding_h = p.output_padding_w = op;
    p.activation = act;
    std::vector<int> in{x, b.constant(name + ".w", {ci, co, k, k}, weights(ci * co * k * k, 0.4f))};
    if (bias) in.push_back(b.constant(name + ".b", {co}, weights(co, 0.2f)));
    return b.node(name, p, in, name + "_out");
  };
  auto batchnorm = [&](const std::string& name, int x, int64_t c, Activation act) {
    std::vector<float> scale = weights(c, 1.f), mean = weights(c, 0.3f), var = weights(c, 0.4f);
    for (float& v : scale) v += v < 0 ? -0.5f : 0.5f;  // |scale| >= 0.5, both signs
    for (float& v : var) v += 0.6f;
    BatchNormParams p;
    p.activation = act;
    return b.node(name, p, {x, b.constant(name + ".scale", {c}, scale), b.constant(name + ".bias", {c}, weights(c, 0.2f)),
                            b.constant(name + ".mean", {c}, mean), b.constant(name + ".var", {c}, var)}, name + "_out");
  };
  const Activation relu{ActivationKind::Relu, 0.01f, 0.f}, none{};
  int x = tconv("tc1", z, 12, 24, 4, 1, 0, 0, false, none);
  x = batchnorm("bn1", x, 24, relu);
  x = tconv("tc2", x, 24, 16, 4, 2, 1, 0, true, relu);
  x = tconv("tc3", x, 16, 16, 3, 2, 1, 1, false, none);
  x = batchnorm("bn3", x, 16, none);
  x = tconv("tc4", x, 16, 8, 5, 3, 1, 0, false, Activation{ActivationKind::Clip, -1.f, 1.f});
  x = tconv("tc5", x, 8, 8, 3, 1, 1, 0, true, relu);
  x = tconv("out", x, 8, 3, 4, 2, 1, 0, true, Activation{ActivationKind::Tanh, 0.f, 0.f});
  b.output(x);
  return b.finish();
}

TEST_CASE("fuse_quantized_conv2d: transposed convolutions run as int8 stride phases (kernel segregation), as fake quantization does") {
  const Model model = Model::from_bytes(generator_model(), "qgen.fb");
  Tensor calib({64, 12, 1, 1});
  std::mt19937_64 rng(8);
  for (float& v : calib.data) v = std::normal_distribution<float>(0.f, 1.f)(rng);
  Tensor in({2, 12, 1, 1});
  for (float& v : in.data) v = std::normal_distribution<float>(0.f, 1.f)(rng);
  for (DType act : {DType::U8, DType::I8}) {
    CAPTURE(dtype_name(act));
    const Model q = Model::from_bytes(quantized_model(model, calib, act), "q.fb");
    SessionOptions on, off, ref;
    on.backend = off.backend = "cpu";
    ref.backend = "reference";
    off.passes.fuse_quantized_conv2d = false;
    Session fused(q, on), plain(q, off), oracle(q, ref), flt(model, on);
    CHECK(pass_line(fused, "fuse_quantized_conv2d") ==
          "fuse_quantized_conv2d: 5 quantize_linear -> dequantize_linear -> conv2d / dense / conv_transpose2d chains fused into quantized_conv2d");
    std::map<std::string, std::string> ops;
    for (const NodeInfo& n : fused.nodes()) ops[n.name] = n.op;
    CHECK(ops["tc1"] == "quantized_conv2d");  // the 1x1 input: one 1x1 convolution of 24 * 16 channels
    CHECK(ops["tc1:reshape"] == "reshape");
    for (const char* phase : {"tc2:phase0_0", "tc2:phase0_1", "tc2:phase1_0", "tc2:phase1_1", "tc3:phase1_1",
                              "tc4:phase0_0", "tc4:phase1_2", "tc4:phase2_2"})
      CHECK_MESSAGE(ops[phase] == "quantized_conv2d", phase);
    CHECK(ops.count("tc4:phase3_0") == 0);
    CHECK(ops["tc2:concat"] == "concat");
    CHECK(ops["tc4:interleave"] == "depth_to_space");
    CHECK(ops["tc5"] == "quantized_conv2d");  // stride 1: the flipped kernel, one node
    CHECK(ops["out"] == "conv_transpose2d");  // 3 output channels
    int tconvs = 0, qdq = 0;
    for (const auto& [name, op] : ops) {
      tconvs += op == "conv_transpose2d";
      qdq += op == "quantize_linear" || op == "dequantize_linear";
    }
    CHECK(tconvs == 1);
    CHECK(qdq == 2);  // out's pair
    const std::vector<Tensor> got = fused.run({in});
    REQUIRE(got.size() == 1);
    CHECK(got[0].shape == Shape{2, 3, 96, 96});
    const std::vector<float> fake = plain.run({in})[0].data, want = oracle.run({in})[0].data,
                             f32 = flt.run({in})[0].data;
    CHECK(rel_error(got[0].data, fake) <= 1e-5);
    CHECK(rel_error(got[0].data, want) <= 1e-5);
    // quantized: six layers of random weights in 8 bits, 5.9% (u8) and 6.8% (i8) from the float model
    CHECK(rel_error(got[0].data, f32) > 0.0);
    CHECK(rel_error(got[0].data, f32) <= 0.1);
  }
}

TEST_CASE("fuse_quantized_conv2d: random transposed convolutions in int8 phases, as fake quantization does") {
  std::mt19937_64 rng(20261130);
  int fused_count = 0;
  for (int t = 0; t < 48; ++t) {
    ConvTranspose2DParams p;
    const int k = uniform(rng, 1, 5), s = uniform(rng, 1, 3);
    p.stride_h = p.stride_w = s;
    p.pad.top = uniform(rng, 0, k - 1);
    p.pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, k - 1) : p.pad.top;
    p.pad.left = uniform(rng, 0, k - 1);
    p.pad.right = rng() % 3 == 0 ? uniform(rng, 0, k - 1) : p.pad.left;
    p.output_padding_h = uniform(rng, 0, s - 1);
    p.output_padding_w = uniform(rng, 0, s - 1);
    if (t % 8 == 0) p.pad = {}, p.output_padding_h = p.output_padding_w = 0;  // with H = W = 1 below
    p.activation = random_activation(rng);
    const int64_t N = uniform(rng, 1, 3), CI = uniform(rng, 1, 24), CO = uniform(rng, 8, 24);
    int64_t H, W, HO, WO;
    do {  // a generator's first layer one time in eight: a 1x1 input without padding
      H = t % 8 == 0 ? 1 : uniform(rng, 1, 7), W = t % 8 == 0 ? 1 : uniform(rng, 1, 7);
      HO = (H - 1) * s - p.pad.top - p.pad.bottom + k + p.output_padding_h;
      WO = (W - 1) * s - p.pad.left - p.pad.right + k + p.output_padding_w;
    } while (HO < 1 || WO < 1);
    std::mt19937_64 wr(t);
    ModelBuilder b("qtconv");
    const int x = b.input("x", {-1, CI, H, W});
    std::vector<int> inputs{x, b.constant("w", {CI, CO, k, k}, test::uniform_weights(wr, CI * CO * k * k, 0.5f))};
    if (t % 3 != 0) inputs.push_back(b.constant("b", {CO}, test::uniform_weights(wr, CO, 0.2f)));
    b.output(b.node("tc", p, inputs, "y"));
    const Model model = Model::from_bytes(b.finish(), "qtconv.fb");
    Tensor calib({4, CI, H, W}), in({N, CI, H, W});
    for (float& v : calib.data) v = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
    for (float& v : in.data) v = std::uniform_real_distribution<float>(-1.1f, 1.1f)(rng);
    const Model q = Model::from_bytes(quantized_model(model, calib, t % 2 ? DType::I8 : DType::U8), "q.fb");
    SessionOptions on, off, ref;
    on.backend = off.backend = "cpu";
    ref.backend = "reference";
    off.passes.fuse_quantized_conv2d = false;
    Session fused(q, on), plain(q, off), oracle(q, ref);
    const bool one_by_one = H == 1 && W == 1 && p.pad.top + p.pad.left + p.pad.bottom + p.pad.right == 0 &&
                            p.output_padding_h + p.output_padding_w == 0;
    // The geometry splits where every phase (the same size) is a stride-1 convolution: output s*q + r
    // reads inputs q + d for the taps kk with kk = r + pad - s*d, as a window padded by 0 .. taps - 1.
    auto axis_splits = [&](int64_t in, int64_t out, int pad) {
      if (out % s != 0) return false;
      for (int r = 0; r < s; ++r) {
        int lo_d = k, hi_d = -k, taps = 0;
        for (int kk = 0; kk < k; ++kk)
          if ((r + pad - kk) % s == 0) {
            lo_d = std::min(lo_d, (r + pad - kk) / s), hi_d = std::max(hi_d, (r + pad - kk) / s);
            ++taps;
          }
        const int64_t lo = -lo_d, hi = out / s - 1 + hi_d - (in - 1);
        if (taps == 0 || lo < 0 || hi < 0 || lo >= taps || hi >= taps) return false;
      }
      return true;
    };
    const bool splits = one_by_one || (axis_splits(H, HO, p.pad.top) && axis_splits(W, WO, p.pad.left));
    const bool did = pass_line(fused, "fuse_quantized_conv2d").rfind("fuse_quantized_conv2d: 1 ", 0) == 0;
    CAPTURE(t);
    CAPTURE(k);
    CAPTURE(s);
    CAPTURE(H);
    CAPTURE(W);
    CAPTURE(HO);
    CAPTURE(WO);
    CAPTURE(p.pad.top);
    CAPTURE(p.pad.bottom);
    CHECK(did == splits);
    fused_count += did;
    const std::vector<float> got = fused.run({in})[0].data, fake = plain.run({in})[0].data,
                             want = oracle.run({in})[0].data;
    CHECK(rel_error(got, fake) <= 1e-5);
    CHECK(rel_error(got, want) <= 1e-5);
  }
  CHECK(fused_count >= 20);
}

TEST_CASE("quantize_linear / dequantize_linear in NHWC: a per-axis scale follows the layout") {
  std::mt19937_64 rng(51);
  const Shape x{2, 5, 3, 4};
  const std::vector<float> data = random_vector(size_t(shape_numel(x)), 9, -2.f, 2.f);
  for (int axis : {1, 2, 3, -1}) {
    CAPTURE(axis);
    const int a = axis < 0 ? axis + 4 : axis;
    const int64_t dim = x[size_t(a)];
    const std::vector<float> scale = random_vector(size_t(dim), 10 + uint64_t(a), 0.01f, 0.05f);
    std::vector<float> zp(static_cast<size_t>(dim));
    for (float& v : zp) v = float(uniform(rng, 0, 255));
    const std::vector<Shape> in{x, {dim}, {dim}};
    for (bool dequantize : {false, true}) {
      CAPTURE(dequantize);
      const OpParams p = dequantize ? OpParams{DequantizeLinearParams{axis}} : OpParams{QuantizeLinearParams{axis, DType::U8}};
      std::vector<float> src = data;
      if (dequantize)
        for (float& v : src) v = float(uniform(rng, 0, 255));
      NodeDesc nchw = shaped_node(p, in);
      const std::vector<float> want = infer::test::run_cpu_variant("reference", nchw, {src, scale, zp});
      NodeDesc nhwc = nchw;
      nhwc.layout = Layout::NHWC;
      const std::vector<float> got = to_nchw(infer::test::run_cpu_variant("reference", nhwc, {to_nhwc(src, x), scale, zp}), x);
      CHECK(got == want);
    }
  }
}

TEST_CASE("quantize_linear / dequantize_linear direct: the reference's values bit for bit, per tensor") {
  std::mt19937_64 rng(61);
  const KernelVariant* q = KernelRegistry::global().find("cpu", "quantize_linear", "direct");
  const KernelVariant* dq = KernelRegistry::global().find("cpu", "dequantize_linear", "direct");
  REQUIRE(q);
  REQUIRE(dq);
  for (int t = 0; t < 60; ++t) {
    CAPTURE(t);
    const Shape x{uniform(rng, 1, 3), uniform(rng, 1, 37), uniform(rng, 1, 40), uniform(rng, 1, 40)};
    const DType type = t % 2 ? DType::I8 : DType::U8;
    const float scale = std::uniform_real_distribution<float>(0.001f, 0.1f)(rng);
    const std::vector<float> s{scale}, zp{float(type == DType::U8 ? uniform(rng, 0, 255) : uniform(rng, -128, 127))};
    std::vector<float> data = random_vector(size_t(shape_numel(x)), uint64_t(t), -300.f * scale, 300.f * scale);
    for (size_t i = 0; i < data.size(); i += 7) data[i] = (std::floor(data[i] / scale) + 0.5f) * scale;  // near ties
    data[0] = std::nanf("");
    if (data.size() > 2) data[1] = 1e30f, data[2] = -1e30f;
    const Layout layout = t % 3 == 0 ? Layout::NHWC : Layout::NCHW;
    NodeDesc qn = shaped_node(QuantizeLinearParams{1, type}, {x, {1}, {1}});
    qn.layout = layout;
    REQUIRE(variant_applies(*q, qn));
    const std::vector<float> want = infer::test::run_cpu_variant("reference", qn, {data, s, zp});
    const std::vector<float> got = infer::test::run_cpu_variant("direct", qn, {data, s, zp});
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    NodeDesc dn = shaped_node(DequantizeLinearParams{1}, {x, {1}, {1}});
    dn.layout = layout;
    const std::vector<float> dwant = infer::test::run_cpu_variant("reference", dn, {want, s, zp});
    const std::vector<float> dgot = infer::test::run_cpu_variant("direct", dn, {want, s, zp});
    CHECK(std::memcmp(dgot.data(), dwant.data(), dgot.size() * sizeof(float)) == 0);
  }
  // per axis: the reference's
  NodeDesc per_axis = shaped_node(QuantizeLinearParams{1, DType::U8}, {{1, 4, 2, 2}, {4}, {4}});
  CHECK_FALSE(variant_applies(*q, per_axis));
}

// --- 8-bit tensors between quantized convolutions (the quantized_activations pass) -------------------

namespace {

// Runs cpu variant `name` on `c` in `layout` (x the floats of c.inputs[0], or where c.p.x_quantized
// the bytes xq, NCHW) and returns y's bytes in NCHW order: 4 an element (float), or 1 where c.p.y_dtype
// is 8-bit. Twice, the output filled with two different poisons (0xFF: NaN floats, and 0x5A), and
// 64 guard bytes past its end that must stay as they were: every byte written, none past the end.
std::vector<uint8_t> run_raw(Layout layout, const std::string& name, const Case& c, const std::vector<uint8_t>& xq) {
  NodeDesc node = shaped_node(c.p, c.shapes);
  node.layout = layout;
  for (size_t k : {size_t(1), size_t(2), size_t(3)}) node.constants[k] = c.inputs[k].data();
  const KernelVariant* v = KernelRegistry::global().find("cpu", "quantized_conv2d", name);
  REQUIRE_MESSAGE(v != nullptr, "no variant cpu/quantized_conv2d/" << name);
  REQUIRE_MESSAGE(variant_applies(*v, node), name << " does not apply");
  const bool nhwc = layout == Layout::NHWC;
  std::vector<std::vector<float>> in = c.inputs;
  if (c.p.x_quantized) {
    const std::vector<uint8_t> xb = nhwc ? permute_bytes(xq, c.shapes[0], true) : xq;
    in[0].assign(xb.size() / 4 + 1, 0.f);
    std::memcpy(in[0].data(), xb.data(), xb.size());
  } else if (nhwc) {
    in[0] = to_nhwc(in[0], c.shapes[0]);
  }
  if (nhwc && c.p.conv.add_residual) in[4] = to_nhwc(in[4], c.shapes[4]);
  const std::shared_ptr<void> prepared = v->prepare ? v->prepare(node) : nullptr;
  const Shape& ys = node.output_shapes.at(0);
  const size_t n = size_t(shape_numel(ys)), esize = c.p.y_dtype == DType::F32 ? 4 : 1, bytes = n * esize;
  std::vector<uint8_t> first;
  for (uint8_t fill : {uint8_t(0xFF), uint8_t(0x5A)}) {
    std::vector<float> workspace(v->workspace_bytes ? v->workspace_bytes(node) / sizeof(float) + 1 : 0);
    poison(workspace);
    std::vector<float> out((bytes + 64) / 4 + 1);
    auto* ob = reinterpret_cast<uint8_t*>(out.data());
    std::memset(ob, fill, out.size() * 4);
    KernelCall call{node, {}, {out.data()}, workspace.empty() ? nullptr : workspace.data(), prepared.get()};
    for (const auto& x : in) call.inputs.push_back(x.data());
    v->run(call);
    CHECK_MESSAGE(std::all_of(ob + bytes, ob + out.size() * 4, [&](uint8_t b) { return b == fill; }),
                  name << " wrote past its output's " << bytes << " bytes");
    std::vector<uint8_t> got(ob, ob + bytes);
    if (nhwc && esize == 1) {
      got = permute_bytes(got, ys, false);
    } else if (nhwc) {
      std::vector<float> f(n);
      std::memcpy(f.data(), got.data(), bytes);
      f = to_nchw(f, ys);
      std::memcpy(got.data(), f.data(), bytes);
    }
    if (first.empty())
      first = got;
    else
      CHECK_MESSAGE(got == first, name << " left output bytes unwritten (they follow the poison)");
  }
  return first;
}

// The node's float output as the quantized_activations pass would store it: a type and a scale that
// cover its range (half of it one time in four: saturation), a zero point (U8: the range's; I8: near 0).
void quantize_output(Case& c, const std::vector<float>& y, std::mt19937_64& rng, int t) {
  float lo = 0.f, hi = 0.f;
  for (float v : y) lo = std::min(lo, v), hi = std::max(hi, v);
  c.p.y_dtype = t % 2 ? DType::U8 : DType::I8;
  c.p.y_scale = std::max(hi - lo, 1e-3f) / 255.f * (t % 4 == 0 ? 0.5f : 1.f);
  c.p.y_zero_point = c.p.y_dtype == DType::U8 ? std::clamp(int32_t(std::nearbyint(-lo / c.p.y_scale)), 0, 255)
                                              : uniform(rng, -20, 20);
}

std::vector<float> as_floats(const std::vector<uint8_t>& b) {
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

// Each layout a variant runs in, with its name ("reference": NCHW only).
void check_8bit_forms(const std::string& name, const std::vector<Layout>& layouts, bool depthwise, int cases,
                      uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int t = 0; t < cases; ++t) {
    CAPTURE(t);
    Case c = depthwise ? random_dw_case(rng, t) : random_case(rng, t);
    // every other case none / ReLU / a Clip: qgemm's NHWC 8-bit epilogue in registers takes those
    static const int kClamps[] = {0, 1, 5, 13};
    if (t % 2 == 0) c.p.conv.activation = infer::test::activation_case(kClamps[(t / 2) % 4]);
    CAPTURE(shape_str(c.shapes[0]));
    CAPTURE(shape_str(c.shapes[1]));
    const std::vector<uint8_t> xq = quantize_bytes(c.inputs[0], c.p.x_scale, c.p.x_zero_point, c.p.x_dtype);
    for (Layout layout : layouts) {
      CAPTURE(layout == Layout::NHWC);
      Case f = c;
      const std::vector<float> y = as_floats(run_raw(layout, name, f, xq));
      REQUIRE(infer::test::all_finite(y));
      quantize_output(f, y, rng, t);
      const std::vector<uint8_t> want = quantize_bytes(y, f.p.y_scale, f.p.y_zero_point, f.p.y_dtype);
      // float in, 8-bit out: its own float output quantized
      CHECK(run_raw(layout, name, f, xq) == want);
      // 8-bit in (the bytes the float input quantizes to), 8-bit and float out
      f.p.x_quantized = true;
      CHECK(run_raw(layout, name, f, xq) == want);
      f.p.y_dtype = DType::F32;
      const std::vector<uint8_t> yb = run_raw(layout, name, f, xq);
      CHECK(std::memcmp(yb.data(), y.data(), yb.size()) == 0);
    }
  }
}

}  // namespace

TEST_CASE("quantized_conv2d 8-bit x and y: each variant's bytes are its float output quantized, from x's bytes") {
  SUBCASE("reference") { check_8bit_forms("reference", {Layout::NCHW}, false, 30, 101); }
  SUBCASE("reference, depthwise") { check_8bit_forms("reference", {Layout::NCHW}, true, 30, 102); }
  SUBCASE("qgemm") { check_8bit_forms("qgemm", {Layout::NCHW, Layout::NHWC}, false, 90, 103); }
  SUBCASE("depthwise") { check_8bit_forms("depthwise", {Layout::NCHW, Layout::NHWC}, true, 120, 104); }
}

TEST_CASE("quantized_conv2d: the shape rule checks an 8-bit output's fields") {
  QuantizedConv2DParams p;
  const std::vector<Shape> in{{1, 8, 4, 4}, {8, 8, 1, 1}, {8}, {8}};
  CHECK(error_of(p, in).empty());
  p.y_dtype = DType::U8;
  p.y_scale = 0.1f;
  p.y_zero_point = 255;
  CHECK(error_of(p, in).empty());
  p.y_zero_point = 256;
  CHECK(has(error_of(p, in), "field y_zero_point 256 is outside u8's range"));
  p.y_dtype = DType::I8;
  p.y_zero_point = -129;
  CHECK(has(error_of(p, in), "field y_zero_point -129 is outside i8's range"));
  p.y_zero_point = 0;
  p.y_scale = 0.f;
  CHECK(has(error_of(p, in), "field y_scale must be finite and > 0"));
  p.y_scale = 1.f;
  p.y_dtype = DType::I32;
  CHECK(has(error_of(p, in), "field y_dtype is i32 (f32, u8 or i8)"));
}

TEST_CASE("quantized_activations: tensors between quantized convolutions stay 8-bit, outputs bit for bit as without") {
  const Model model = Model::from_bytes(depthwise_model(), "dwnet.fb");
  Tensor calib({6, 3, 17, 15});
  std::mt19937_64 rng(5);
  for (float& v : calib.data) v = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  Tensor in({2, 3, 17, 15});
  for (float& v : in.data) v = std::uniform_real_distribution<float>(-1.1f, 1.1f)(rng);
  const std::map<std::string, Shape> kept{
      {"c1_out", {2, 16, 9, 8}}, {"dw1_out", {2, 16, 9, 8}}, {"pw1_out", {2, 16, 9, 8}}, {"dw2_out", {2, 16, 4, 4}}};
  for (DType act : {DType::U8, DType::I8}) {
    CAPTURE(dtype_name(act));
    const Model q = Model::from_bytes(quantized_model(model, calib, act), "q.fb");
    SessionOptions on, off, nchw, nchw_off;
    on.backend = off.backend = nchw.backend = "cpu";
    on.batch = off.batch = nchw.batch = 2;
    off.passes.quantized_activations = false;
    nchw.passes.channels_last = false;
    nchw_off = nchw;
    nchw_off.passes.quantized_activations = false;
    Session eight(q, on), flt(q, off), planar(q, nchw), planar_flt(q, nchw_off);
    CHECK(pass_line(eight, "quantized_activations") ==
          "quantized_activations: 4 tensors kept in 8 bits between quantized_conv2d nodes");
    CHECK(pass_line(flt, "quantized_activations") == "quantized_activations: off");
    CHECK(pass_line(planar, "quantized_activations") ==
          "quantized_activations: 4 tensors kept in 8 bits between quantized_conv2d nodes");
    // one byte an element in the arena for those four, floats for the rest
    for (const Session* s : {&eight, &planar}) {
      int eight_bit = 0;
      for (const detail::PlannedTensor& t : detail::plan_of(*s).tensors) {
        if (t.workspace) continue;
        const auto at = kept.find(t.name);
        if (at == kept.end()) continue;
        ++eight_bit;
        CHECK(t.bytes == uint64_t(shape_numel(at->second)));
      }
      CHECK(eight_bit == 4);
    }
    const std::vector<float> got = eight.run({in})[0].data, want = flt.run({in})[0].data,
                             nc = planar.run({in})[0].data, nc_want = planar_flt.run({in})[0].data;
    REQUIRE(got.size() == want.size());
    REQUIRE(nc.size() == nc_want.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
    CHECK(std::memcmp(nc.data(), nc_want.data(), nc.size() * 4) == 0);
    CHECK(rel_error(nc, got) <= 1e-5);
    // a value read back stays float (a graph output), its neighbours 8-bit
    SessionOptions keep = on;
    keep.extra_outputs = {"dw1_out"};
    Session read(q, keep);
    CHECK(pass_line(read, "quantized_activations") ==
          "quantized_activations: 3 tensors kept in 8 bits between quantized_conv2d nodes");
    const std::vector<Tensor> r = read.run({in});
    CHECK(std::memcmp(r[0].data.data(), want.data(), want.size() * 4) == 0);
    Session read_flt(q, [&] {
      SessionOptions o = keep;
      o.passes.quantized_activations = false;
      return o;
    }());
    CHECK(r[1].data == read_flt.run({in})[1].data);
    // the quantized_conv2d kernels forced to qgemm: the depthwise layers run float between Q / DQ pairs,
    // so no tensor lies between two quantized_conv2d nodes
    SessionOptions gemm_only = on;
    gemm_only.kernels["quantized_conv2d"] = "qgemm";
    Session before(q, gemm_only);
    CHECK(pass_line(before, "quantized_activations") ==
          "quantized_activations: no tensor between quantized_conv2d nodes");
  }
  // a tensor read as a residual stays float: qnet's c1_out is c2's input and its residual
  const Model qn = Model::from_bytes(float_model(), "qnet.fb");
  Tensor qcal({6, 3, 9, 11});
  for (float& v : qcal.data) v = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  SessionOptions cpu;
  cpu.backend = "cpu";
  Session s(Model::from_bytes(quantized_model(qn, qcal, DType::U8), "q.fb"), cpu);
  CHECK(pass_line(s, "quantized_activations") == "quantized_activations: no tensor between quantized_conv2d nodes");
  // no quantized_conv2d, no line
  Session plain(model, cpu);
  CHECK(pass_line(plain, "quantized_activations").empty());
}

// --- an add reading QDQ pairs (fuse_quantized_add: ONNX Runtime's QDQ residual adds) -----------------

namespace {

// Runs cpu variant `name` of add on a and b (equal shapes), output poisoned.
std::vector<float> run_add(const std::string& name, const AddParams& p, const Shape& s, const std::vector<float>& a,
                           const std::vector<float>& b) {
  return infer::test::run_cpu_variant(name, shaped_node(p, {s, s}), {a, b});
}

// x through quantize_linear then dequantize_linear, by the cpu "direct" kernels (the unfused nodes).
std::vector<float> qdq_nodes(const std::vector<float>& x, const Shape& s, const AddInputQDQ& q) {
  if (!q.on) return x;
  QuantizeLinearParams qp;
  qp.dtype = q.dtype;
  DequantizeLinearParams dp;
  const std::vector<float> scale{q.scale}, zero{float(q.zero_point)};
  const std::vector<float> qx =
      infer::test::run_cpu_variant("direct", shaped_node(qp, {s, {1}, {1}}), {x, scale, zero});
  return infer::test::run_cpu_variant("direct", shaped_node(dp, {s, {1}, {1}}), {qx, scale, zero});
}

}  // namespace

TEST_CASE("add.qdq: the add of its inputs' QDQ pairs, bit for bit the cpu quantize / dequantize / add kernels") {
  std::mt19937_64 rng(61);
  const KernelVariant* direct = KernelRegistry::global().find("cpu", "add", "direct");
  const KernelVariant* qdq = KernelRegistry::global().find("cpu", "add", "qdq");
  REQUIRE(direct);
  REQUIRE(qdq);
  for (int t = 0; t < 60; ++t) {
    CAPTURE(t);
    const Shape s{uniform(rng, 1, 2), uniform(rng, 1, 37), uniform(rng, 1, 9), uniform(rng, 1, 11)};
    AddParams p;
    p.activation = t % 3 == 0 ? Activation{} : t % 3 == 1 ? Activation{ActivationKind::Relu, 0.01f, 0.f}
                                                           : random_activation(rng);
    for (int k = 0; k < 2; ++k) {
      AddInputQDQ& q = p.input_qdq[k];
      q.on = t % 4 != k;  // both, or one of the two
      q.dtype = (t + k) % 2 ? DType::I8 : DType::U8;
      q.zero_point = q.dtype == DType::U8 ? uniform(rng, 0, 255) : uniform(rng, -128, 127);
      q.scale = t % 5 == 0 ? 0.015625f : std::uniform_real_distribution<float>(0.004f, 0.05f)(rng);
    }
    std::vector<float> a = random_vector(size_t(shape_numel(s)), rng(), -3.f, 3.f);
    std::vector<float> b = random_vector(size_t(shape_numel(s)), rng(), -3.f, 3.f);
    for (size_t i = 0; i < a.size(); i += 7) a[i] = (float(uniform(rng, -200, 200)) + 0.5f) * p.input_qdq[0].scale;  // ties
    if (t % 6 == 5) a[0] = std::nanf(""), b[b.size() - 1] = INFINITY;
    NodeDesc node = shaped_node(p, {s, s});
    CHECK(variant_applies(*qdq, node));
    CHECK_FALSE(variant_applies(*direct, node));
    AddParams plain;
    plain.activation = p.activation;
    const std::vector<float> want =
        run_add("direct", plain, s, qdq_nodes(a, s, p.input_qdq[0]), qdq_nodes(b, s, p.input_qdq[1]));
    const std::vector<float> got = run_add("qdq", p, s, a, b);
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
    if (t % 6 != 5) {  // (an unquantized infinite input makes the relative error undefined)
      const std::vector<float> ref = run_add("reference", p, s, a, b);
      CHECK(rel_error(got, ref) <= 1e-6);
    }
  }
}

TEST_CASE("fuse_quantized_add: an add reads its inputs' QDQ pairs itself, outputs bit for bit as without") {
  // a -> Q/DQ -> add(relu) <- Q/DQ <- b; b's pair also read by a pool (it stays for that reader)
  ModelBuilder mb("qadd");
  const int a = mb.input("a", {-1, 8, 6, 7}), b = mb.input("b", {-1, 8, 6, 7});
  const auto pair = [&](int x, const std::string& n, float scale, float zero, DType dt) {
    QuantizeLinearParams qp;
    qp.dtype = dt;
    const int s = mb.constant(n + ".scale", {1}, {scale}), z = mb.constant(n + ".zero", {1}, {zero}, dt);
    const int q = mb.node(n + "_q", qp, {x, s, z});
    return mb.node(n + "_dq", DequantizeLinearParams{}, {q, s, z});
  };
  const int da = pair(a, "a", 0.02f, 128.f, DType::U8), db = pair(b, "b", 0.03f, -3.f, DType::I8);
  AddParams ap;
  ap.activation = Activation{ActivationKind::Relu, 0.01f, 0.f};
  mb.output(mb.node("add", ap, {da, db}, "sum"));
  Pool2DParams pool;
  pool.kind = PoolKind::Max;
  pool.kernel_h = pool.kernel_w = pool.stride_h = pool.stride_w = 2;
  mb.output(mb.node("pool", pool, {db}, "pooled"));
  const Model m = Model::from_bytes(mb.finish(), "qadd.fb");
  Tensor ta({2, 8, 6, 7}), tb({2, 8, 6, 7});
  std::mt19937_64 rng(7);
  for (float& v : ta.data) v = std::uniform_real_distribution<float>(-3.f, 3.f)(rng);
  for (float& v : tb.data) v = std::uniform_real_distribution<float>(-3.f, 3.f)(rng);
  SessionOptions on, off;
  on.backend = off.backend = "cpu";
  off.passes.fuse_quantized_add = false;
  Session fused(m, on), plain(m, off);
  CHECK(pass_line(fused, "fuse_quantized_add") ==
        "fuse_quantized_add: 1 add node read through their quantize_linear -> dequantize_linear pairs");
  CHECK(pass_line(plain, "fuse_quantized_add") == "fuse_quantized_add: off");
  int qdq_nodes = 0;
  for (const NodeInfo& n : fused.nodes()) {
    qdq_nodes += n.op == "quantize_linear" || n.op == "dequantize_linear";
    if (n.op == "add") {
      CHECK(n.variant == "qdq");
      CHECK(n.fused == std::vector<std::string>{"a_q", "a_dq", "b_q", "b_dq"});
    }
  }
  CHECK(qdq_nodes == 2);  // b's pair, for the pool
  const std::vector<Tensor> got = fused.run({ta, tb}), want = plain.run({ta, tb});
  for (size_t k = 0; k < 2; ++k) CHECK(std::memcmp(got[k].data.data(), want[k].data.data(), got[k].data.size() * 4) == 0);
  // no quantize_linear in a model: no line
  SessionOptions cpu;
  cpu.backend = "cpu";
  Session f32(Model::from_bytes(float_model(), "qnet.fb"), cpu);
  CHECK(pass_line(f32, "fuse_quantized_add").empty());
  // the field has no file form
  ModelBuilder bad("bad");
  const int x = bad.input("x", {1, 2, 2, 2});
  AddParams internal;
  internal.input_qdq[0].on = true;
  CHECK_THROWS_WITH_AS((bad.output(bad.node("add", internal, {x, x})), bad.finish()), Contains("no file form"), Error);
}
