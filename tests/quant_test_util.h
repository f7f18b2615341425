// What the quantization tests share (test_quantized_conv.cc, test_cuda_quantized.cc): a float model
// quantized the way `infer quantize` does it (apps/common/quantizer.h: its plan and rewrite), with
// min-max ranges observed on the cpu over a calibration batch; the random quantized-convolution
// geometry and input the kernel tests draw; bytes between NCHW and NHWC.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "infer/infer.h"
#include "quantizer.h"
#include "test_util.h"

namespace infer::test {

inline std::vector<uint8_t> quantized_model(const Model& model, const Tensor& calib, DType act) {
  quant::Options o;
  o.activation = act;
  const quant::Plan plan = quant::plan(model, o);
  SessionOptions so;
  so.backend = "cpu";
  for (const std::string& v : plan.activations)
    if (v != "image") so.extra_outputs.push_back(v);
  Session fs(model, so);
  const std::vector<Tensor> outs = fs.run({calib});
  std::map<std::string, std::pair<float, float>> ranges;
  for (const std::string& v : plan.activations) {
    quant::Observer ob;
    const auto at = std::find(so.extra_outputs.begin(), so.extra_outputs.end(), v);
    const Tensor& t = v == "image" ? calib : outs.at(1 + size_t(at - so.extra_outputs.begin()));
    ob.add(t.data.data(), t.numel());
    ranges[v] = ob.range(quant::Method::MinMax, 0);
  }
  return quant::rewrite(model, plan, ranges, o, "test", {});
}


// n weights uniform in [-r, r] from rng, one draw each: the test models' constants.
inline std::vector<float> uniform_weights(std::mt19937_64& rng, int64_t n, float r) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = std::uniform_real_distribution<float>(-r, r)(rng);
  return v;
}

// A random convolution geometry of the quantized-conv tests: kernel 1-5 (KH != KW one time in four),
// strides 1-3, dilation 2 one time in `dilate` per axis, padding 0 .. extent - 1 per side (asymmetric
// one time in three), a bounded activation. The kernel and its dilated extent.
struct QConvGeometry {
  int kh = 1, kw = 1, ekh = 1, ekw = 1;
};
inline QConvGeometry random_qconv_geometry(std::mt19937_64& rng, Conv2DParams& p, int dilate) {
  QConvGeometry g;
  g.kh = uniform(rng, 1, 5);
  g.kw = rng() % 4 == 0 ? uniform(rng, 1, 5) : g.kh;
  p.stride_h = uniform(rng, 1, 3);
  p.stride_w = rng() % 4 == 0 ? uniform(rng, 1, 3) : p.stride_h;
  p.dilation_h = rng() % dilate == 0 ? 2 : 1;
  p.dilation_w = rng() % dilate == 0 ? 2 : p.dilation_h;
  g.ekh = p.dilation_h * (g.kh - 1) + 1, g.ekw = p.dilation_w * (g.kw - 1) + 1;
  p.pad.top = uniform(rng, 0, g.ekh - 1);
  p.pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, g.ekh - 1) : p.pad.top;
  p.pad.left = uniform(rng, 0, g.ekw - 1);
  p.pad.right = rng() % 3 == 0 ? uniform(rng, 0, g.ekw - 1) : p.pad.left;
  p.activation = random_activation(rng);
  return g;
}

// x's quantization for case t: u8 (even t) or i8 (odd), any zero point (0 one time in seven: symmetric
// i8, or a ReLU's range in u8), a scale in [0.004, 0.03].
inline void random_x_quantization(std::mt19937_64& rng, QuantizedConv2DParams& q, int t) {
  q.x_dtype = t % 2 ? DType::I8 : DType::U8;
  q.x_zero_point = q.x_dtype == DType::U8 ? uniform(rng, 0, 255) : uniform(rng, -128, 127);
  if (t % 7 == 3) q.x_zero_point = 0;
  q.x_scale = std::uniform_real_distribution<float>(0.004f, 0.03f)(rng);
}

// n values of x for that quantization: beyond its range one time in four (saturation), else mostly inside.
inline std::vector<float> random_x_values(const QuantizedConv2DParams& q, int t, size_t n, uint64_t seed) {
  const float lo_q = (q.x_dtype == DType::U8 ? 0.f : -128.f) - float(q.x_zero_point);
  const float hi_q = (q.x_dtype == DType::U8 ? 255.f : 127.f) - float(q.x_zero_point);
  const float widen = t % 4 == 0 ? 1.3f : 0.9f;
  return random_vector(n, seed, lo_q * q.x_scale * widen - 0.05f, hi_q * q.x_scale * widen + 0.05f);
}

// quantize_linear of each value as its type's byte (U8: q; I8: q's two's complement), the reference's
// arithmetic: nearbyint(x / scale) + zero, saturated, NaN to the low end.
inline std::vector<uint8_t> quantize_bytes(const std::vector<float>& x, float scale, int32_t zero, DType type) {
  const float lo = type == DType::I8 ? -128.f : 0.f, hi = type == DType::I8 ? 127.f : 255.f;
  std::vector<uint8_t> q(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = std::nearbyint(x[i] / scale) + float(zero);
    q[i] = static_cast<uint8_t>(static_cast<int32_t>(std::isnan(v) ? lo : std::clamp(v, lo, hi)));
  }
  return q;
}

// One byte an element between NCHW and NHWC (shape s, NCHW-ordered; bytes are exact as floats).
inline std::vector<uint8_t> permute_bytes(const std::vector<uint8_t>& b, const Shape& s, bool to_channels_last) {
  const std::vector<float> f(b.begin(), b.end());
  const std::vector<float> p = to_channels_last ? to_nhwc(f, s) : to_nchw(f, s);
  return std::vector<uint8_t>(p.begin(), p.end());
}

}  // namespace infer::test
