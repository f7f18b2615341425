// instance_norm: per (n, c) plane of x [N,C,...] (rank >= 3), y = scale[c] * (x - mean) / sqrt(var +
// epsilon) + bias[c] with the biased variance, then a fused activation. Cost: 5 FLOPs per element
// (sum, squared-deviation sum, multiply-add).
#include <cmath>

#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::InstanceNorm* t = node.options_as_InstanceNorm();
  InstanceNormParams p;
  p.epsilon = t->epsilon();
  p.activation =
      read_activation(t->activation(), t->activation_alpha(), t->activation_beta(), where, "activation");
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<InstanceNormParams>(params);
  return {fb::Op::InstanceNorm, fb::CreateInstanceNorm(fbb, p.epsilon, fb_kind(p.activation.kind),
                                                       p.activation.alpha, p.activation.beta)
                                    .Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<InstanceNormParams>(params);
  in.expect_count(3, 3);
  check_activation(where, "activation", p.activation);
  if (!std::isfinite(p.epsilon) || p.epsilon < 0)
    fail(where, "field epsilon must be finite and >= 0 (got " + std::to_string(p.epsilon) + ")");
  const Shape& x = in[0];
  if (x.size() < 3) fail(where, "input 0 has shape " + shape_str(x) + " but must have rank >= 3 [N,C,...]");
  for (size_t i = 1; i < 3; ++i) in.expect_vector(i, x[1], "C");
  return {x};
}

double flops(const NodeDesc& node) { return 5.0 * numel_f(output_shape(node)); }  // mean, variance, multiply-add

Activation activation(const OpParams& params) { return std::get<InstanceNormParams>(params).activation; }

}  // namespace

constinit const OpDef instance_norm_op{
    .read = read,
    .write = write,
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "scale", "bias"},
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .reference = ref::run_instance_norm,
};

}  // namespace infer::detail
