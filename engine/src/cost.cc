// The cost model. Conventions (kept simple on purpose, so numbers are easy to check by hand): each op's
// FLOP count is its OpDef's `flops` (engine/ops/<op>.cc says how it counts; an op without one, e.g. a
// copy such as flatten, reshape, concat, pad2d, channel_shuffle, slice, depth_to_space, layout, is 0).
// - Bias adds and fused activation epilogues are not counted (they are O(outputs), negligible next
//   to the multiply-adds).
// - activation: activation_flops(kind) per element: one per arithmetic operation, compare or
//   transcendental of its formula (infer/ops.h), except that relu, leaky_relu, tanh and sigmoid count
//   one as they always have, and none (a copy) 0.
// - Bytes: 4 per element of every input (constants included) and every output, 1 for a quantized_conv2d's
//   8-bit activations (x_quantized, y_dtype).
#include "cost.h"

#include "engine/ops/op_util.h"

namespace infer::detail {

double activation_flops(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::None: return 0;
    case ActivationKind::Relu:
    case ActivationKind::LeakyRelu:
    case ActivationKind::Tanh:
    case ActivationKind::Sigmoid:
    case ActivationKind::Exp:
    case ActivationKind::Sqrt:
    case ActivationKind::Neg:
    case ActivationKind::Abs:
    case ActivationKind::PRelu: return 1;
    case ActivationKind::Clip: return 2;         // max, min
    case ActivationKind::Silu: return 2;         // sigmoid, multiply
    case ActivationKind::Softplus: return 2;     // exp, log1p
    case ActivationKind::Elu: return 3;          // compare, expm1, multiply
    case ActivationKind::HardSigmoid: return 4;  // multiply, add, max, min
    case ActivationKind::HardSwish: return 5;    // add, max, min, multiply, divide
  }
  return 1;
}

NodeCost node_cost(const NodeDesc& node) {
  NodeCost cost;
  for (const Shape& s : node.input_shapes) cost.bytes += 4.0 * numel_f(s);
  for (const Shape& s : node.output_shapes) cost.bytes += 4.0 * numel_f(s);
  if (const auto* q = std::get_if<QuantizedConv2DParams>(&node.params)) {  // 8-bit activations: 1 byte each
    if (q->x_quantized) cost.bytes -= 3.0 * numel_f(node.input_shapes.at(0));
    if (q->y_dtype != DType::F32) cost.bytes -= 3.0 * numel_f(node.output_shapes.at(0));
  }
  const OpDef& def = op_def(op_type(node.params));
  if (def.flops) cost.flops = def.flops(node);
  return cost;
}

}  // namespace infer::detail
