// depthwise_pointwise: engine-internal (the fuse_depthwise_pointwise pass, cpu; no file form). A depthwise
// conv2d (weight [C,1,KH,KW], groups == C) and the 1x1 stride-1 conv2d that is its only reader, as one
// node: x, dw_weight, dw_bias, pw_weight [C_out,C,1,1], pw_bias [C_out], and the residual where
// pointwise.add_residual. The depthwise part is checked by conv2d's own rule (prefix "depthwise.");
// the pointwise part here. Cost: the two convolutions' multiply-adds (2 FLOPs each).
#include "engine/ops/conv2d.h"

namespace infer::detail {

namespace {

constexpr const char* kRoles[] = {nullptr, "dw_weight", "dw_bias", "pw_weight", "pw_bias", "residual"};

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<DepthwisePointwiseParams>(params);
  const Conv2DParams& pw = p.pointwise;
  in.expect_count(pw.add_residual ? 6 : 5, pw.add_residual ? 6 : 5);
  // the depthwise: conv2d's rule on inputs 0-2 (its prefix rules out a residual and a PRelu)
  const std::vector<Shape> dw_shapes{in[0], in[1], in[2]};
  const Inputs dw_in(where, dw_shapes, kRoles, 3);
  const Shape mid = conv2d_shape(where, "depthwise.", p.depthwise, dw_in, true);
  const int64_t C = in[0][1];
  if (p.depthwise.groups != C || in[1][0] != C)
    fail(where, "field depthwise.groups is " + std::to_string(p.depthwise.groups) + " and " + in.label(1) +
                    " has shape " + shape_str(in[1]) + " but a depthwise convolution has groups == C_out == C = " +
                    std::to_string(C));
  // the pointwise: 1x1, stride 1, no padding, dilation 1, groups 1, on the depthwise's output
  if (pw.stride_h != 1 || pw.stride_w != 1 || pw.pad.top || pw.pad.left || pw.pad.bottom || pw.pad.right ||
      pw.dilation_h != 1 || pw.dilation_w != 1 || pw.groups != 1)
    fail(where, "the pointwise convolution must have stride 1, no padding, dilation 1 and groups 1");
  check_activation(where, "pointwise.activation", pw.activation);
  const Shape& w = in.with_rank(3, 4, "[C_out,C,1,1]");
  if (w[1] != C || w[2] != 1 || w[3] != 1 || w[0] < 1)
    fail(where, in.label(3) + " has shape " + shape_str(w) + " but must be [C_out," + std::to_string(C) + ",1,1]");
  in.expect_vector(4, w[0], "C_out");
  const Shape out{mid[0], w[0], mid[2], mid[3]};
  if (pw.add_residual && in[5] != out)
    fail(where, in.label(5) + " has shape " + shape_str(in[5]) + " but the output is " + shape_str(out));
  return {out};
}

double flops(const NodeDesc& node) {
  const Shape& y = output_shape(node);
  const Shape& dw = input_shape(node, 1);  // [C, 1, KH, KW]
  const Shape& pw = input_shape(node, 3);  // [C_out, C, 1, 1]
  const double pixels = dim_f(y, 0) * dim_f(y, 2) * dim_f(y, 3);
  return 2.0 * pixels * (dim_f(dw, 0) * dim_f(dw, 2) * dim_f(dw, 3) + dim_f(pw, 0) * dim_f(pw, 1));
}

Activation activation(const OpParams& params) {
  return std::get<DepthwisePointwiseParams>(params).pointwise.activation;
}

}  // namespace

constinit const OpDef depthwise_pointwise_op{
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "dw_weight", "dw_bias", "pw_weight", "pw_bias", "residual"},
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .reference = ref::run_depthwise_pointwise,
};

}  // namespace infer::detail
