// add: y = act(a + b) for two activations of equal shape (the residual add of format version 1; binary
// is the broadcasting form). Cost: one FLOP per element.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::Add* t = node.options_as_Add();
  AddParams p;
  p.activation =
      read_activation(t->activation(), t->activation_alpha(), t->activation_beta(), where, "activation");
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& a = std::get<AddParams>(params).activation;
  return {fb::Op::Add, fb::CreateAdd(fbb, fb_kind(a.kind), a.alpha, a.beta).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  in.expect_count(2, 2);
  check_activation(where, "activation", std::get<AddParams>(params).activation);
  if (in[0] != in[1])
    fail(where, "input 1 has shape " + shape_str(in[1]) + " but input 0 has " + shape_str(in[0]) +
                    " (add needs equal shapes)");
  return {in[0]};
}

double flops(const NodeDesc& node) { return numel_f(output_shape(node)); }

Activation activation(const OpParams& params) { return std::get<AddParams>(params).activation; }

}  // namespace

constinit const OpDef add_op{
    .read = read,
    .write = write,
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .reference = ref::run_add,
};

}  // namespace infer::detail
