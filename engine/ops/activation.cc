// activation: a standalone element-wise non-linearity (every ActivationKind of infer/ops.h, its formula
// there), shape unchanged. Cost: activation_flops(kind) per element (engine/src/cost.cc counts one per
// arithmetic operation, compare or transcendental). Its kind is the op itself, not a fused epilogue.
#include "engine/ops/op_util.h"
#include "engine/src/cost.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::Activation* t = node.options_as_Activation();
  ActivationParams p;
  p.activation = read_activation(t->kind(), t->alpha(), t->beta(), where, "kind");
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& a = std::get<ActivationParams>(params).activation;
  return {fb::Op::Activation, fb::CreateActivation(fbb, fb_kind(a.kind), a.alpha, a.beta).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  in.expect_count(1, 1);
  check_activation(where, "kind", std::get<ActivationParams>(params).activation);
  return {in[0]};
}

double flops(const NodeDesc& node) {
  return numel_f(output_shape(node)) * activation_flops(std::get<ActivationParams>(node.params).activation.kind);
}

}  // namespace

constinit const OpDef activation_op{
    .read = read,
    .write = write,
    .shape = shape,
    .flops = flops,
    .reference = ref::run_activation,
};

}  // namespace infer::detail
