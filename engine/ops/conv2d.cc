// conv2d: 2-D convolution. x [N,C_in,H,W], weight [C_out,C_in/groups,KH,KW], optional bias [C_out]; any
// stride, asymmetric padding (< the dilated kernel), dilation and groups; a fused activation; and the
// engine-internal residual input of the fuse_conv_residual pass or per-channel PRelu epilogue of the
// fuse_prelu pass (slope as input 3; no file form for either). Cost: N*C_out*H_out*
// W_out*(C_in/groups)*KH*KW multiply-adds (2 FLOPs each); the bias and epilogue are not counted.
#include "engine/ops/conv2d.h"

namespace infer::detail {

namespace {

void dilation_one(const std::string& where, const std::string& field, int v) {
  if (v != 1)
    fail(where, "field " + field + " must be 1 (dilation " + std::to_string(v) + " is not supported)");
}

OpParams read(const fb::Node& node, const std::string& where) {
  return read_conv(node.options_as_Conv2D(), where, "");
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  return {fb::Op::Conv2D, write_conv(fbb, std::get<Conv2DParams>(params)).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  return {conv2d_shape(where, "", std::get<Conv2DParams>(params), in, true)};
}

double flops(const NodeDesc& node) {
  const Shape& y = output_shape(node);
  return conv_flops(node, dim_f(y, 2), dim_f(y, 3));
}

Activation activation(const OpParams& params) { return std::get<Conv2DParams>(params).activation; }

}  // namespace

Conv2DParams read_conv(const fb::Conv2D* c, const std::string& where, const std::string& prefix) {
  Conv2DParams p;
  if (!c) return p;
  p.stride_h = c->stride_h();
  p.stride_w = c->stride_w();
  p.pad = read_padding(c->padding());
  p.dilation_h = c->dilation_h();
  p.dilation_w = c->dilation_w();
  p.activation = read_activation(c->activation(), c->activation_alpha(), c->activation_beta(), where,
                                 prefix + "activation");
  p.groups = c->groups();
  return p;
}

flatbuffers::Offset<fb::Conv2D> write_conv(flatbuffers::FlatBufferBuilder& fbb, const Conv2DParams& p) {
  if (p.add_residual)
    throw Error("conv2d add_residual is engine-internal (the fuse_conv_residual pass) and has no file form");
  if (p.input_epilogue)
    throw Error("conv2d input_epilogue is engine-internal (the fuse_input_epilogue pass) and has no file form");
  const fb::Padding pad = fb_padding(p.pad);
  return fb::CreateConv2D(fbb, p.stride_h, p.stride_w, &pad, p.dilation_h, p.dilation_w,
                          fb_kind(p.activation.kind), p.activation.alpha, p.activation.beta, p.groups);
}

Shape conv2d_shape(const std::string& where, const std::string& prefix, const Conv2DParams& p,
                   const Inputs& in, bool grouped) {
  // conv_pool2d (prefix "conv.") has neither engine-internal form; conv2d has either, not both
  if (!prefix.empty() && (p.add_residual || p.activation.kind == ActivationKind::PRelu))
    fail(where, "field " + prefix + (p.add_residual ? "add_residual" : "activation prelu") +
                    " is only for conv2d");
  if (p.add_residual && p.activation.kind == ActivationKind::PRelu)
    fail(where, "add_residual and a prelu activation do not combine (both take input 3)");
  if (p.input_epilogue) {
    if (!prefix.empty()) fail(where, "field " + prefix + "input_epilogue is only for conv2d");
    if (p.add_residual || p.activation.kind == ActivationKind::PRelu)
      fail(where, "input_epilogue combines with neither add_residual nor a prelu activation (input 3)");
    if (p.input_activation.kind == ActivationKind::PRelu) fail(where, "field input_activation may not be prelu");
    check_activation(where, "input_activation", p.input_activation, false);
  }
  bool prelu = false;
  if (p.add_residual || p.input_epilogue) {
    in.expect_count(4, 4);  // x, weight, bias, residual or the input epilogue's bias
  } else {
    prelu = expect_epilogue_inputs(in, p.activation);  // x, weight, bias, slope with a prelu
  }
  const Shape& x = in.with_rank(0, 4, "[N,C_in,H,W]");
  const Shape& w = in.with_rank(1, 4, "[C_out,C_in/groups,KH,KW]");
  positive(where, prefix + "stride_h", p.stride_h);
  positive(where, prefix + "stride_w", p.stride_w);
  if (grouped) {
    positive(where, prefix + "dilation_h", p.dilation_h);
    positive(where, prefix + "dilation_w", p.dilation_w);
    positive(where, prefix + "groups", p.groups);
  } else {
    dilation_one(where, prefix + "dilation_h", p.dilation_h);
    dilation_one(where, prefix + "dilation_w", p.dilation_w);
    if (p.groups != 1)
      fail(where, "field " + prefix + "groups must be 1 (got " + std::to_string(p.groups) + ")");
  }
  check_activation(where, prefix + "activation", p.activation, prefix.empty());
  // w[2], w[3] <= 2^40 and dilation is int: no overflow.
  const int64_t kh = static_cast<int64_t>(p.dilation_h) * (w[2] - 1) + 1;
  const int64_t kw = static_cast<int64_t>(p.dilation_w) * (w[3] - 1) + 1;
  check_padding(where, prefix, p.pad, kh, kw, true);
  const int64_t g = p.groups;
  if (x[1] % g != 0 || w[0] % g != 0)
    fail(where, "field " + prefix + "groups " + std::to_string(g) + " must divide input channels " +
                    std::to_string(x[1]) + " and output channels " + std::to_string(w[0]));
  if (w[1] * g != x[1])
    fail(where, in.label(1) + " has " + std::to_string(w[1]) + " input channels" +
                    (g > 1 ? " per group" : "") + " but input 0 has " + std::to_string(x[1]) +
                    (g > 1 ? " in " + std::to_string(g) + " groups" : std::string()));
  if (in.size() >= 3) in.expect_vector(2, w[0], "C_out");
  if (prelu) expect_prelu_slope(in, w[0]);
  const int64_t h = window_out(where, "height", x[2], p.pad.top, p.pad.bottom, kh, p.stride_h);
  const int64_t wd = window_out(where, "width", x[3], p.pad.left, p.pad.right, kw, p.stride_w);
  const Shape out{x[0], w[0], h, wd};
  if (p.input_epilogue) in.expect_vector(3, x[1], "C_in");
  if (p.add_residual && in[3] != out)
    fail(where, in.label(3) + " (residual) has shape " + shape_str(in[3]) + " but the output is " +
                    shape_str(out));
  return out;
}

double conv_flops(const NodeDesc& node, double out_h, double out_w) {
  const Shape& x = input_shape(node, 0);
  const Shape& w = input_shape(node, 1);
  // weight [C_out, C_in/groups, KH, KW]: dim 1 is already the per-group input channel count.
  return 2.0 * dim_f(x, 0) * dim_f(w, 0) * out_h * out_w * dim_f(w, 1) * dim_f(w, 2) * dim_f(w, 3);
}

constinit const OpDef conv2d_op{
    .read = read,
    .write = write,
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "weight", "bias"},
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .prelu_epilogue = true,
    .reference = ref::run_conv2d,
};

}  // namespace infer::detail
