// conv_transpose2d.segregated_unified on the CPU (kernels/cpu/conv_transpose2d_unified.cc): the
// unified kernel-segregated transposed convolution as register-blocked micro-kernels compiled per ISA
// level. conv_transpose2d.cc registers it beside the other variants; the heuristic lives there.
#pragma once

#include <memory>

#include "infer/kernel.h"

namespace infer::cpu {

// Groups 1, dilation 1, a constant weight, and a kernel whose taps for one output pixel fit the
// per-thread stack view (about 80 x 80 at stride 1).
bool conv_transpose2d_unified_applicable(const NodeDesc& node);

// The weights repacked per stride phase for the node's ISA level (node.isa), and the blocking.
// Throws infer::Error for groups / dilation != 1 or a non-constant weight.
std::shared_ptr<void> conv_transpose2d_unified_prepare(const NodeDesc& node);

// Runs the node with what prepare() returned (call.prepared); no workspace. Throws infer::Error when
// the call was not prepared for this node and level.
void conv_transpose2d_unified_run(const KernelCall& call);

// What prepare() decides for a node (for tests and benchmarks): the micro-kernel (pixel-vectorised:
// a vector of consecutive output pixels of one phase against broadcast weights, chosen for
// C_out <= 4 where a vector of output channels would be mostly padding; else channel-vectorised),
// the input channels per chunk (chunks > 1: partial sums wait on the stack between them), the output
// rows and columns per work item, and the channel groups (of up to NV vectors) and groups per item.
struct UnifiedLayout {
  bool pixel = false;
  int64_t kc = 0, chunks = 0, rows = 0, cols = 0, groups = 0, groups_per_item = 0;
};
UnifiedLayout conv_transpose2d_unified_layout(const NodeDesc& node);

}  // namespace infer::cpu
