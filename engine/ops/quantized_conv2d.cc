// quantized_conv2d: engine-internal (the fuse_quantized_conv2d pass, cpu; no file form). A QDQ model's
// conv2d run in integers: x (float), weight_q [C_out,C_in/groups,KH,KW] (int8 values), weight_scale
// [C_out] or [1], bias [C_out], and the residual where conv.add_residual; x and y 8-bit where
// x_quantized / y_dtype say so (the quantized_activations pass). The geometry is checked by conv2d's
// own rule; here the quantization fields (the kernels check the weight's values when prepared).
// Cost: conv2d's multiply-adds (2 FLOPs each).
#include <cmath>

#include "engine/ops/conv2d.h"

namespace infer::detail {

namespace {

constexpr const char* kConvRoles[] = {nullptr, "weight_q", "bias", "residual"};

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<QuantizedConv2DParams>(params);
  in.expect_count(p.conv.add_residual ? 5 : 4, p.conv.add_residual ? 5 : 4);
  if (p.conv.activation.kind == ActivationKind::PRelu)
    fail(where, "field conv.activation prelu is not taken (no per-channel PRelu epilogue)");
  if (!std::isfinite(p.x_scale) || !(p.x_scale > 0.f))
    fail(where, "field x_scale must be finite and > 0");
  if (p.x_dtype != DType::U8 && p.x_dtype != DType::I8)
    fail(where, std::string("field x_dtype is ") + dtype_name(p.x_dtype) + " (u8 or i8)");
  const int32_t lo = p.x_dtype == DType::U8 ? 0 : -128, hi = p.x_dtype == DType::U8 ? 255 : 127;
  if (p.x_zero_point < lo || p.x_zero_point > hi)
    fail(where, "field x_zero_point " + std::to_string(p.x_zero_point) + " is outside " +
                    dtype_name(p.x_dtype) + "'s range");
  if (p.y_dtype != DType::F32) {  // a quantized output (the quantized_activations pass)
    if (p.y_dtype != DType::U8 && p.y_dtype != DType::I8)
      fail(where, std::string("field y_dtype is ") + dtype_name(p.y_dtype) + " (f32, u8 or i8)");
    if (!std::isfinite(p.y_scale) || !(p.y_scale > 0.f)) fail(where, "field y_scale must be finite and > 0");
    const int32_t ylo = p.y_dtype == DType::U8 ? 0 : -128, yhi = p.y_dtype == DType::U8 ? 255 : 127;
    if (p.y_zero_point < ylo || p.y_zero_point > yhi)
      fail(where, "field y_zero_point " + std::to_string(p.y_zero_point) + " is outside " +
                      dtype_name(p.y_dtype) + "'s range");
  }
  // conv2d's rule on x, weight_q, bias (+ residual)
  std::vector<Shape> conv_shapes{in[0], in[1], in[3]};
  if (p.conv.add_residual) conv_shapes.push_back(in[4]);
  const Inputs conv_in(where, conv_shapes, kConvRoles, std::size(kConvRoles));
  const Shape y = conv2d_shape(where, "", p.conv, conv_in, true);
  const Shape& s = in[2];
  if (s.size() != 1 || (s[0] != 1 && s[0] != in[1][0]))
    fail(where, in.label(2) + " has shape " + shape_str(s) + " but must be [1] or [" + std::to_string(in[1][0]) +
                    "] (C_out)");
  return {y};
}

double flops(const NodeDesc& node) {
  const Shape& y = output_shape(node);
  return conv_flops(node, dim_f(y, 2), dim_f(y, 3));
}

Activation activation(const OpParams& params) { return std::get<QuantizedConv2DParams>(params).conv.activation; }

}  // namespace

constinit const OpDef quantized_conv2d_op{
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "weight_q", "weight_scale", "bias", "residual"},
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .reference = ref::run_quantized_conv2d,
};

}  // namespace infer::detail
