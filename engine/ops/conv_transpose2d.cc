// conv_transpose2d: transposed 2-D convolution. x [N,C_in,H,W], weight [C_in,C_out/groups,KH,KW] (ONNX /
// PyTorch), optional bias [C_out] (the engine-internal per-channel PRelu epilogue's slope [C_out] as
// input 3); H_out = (H-1)*stride - pads + dilation*(KH-1) + 1 + output_padding with output_padding <
// max(stride, dilation) (PyTorch's rule). Cost: the direct (scatter) form,
// H_in*W_in*C_in*(C_out/groups)*KH*KW multiply-adds per sample whatever the kernel does (dilation
// changes where taps land, not how many; the segregated kernels do less work and their GFLOP/s shows it).
#include <algorithm>

#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::ConvTranspose2D* t = node.options_as_ConvTranspose2D();
  ConvTranspose2DParams p;
  p.stride_h = t->stride_h();
  p.stride_w = t->stride_w();
  p.pad = read_padding(t->padding());
  p.output_padding_h = t->output_padding_h();
  p.output_padding_w = t->output_padding_w();
  p.dilation_h = t->dilation_h();
  p.dilation_w = t->dilation_w();
  p.activation =
      read_activation(t->activation(), t->activation_alpha(), t->activation_beta(), where, "activation");
  p.groups = t->groups();  // absent in older files: 1
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<ConvTranspose2DParams>(params);
  const fb::Padding pad = fb_padding(p.pad);
  return {fb::Op::ConvTranspose2D,
          fb::CreateConvTranspose2D(fbb, p.stride_h, p.stride_w, &pad, p.output_padding_h,
                                    p.output_padding_w, p.dilation_h, p.dilation_w, fb_kind(p.activation.kind),
                                    p.activation.alpha, p.activation.beta, p.groups)
              .Union()};
}

// (in - 1) * stride - pads + kernel + output_padding, with the product bounded first.
int64_t transposed_out(const std::string& where, const char* axis, int64_t in, int stride, int pad_a,
                       int pad_b, int64_t kernel, int output_padding) {
  if (in - 1 > kMaxShapeElements / stride) fail(where, std::string("output ") + axis + " is too large");
  return (in - 1) * stride - pad_a - pad_b + kernel + output_padding;
}

// Output channels w[1]*groups; the kernel's extent is the dilated d*(K-1)+1.
std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<ConvTranspose2DParams>(params);
  const bool prelu = expect_epilogue_inputs(in, p.activation);
  const Shape& x = in.with_rank(0, 4, "[N,C_in,H,W]");
  const Shape& w = in.with_rank(1, 4, "[C_in,C_out/groups,KH,KW]");
  positive(where, "stride_h", p.stride_h);
  positive(where, "stride_w", p.stride_w);
  positive(where, "dilation_h", p.dilation_h);
  positive(where, "dilation_w", p.dilation_w);
  positive(where, "groups", p.groups);
  check_activation(where, "activation", p.activation, true);
  check_padding(where, "", p.pad, w[2], w[3], false);
  const struct { const char* field; int value; int stride; int dilation; } ops[] = {
      {"output_padding_h", p.output_padding_h, p.stride_h, p.dilation_h},
      {"output_padding_w", p.output_padding_w, p.stride_w, p.dilation_w}};
  for (const auto& o : ops) {
    if (o.value < 0)
      fail(where, std::string("field ") + o.field + " must be >= 0 (got " + std::to_string(o.value) + ")");
    if (o.value >= std::max(o.stride, o.dilation))
      fail(where, std::string("field ") + o.field + " must be < " +
                      (o.dilation > o.stride ? "dilation " + std::to_string(o.dilation)
                                             : "stride " + std::to_string(o.stride)) +
                      " (got " + std::to_string(o.value) + ")");
  }
  const int64_t g = p.groups;
  if (x[1] % g != 0)
    fail(where, "field groups " + std::to_string(g) + " must divide input channels " + std::to_string(x[1]));
  if (w[0] != x[1])
    fail(where, in.label(1) + " has " + std::to_string(w[0]) + " input channels but input 0 has " +
                    std::to_string(x[1]));
  if (w[1] > kMaxShapeElements / g) fail(where, "output channels are too many");
  const int64_t co = w[1] * g;
  if (in.size() >= 3) in.expect_vector(2, co, "C_out");
  if (prelu) expect_prelu_slope(in, co);
  if (w[2] - 1 > kMaxShapeElements / p.dilation_h || w[3] - 1 > kMaxShapeElements / p.dilation_w)
    fail(where, "the dilated kernel is too large");
  const int64_t kh = static_cast<int64_t>(p.dilation_h) * (w[2] - 1) + 1;  // <= 2^40 + 1
  const int64_t kw = static_cast<int64_t>(p.dilation_w) * (w[3] - 1) + 1;
  const int64_t h =
      transposed_out(where, "height", x[2], p.stride_h, p.pad.top, p.pad.bottom, kh, p.output_padding_h);
  const int64_t wd =
      transposed_out(where, "width", x[3], p.stride_w, p.pad.left, p.pad.right, kw, p.output_padding_w);
  return {{x[0], co, h, wd}};
}

// One multiply-add per input element per kernel tap per output channel of its group (weight dim 1 is
// already C_out/groups).
double flops(const NodeDesc& node) {
  const Shape& w = input_shape(node, 1);
  return 2.0 * numel_f(input_shape(node, 0)) * dim_f(w, 1) * dim_f(w, 2) * dim_f(w, 3);
}

Activation activation(const OpParams& params) { return std::get<ConvTranspose2DParams>(params).activation; }

}  // namespace

constinit const OpDef conv_transpose2d_op{
    .read = read,
    .write = write,
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "weight", "bias"},
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .prelu_epilogue = true,
    .reference = ref::run_conv_transpose2d,
};

}  // namespace infer::detail
