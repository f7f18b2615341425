// Reference quantize_linear / dequantize_linear in NCHW (any rank): one loop over the elements, the
// channel of element i along `axis` is (i / inner) % dim(axis) for a per-axis scale. The arithmetic is
// ONNX Runtime's (MLAS) in float32: quantize divides x / scale, rounds half to even (nearbyint in the
// default rounding mode), adds the zero point and saturates (NaN gives the low end); dequantize is
// float(x - zp) * scale (ORT's float(int32(x) - int32(zp)) * scale). Integers travel as float values
// (exact). One thread; may run in place. Either layout: a 4-D NHWC tensor's per-axis channel is found
// in its memory order (the channels_last pass keeps a quantized model's mobile blocks NHWC).

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"

namespace infer::ref {

namespace {

struct AxisWalk {
  int64_t n = 0, inner = 1, dim = 1;
  bool per_axis = false;
  int64_t channel(int64_t i) const { return per_axis ? (i / inner) % dim : 0; }
};

AxisWalk walk(const KernelCall& c, int axis, const char* op) {
  const Shape& s = c.node.input_shapes[0];
  detail::check_dims(op, "input", s);
  AxisWalk w;
  w.n = shape_numel(s);
  w.per_axis = shape_numel(c.node.input_shapes[1]) != 1;
  if (w.per_axis) {
    const int a = resolved_axis(axis, s);
    w.dim = s[static_cast<size_t>(a)];
    if (c.node.layout == Layout::NHWC && s.size() == 4) {  // memory order N, H, W, C
      static constexpr size_t kPos[4] = {0, 3, 1, 2};       // an NCHW axis's place in it
      const Shape mem{s[0], s[2], s[3], s[1]};
      for (size_t d = kPos[a] + 1; d < 4; ++d) w.inner *= mem[d];
    } else {
      for (size_t d = static_cast<size_t>(a) + 1; d < s.size(); ++d) w.inner *= s[d];
    }
  }
  return w;
}

}  // namespace

// The reference variants (ref::run_<op>, engine/ops/op_def.h); registered from the op table by register.cc.
void run_quantize_linear(const KernelCall& c) {
  const auto& p = std::get<QuantizeLinearParams>(c.node.params);
  const AxisWalk w = walk(c, p.axis, "quantize_linear");
  const float* x = c.inputs[0];
  const float* scale = c.inputs[1];
  const float* zp = detail::optional_input(c, 2);
  float* y = c.outputs[0];
  for (int64_t i = 0; i < w.n; ++i) {
    const int64_t ch = w.channel(i);
    y[i] = detail::quantize_value(x[i], scale[ch], zp ? zp[ch] : 0.f, p.dtype);
  }
}

void run_dequantize_linear(const KernelCall& c) {
  const auto& p = std::get<DequantizeLinearParams>(c.node.params);
  const AxisWalk w = walk(c, p.axis, "dequantize_linear");
  const float* x = c.inputs[0];
  const float* scale = c.inputs[1];
  const float* zp = detail::optional_input(c, 2);
  float* y = c.outputs[0];
  for (int64_t i = 0; i < w.n; ++i) {
    const int64_t ch = w.channel(i);
    // x and zp hold integers: their difference in double is exact, as int32 q - zp is in ORT.
    const double z = zp ? double(zp[ch]) : 0.0;
    y[i] = static_cast<float>(double(x[i]) - z) * scale[ch];
  }
}

}  // namespace infer::ref
