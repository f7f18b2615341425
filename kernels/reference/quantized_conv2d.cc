// Reference quantized_conv2d (the engine-internal node of the fuse_quantized_conv2d pass), NCHW: the
// input quantized as quantize_linear does it (x / x_scale rounded half to even, plus the zero point,
// saturated), the zero point taken off, the reference conv2d over those integers and the int8 weight
// (double accumulation of integers: exact), then per output channel float(acc) * (x_scale *
// weight_scale[k]) + bias[k] (+ residual) and the activation. An 8-bit x (x_quantized) is read as its
// integers, an 8-bit y written as quantize_linear of that float. The oracle may allocate.
#include <vector>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

// x, weight_q, weight_scale, bias (+ residual where conv.add_residual)
void run_quantized_conv2d(const KernelCall& c) {
  const auto& p = std::get<QuantizedConv2DParams>(c.node.params);
  const auto& s = c.node.input_shapes;
  const Shape& y_shape = c.node.output_shapes[0];
  detail::check_shape("quantized_conv2d", "input", s[0], 4);
  const float zp = static_cast<float>(p.x_zero_point);
  const int64_t nx = shape_numel(s[0]);
  std::vector<float> xq(static_cast<size_t>(nx));
  if (p.x_quantized) {  // the bytes a quantized producer wrote
    const auto* x8 = reinterpret_cast<const uint8_t*>(c.inputs[0]);
    for (int64_t i = 0; i < nx; ++i)
      xq[static_cast<size_t>(i)] = (p.x_dtype == DType::I8 ? float(int8_t(x8[i])) : float(x8[i])) - zp;
  } else {
    for (int64_t i = 0; i < nx; ++i)
      xq[static_cast<size_t>(i)] = detail::quantize_value(c.inputs[0][i], p.x_scale, zp, p.x_dtype) - zp;
  }
  Conv2DParams plain = p.conv;  // the integer sums only: no bias, residual or activation
  plain.activation = Activation{};
  plain.add_residual = false;
  const int64_t ny = shape_numel(y_shape);
  std::vector<float> acc(static_cast<size_t>(ny));
  conv2d(plain, xq.data(), s[0], c.inputs[1], s[1], nullptr, acc.data(), y_shape);
  const int64_t K = y_shape[1], plane = y_shape[2] * y_shape[3];
  const bool per_channel = s[2][0] != 1;
  const float* residual = p.conv.add_residual ? c.inputs[4] : nullptr;
  for (int64_t i = 0; i < ny; ++i) {
    const int64_t k = (i / plane) % K;
    const float m = p.x_scale * c.inputs[2][per_channel ? k : 0];
    double v = static_cast<double>(acc[static_cast<size_t>(i)] * m) + c.inputs[3][k];
    if (residual) v += residual[i];
    const float y = static_cast<float>(detail::activate(p.conv.activation, v));
    if (p.y_dtype == DType::F32) {
      c.outputs[0][i] = y;
    } else {  // quantize_linear of the float result, one byte each
      const float q = detail::quantize_value(y, p.y_scale, float(p.y_zero_point), p.y_dtype);
      reinterpret_cast<uint8_t*>(c.outputs[0])[i] = static_cast<uint8_t>(static_cast<int32_t>(q));
    }
  }
}

}  // namespace infer::ref
