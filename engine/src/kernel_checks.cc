// check_kernel_call: every kernel call's arguments checked once, for every backend, before the
// variant runs (KernelRegistry::add wraps each run with it). The op's shape rules are shape
// inference's own (infer_node_shapes: what the loader and the builder check, less the rules about
// which inputs are constants, plus empty tensors), so a malformed call is an infer::Error naming the
// variant, never an out-of-range access.
#include <string>

#include "infer/error.h"
#include "infer/kernel.h"
#include "shape_inference.h"

namespace infer {

void check_kernel_call(const KernelVariant& v, const KernelCall& call) {
  const NodeDesc& node = call.node;
  const std::string where = v.backend + " " + v.op + "." + v.name;
  if (op_name(op_type(node.params)) != v.op)
    throw Error(where + ": node parameters are for op '" + op_name(op_type(node.params)) + "'");
  if (!v.fuses_prelu && fused_activation(node.params).kind == ActivationKind::PRelu)
    throw Error(where + ": does not apply a per-channel prelu epilogue (KernelVariant::fuses_prelu)");
  if (!v.fuses_input_epilogue && has_input_epilogue(node.params))
    throw Error(where + ": does not apply a conv2d input epilogue (KernelVariant::fuses_input_epilogue)");
  const size_t n = call.inputs.size();
  if (node.input_shapes.size() != n)
    throw Error(where + ": node has " + std::to_string(node.input_shapes.size()) +
                " input shapes for " + std::to_string(n) + " inputs");
  if (call.outputs.size() != 1 || node.output_shapes.size() != 1)
    throw Error(where + ": expected 1 output, got " + std::to_string(call.outputs.size()));
  for (size_t i = 0; i < n; ++i)
    if (!call.inputs[i]) throw Error(where + ": input " + std::to_string(i) + " is null");
  if (!call.outputs[0]) throw Error(where + ": output 0 is null");
  for (const Shape& s : node.input_shapes)
    for (int64_t d : s)
      if (d < 0) throw Error(where + ": shape " + shape_str(s) + " has a negative dimension");
  // Empty tensors (a zero dimension) are legal kernel calls (they do nothing) though not in models.
  // Without the constant flags: the rules that depend on which inputs are constants (binary: a
  // constant never spans the batch axis) keep a model's batch free; a kernel computes any
  // broadcast, so a call is checked for shapes only.
  const std::vector<Shape> out = detail::infer_node_shapes(node.params, node.input_shapes, where,
                                                           /*constant=*/nullptr, /*allow_empty=*/true);
  if (out.size() != 1 || out[0] != node.output_shapes[0])
    throw Error(where + ": output shape " + shape_str(node.output_shapes[0]) + " differs from " +
                (out.empty() ? std::string("none") : shape_str(out[0])) +
                ", what the op computes from its inputs");
}

}  // namespace infer
