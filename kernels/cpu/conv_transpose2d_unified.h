// conv_transpose2d.segregated_unified on the CPU (kernels/cpu/conv_transpose2d_unified.cc): the
// unified kernel-segregated transposed convolution as register-blocked micro-kernels compiled per ISA
// level. conv_transpose2d.cc registers it beside the other variants; the heuristic lives there.
#pragma once

#include <memory>

#include "engine/src/kernel_api.h"

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

// Which micro-kernel prepare() picks for the node: true for the pixel-vectorised one (a vector of
// consecutive output pixels of one phase against broadcast weights: C_out <= 4, where a vector of
// output channels would be mostly padding), false for the channel-vectorised one. For tests.
bool conv_transpose2d_unified_pixel_mode(const NodeDesc& node);

}  // namespace infer::cpu
