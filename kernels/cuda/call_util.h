// Argument checks the CUDA kernel adapters share: the node's parameters as the expected type, and a
// KernelCall carrying the inputs, outputs and shapes an op needs, so a malformed call is an
// infer::Error naming the op ("cuda <op>: ...") and never a bad device access. Host code only.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "infer/error.h"
#include "kernels/kernel_api.h"

namespace infer::cuda {

// The node's parameters as P; an Error if the node is of another op.
template <class P>
const P& params_of(const NodeDesc& node, const char* op) {
  const P* p = std::get_if<P>(&node.params);
  if (!p)
    throw Error(std::string("cuda ") + op + ": node parameters are for op '" +
                op_name(op_type(node.params)) + "'");
  return *p;
}

// Between min_inputs and max_inputs non-null inputs, each with a shape without negative dimensions,
// and exactly one non-null output with its shape.
inline void check_call(const KernelCall& call, const char* op, size_t min_inputs, size_t max_inputs) {
  const std::string where = std::string("cuda ") + op + ": ";
  const size_t n = call.inputs.size();
  if (n < min_inputs || n > max_inputs)
    throw Error(where + "expected " + std::to_string(min_inputs) + (max_inputs == min_inputs ? "" : "+") +
                " inputs, got " + std::to_string(n));
  if (call.node.input_shapes.size() != n)
    throw Error(where + "node has " + std::to_string(call.node.input_shapes.size()) +
                " input shapes for " + std::to_string(n) + " inputs");
  if (call.outputs.size() != 1 || call.node.output_shapes.size() != 1)
    throw Error(where + "expected 1 output, got " + std::to_string(call.outputs.size()));
  for (size_t i = 0; i < n; ++i)
    if (!call.inputs[i]) throw Error(where + "input " + std::to_string(i) + " is null");
  if (!call.outputs[0]) throw Error(where + "output 0 is null");
  for (const Shape& s : call.node.input_shapes)
    for (int64_t d : s)
      if (d < 0) throw Error(where + "shape " + shape_str(s) + " has a negative dimension");
  for (int64_t d : call.node.output_shapes[0])
    if (d < 0)
      throw Error(where + "shape " + shape_str(call.node.output_shapes[0]) + " has a negative dimension");
}

inline void check_call(const KernelCall& call, const char* op, size_t inputs) {
  check_call(call, op, inputs, inputs);
}

}  // namespace infer::cuda
