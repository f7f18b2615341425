// batchnorm: inference batch normalisation over axis 1 of a rank >= 2 tensor with constant scale, bias,
// mean and var [C], then a fused activation (the fold_batchnorm pass folds it into a producer where it
// can). Cost: one multiply-add (2 FLOPs) per element.
#include <cmath>

#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::BatchNorm* t = node.options_as_BatchNorm();
  BatchNormParams p;
  p.epsilon = t->epsilon();
  p.activation =
      read_activation(t->activation(), t->activation_alpha(), t->activation_beta(), where, "activation");
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<BatchNormParams>(params);
  return {fb::Op::BatchNorm, fb::CreateBatchNorm(fbb, p.epsilon, fb_kind(p.activation.kind), p.activation.alpha,
                                                 p.activation.beta)
                                 .Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<BatchNormParams>(params);
  in.expect_count(5, 5);
  check_activation(where, "activation", p.activation);
  if (!std::isfinite(p.epsilon) || p.epsilon < 0)
    fail(where, "field epsilon must be finite and >= 0 (got " + std::to_string(p.epsilon) + ")");
  const Shape& x = in[0];
  if (x.size() < 2) fail(where, "input 0 has shape " + shape_str(x) + " but must have rank >= 2 [N,C,...]");
  for (size_t i = 1; i < 5; ++i) in.expect_vector(i, x[1], "C");
  return {x};
}

double flops(const NodeDesc& node) { return 2.0 * numel_f(output_shape(node)); }

Activation activation(const OpParams& params) { return std::get<BatchNormParams>(params).activation; }

}  // namespace

constinit const OpDef batchnorm_op{
    .read = read,
    .write = write,
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "scale", "bias", "mean", "var"},
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .reference = ref::run_batchnorm,
};

}  // namespace infer::detail
