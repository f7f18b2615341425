// Graph passes: rewrites of a loaded Graph that keep its outputs (up to float rounding) and make it
// cheaper to run: fold inference BatchNorm into the preceding conv / tconv / dense, rewrite conv ->
// p x p average pool into conv_pool2d, fuse element-wise activations into their producer. Each pass is
// Graph -> Graph, never touches the mmapped weights (new constants go through Graph::add_constant),
// and leaves a graph that satisfies the loader's invariants (checked by validate_graph).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "graph.h"
#include "infer/session.h"

namespace infer::detail {

// Each pass appends one line to `log` saying what it did ("fold_batchnorm: 4 BatchNorm nodes folded
// into conv_transpose2d"). The surviving node keeps the first node's name and lists the merged nodes
// in Node::fused; graph outputs keep their value names; values no node uses any more are removed.
Graph fold_batchnorm(Graph graph, std::vector<std::string>* log = nullptr);
Graph fuse_conv_avgpool(Graph graph, std::vector<std::string>* log = nullptr);
Graph fuse_activation(Graph graph, std::vector<std::string>* log = nullptr);
// A backend pass (backend_passes.cc runs it with `takes` asking the kernel registry): a conv2d +
// residual add pair is fused only where takes(graph, conv, residual value, activation) says a kernel
// variant runs the merged node (conv2d with add_residual and the add's activation); null takes:
// everywhere.
using ResidualPredicate = std::function<bool(const Graph&, const Node& conv, int residual, const Activation&)>;
Graph fuse_conv_residual(Graph graph, const ResidualPredicate& takes = nullptr,
                         std::vector<std::string>* log = nullptr);

// A backend pass like fuse_conv_residual: global average pool -> 1x1 conv2d -> 1x1 conv2d -> mul with
// the pool's input becomes one squeeze_excite node where takes(graph, merged node) says a kernel
// variant runs it (null takes: everywhere).
using SqueezeExcitePredicate = std::function<bool(const Graph&, const Node& merged)>;
Graph fuse_squeeze_excite(Graph graph, const SqueezeExcitePredicate& takes = nullptr,
                          std::vector<std::string>* log = nullptr);

// A backend pass like fuse_conv_residual: a PRelu with per-channel slopes becomes the per-channel PRelu
// epilogue of the conv2d / conv_transpose2d / dense before it (the slope its last input, a zero bias
// added where it had none) where takes(graph, merged node) says a kernel variant runs it (null takes:
// everywhere).
using PReluPredicate = std::function<bool(const Graph&, const Node& merged)>;
Graph fuse_prelu(Graph graph, const PReluPredicate& takes = nullptr, std::vector<std::string>* log = nullptr);

// A backend pass (cpu, after channels_last): a depthwise conv2d (3x3 / 5x5, stride 1 or 2) whose only
// reader is a 1x1 stride-1 conv2d with C_out <= its channels, both in one layout, becomes one
// depthwise_pointwise node (zero biases added where absent) where takes(graph, merged node) says a
// kernel variant runs it (null takes: everywhere).
using DepthwisePointwisePredicate = std::function<bool(const Graph&, const Node& merged)>;
Graph fuse_depthwise_pointwise(Graph graph, const DepthwisePointwisePredicate& takes = nullptr,
                               std::vector<std::string>* log = nullptr);

// A backend pass (cuda, after channels_last): a conv_transpose2d or plain conv2d P whose only reader is
// a conv2d C (no residual, no PRelu, no input epilogue of its own) hands its bias and activation (not a
// PRelu) to C as C's input epilogue (Conv2DParams::input_epilogue: C reads act(x + b[c])), so that P
// writes its raw sums and no pass over P's output applies them (cuDNN's backward data fuses none).
// C gets a zero bias where it had none, and the input epilogue's bias is P's (zeros where P had none).
// Applied where takes(graph, merged C, bare P) says the backend runs both (null takes: everywhere).
using InputEpiloguePredicate = std::function<bool(const Graph&, const Node& consumer, const Node& producer)>;
Graph fuse_input_epilogue(Graph graph, const InputEpiloguePredicate& takes = nullptr,
                          std::vector<std::string>* log = nullptr);

// A backend pass (cpu and cuda, before channels_last): conv2d reading a per-tensor quantize_linear ->
// dequantize_linear pair, with a weight dequantized at load from int8 (zero point 0, per tensor or per
// output channel), becomes one quantized_conv2d node (the pair kept for its other readers) where
// takes(graph, merged node) says a kernel variant runs it (null takes: everywhere); a dense becomes a 1x1
// one between reshapes, a conv_transpose2d its stride phases' quantized_conv2d nodes, a concat and a
// depth_to_space (kernel segregation; every phase must be taken; `interleave` false: only where no
// interleave is needed, stride 1 or a 1x1 input). Logs only for
// graphs with such a chain or a quantize_linear node (the caller decides; see backend_passes.cc).
using QuantizedConvPredicate = std::function<bool(const Graph&, const Node& merged)>;
Graph fuse_quantized_conv2d(Graph graph, const QuantizedConvPredicate& takes = nullptr,
                            std::vector<std::string>* log = nullptr, bool interleave = true);

// A backend pass (cpu, after fuse_quantized_conv2d, before channels_last): an add whose input (either or
// both) comes through a per-tensor quantize_linear -> dequantize_linear pair (ONNX Runtime's QDQ
// residual adds) reads the pair's input instead, the pair applied as it reads (AddParams::input_qdq);
// pairs without readers left go. Where takes(graph, merged add) says a variant runs it (null: everywhere).
Graph fuse_quantized_add(Graph graph, const QuantizedConvPredicate& takes = nullptr,
                         std::vector<std::string>* log = nullptr);

// A backend pass (cpu, after channels_last): a value written by a quantized_conv2d and read only by
// quantized_conv2d nodes, each as its data input x with the same scale, zero point and type, and not a
// graph output, stays in 8 bits: the producer writes quantize_linear of its float result (y_dtype,
// y_scale, y_zero_point: the readers' x_*), the readers take the bytes (x_quantized), the value is
// stored_8bit. The same values as before, a quarter of the bytes, no quantization in the readers.
// Applied where takes(graph, node) says a kernel variant runs each changed node (null: everywhere).
Graph quantized_activations(Graph graph, const QuantizedConvPredicate& takes = nullptr,
                            std::vector<std::string>* log = nullptr);

// The fused activation slot of ops that have one (conv2d, conv_transpose2d, dense, batchnorm, add,
// conv_pool2d, binary, instance_norm), nullptr for the others.
Activation* epilogue(OpParams& params);

// SessionOptions::extra_outputs appended to the graph's outputs before the passes run: passes never
// fuse a graph output away and the planner keeps outputs alive to the end, so no other module needs
// to know about them. An Error for a name the graph lacks or has twice, a constant, or an output.
void add_extra_outputs(Graph& graph, const std::vector<std::string>& names);

// The enabled passes in order (fold_batchnorm, fuse_conv_avgpool, fuse_activation); a disabled pass
// logs "<name>: off".
Graph run_passes(Graph graph, const PassOptions& options, std::vector<std::string>* log = nullptr);

// Throws infer::Error unless the graph satisfies the loader's invariants: every id in range, parameter
// inputs constant and data inputs activations, one output per node written once and never a constant
// or a model input, nodes in execution order, outputs produced, shapes consistent at batch 1.
void validate_graph(const Graph& graph);

}  // namespace infer::detail
