// conv_pool2d: a convolution (groups and dilation 1), then pool x pool average pooling at stride pool,
// then the convolution's activation; made by the fuse_conv_avgpool pass and storable in a file. Cost:
// the convolution over the pooled region (H_out*pool x W_out*pool) plus the pooling.
#include "engine/ops/conv2d.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::ConvPool2D* t = node.options_as_ConvPool2D();
  ConvPool2DParams p;
  p.conv = read_conv(t->conv(), where, "conv.");
  p.pool = t->pool();
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<ConvPool2DParams>(params);
  const auto conv = write_conv(fbb, p.conv);
  return {fb::Op::ConvPool2D, fb::CreateConvPool2D(fbb, conv, p.pool).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<ConvPool2DParams>(params);
  Shape s = conv2d_shape(where, "conv.", p.conv, in, false);
  if (p.pool < 1) fail(where, "field pool must be >= 1 (got " + std::to_string(p.pool) + ")");
  if (s[2] < p.pool || s[3] < p.pool)
    fail(where, "conv output " + std::to_string(s[2]) + "x" + std::to_string(s[3]) +
                    " is smaller than the pool window " + std::to_string(p.pool));
  s[2] /= p.pool;
  s[3] /= p.pool;
  return {s};
}

double flops(const NodeDesc& node) {
  const double pool = std::get<ConvPool2DParams>(node.params).pool;
  const Shape& y = output_shape(node);
  return conv_flops(node, dim_f(y, 2) * pool, dim_f(y, 3) * pool) + numel_f(y) * pool * pool;
}

Activation activation(const OpParams& params) { return std::get<ConvPool2DParams>(params).conv.activation; }

}  // namespace

constinit const OpDef conv_pool2d_op{
    .read = read,
    .write = write,
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "weight", "bias"},
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .reference = ref::run_conv_pool2d,
};

}  // namespace infer::detail
