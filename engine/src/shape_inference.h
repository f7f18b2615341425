// Shape inference: the output shape of every op from its parameters and input shapes, and of a whole
// graph for a fixed batch size. Throws infer::Error naming the node and the field at fault; the loader
// uses it to validate declared shapes, the builder to declare them, the session to size the arena.
#pragma once

#include <string>
#include <vector>

#include "graph.h"
#include "infer/ops.h"

namespace infer::detail {

// Output shapes of one node. `input_shapes` are concrete (batch fixed) except that the builder may
// pass a batch of 1. `where` prefixes error messages (e.g. "model.fb: node 3 'conv1' (conv2d)").
// `constant` (one flag per input, optional) enables the rules that depend on which inputs are
// constants (binary: a constant never spans the batch axis). allow_empty admits zero dimensions
// (kernel calls on empty tensors; models never have them).
std::vector<Shape> infer_node_shapes(const OpParams& params, const std::vector<Shape>& input_shapes,
                                     const std::string& where,
                                     const std::vector<bool>* constant = nullptr,
                                     bool allow_empty = false);

// Which inputs of an op hold parameters (must be constants: weights, biases, statistics); the others
// carry data (activations). One rule for the loader, the builder and validate_graph.
bool is_parameter_input(OpType op, size_t i);

// Concrete shape of every value for `batch` (constants keep their shapes). Checks each node's
// computed output against the declared shape (batch dim -1 matches any batch).
std::vector<Shape> infer_shapes(const Graph& graph, int64_t batch);

}  // namespace infer::detail
