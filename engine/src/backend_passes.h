// Backend passes: graph rewrites that ask the kernel registry, so they run after shape inference, once
// the backend, precision, CPU ISA and batch are known: fuse_conv_residual, fuse_squeeze_excite,
// fuse_prelu, (cpu) fuse_quantized_conv2d and (cpu, after channels_last) fuse_depthwise_pointwise fuse
// where a variant the session may run takes the merged node, (cpu) quantized_activations keeps tensors
// between quantized nodes 8-bit, (cuda) fuse_input_epilogue; choose_layouts runs channels_last
// (layout.h); fold_width_log reports the width-folded variants chosen. Each rewrite is re-validated and
// re-shaped, and keeps passes.h's rules (graph outputs kept, one reader per fused value).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph.h"
#include "kernel_selection.h"

namespace infer::detail {

// A graph with the concrete shape of every value at one batch: what the backend passes rewrite.
struct ShapedGraph {
  std::shared_ptr<const Graph> graph;
  std::vector<Shape> shapes;
  int64_t batch = 1;
  // A pass's tail: `rewritten` replaces the graph, is checked, and its shapes are inferred again (the
  // passes add constants and nodes).
  void adopt(Graph rewritten);
};

// What the backend passes ask: the session's kernel choices, passes, precision and CPU ISA level.
struct BackendPassContext {
  const KernelSelector& kernels;
  const PassOptions& passes;
  Precision precision = Precision::FP32;
  CpuIsa cpu_isa = CpuIsa::Baseline;
};

// fuse_conv_residual, fuse_squeeze_excite, fuse_prelu, (cpu and cuda, graphs with quantize_linear)
// fuse_quantized_conv2d, (cpu) fuse_quantized_add, channels_last, then (cpu only) fuse_depthwise_pointwise,
// (cpu and cuda, graphs with a quantized_conv2d) quantized_activations, (cuda only) fuse_input_epilogue,
// in that order.
// channels_last logs its line in `pass_log`; the fusions' lines (three to six) are
// returned, for the session to log after fold_width's (PassOptions::fuse_conv_residual says why).
std::vector<std::string> run_backend_passes(ShapedGraph& g, const BackendPassContext& c,
                                            std::vector<std::string>& pass_log);

void choose_layouts(ShapedGraph& g, const BackendPassContext& c, std::vector<std::string>& pass_log);

// fold_width's log line, from the variants chosen for `graph`'s nodes (a folded variant requires the pass).
std::string fold_width_log(const Graph& graph, const std::vector<const KernelVariant*>& variants,
                           const PassOptions& passes);

}  // namespace infer::detail
