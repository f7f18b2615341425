// What the CUDA conv2d variants of this folder share (host code, for .cc and .cu files): the node's
// geometry, the hand-written NHWC kernels' common check, the run-time unpacking of a call (geometry +
// device pointers, the residual input of fuse_conv_residual, the PRelu slopes of fuse_prelu) and the
// entry points gemm.cu and direct.cu give register.cc. Shapes and the parameter type were checked by
// the registry (check_kernel_call) and shape inference first. Namespace infer::cuda::conv.
#pragma once

#include <cstdint>
#include <variant>

#include "kernels/conv_shapes.h"
#include "kernels/cuda/im2col.cuh"

namespace infer::cuda::conv {

// 1x1, stride 1, unpadded, ungrouped: the convolution is a GEMM over the input as it is.
inline bool gemm_1x1_applicable(const NodeDesc& node) {
  if (!conv2d_ungrouped(node)) return false;
  const auto& p = std::get<Conv2DParams>(node.params);
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  return w[2] == 1 && w[3] == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad.top == 0 &&
         p.pad.left == 0 && p.pad.bottom == 0 && p.pad.right == 0 && y[2] == x[2] && y[3] == x[3];
}

// The hand-written NHWC kernels' common check (small_cin_nhwc.cu, small_cout_nhwc.cu): an NHWC conv2d
// with a constant weight, an optional constant bias of C_out values and, with a per-channel PRelu
// epilogue (fuse_prelu: the slope is input 3), constant slopes, x, w and y 4-D with every size in
// (0, 2^30) (so int indices hold a dimension), channels and batch consistent.
inline bool nhwc_constant_conv(const NodeDesc& node) {
  if (!std::holds_alternative<Conv2DParams>(node.params)) return false;
  // input 3: a PRelu's slopes or the input epilogue's bias (variant_applies offers either only to the
  // variants that declare it)
  const bool four = fused_activation(node.params).kind == ActivationKind::PRelu || has_input_epilogue(node.params);
  if (node.layout != Layout::NHWC || node.input_shapes.size() < 2 || node.input_shapes.size() > (four ? 4u : 3u) ||
      node.output_shapes.size() != 1 || !has_constant_weight(node))
    return false;
  if (four && (node.input_shapes.size() != 4 || node.constants.size() < 4 || !node.constants[3])) return false;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return false;
  for (const Shape* s : {&x, &w, &y})
    for (int64_t d : *s)
      if (d <= 0 || d >= (int64_t(1) << 30)) return false;
  if (w[1] != x[1] || y[1] != w[0] || y[0] != x[0]) return false;
  return node.input_shapes.size() == 2 ||
         (shape_numel(node.input_shapes[2]) == w[0] && node.constants.size() >= 3 && node.constants[2]);
}

// The call's geometry and pointers.
struct ConvCall {
  ConvProblem g;
  int64_t N, CO;
  const void *x, *w, *bias, *residual;  // residual: input 3 (add_residual), else null
  void* y;
  const void* slope;  // [C_out]: input 3 with a per-channel PRelu epilogue (fuse_prelu), else null
};

inline ConvCall conv_call(const KernelCall& call) {
  ConvCall c{conv2d_problem(call.node), 0, 0, nullptr, nullptr, nullptr, nullptr, nullptr, prelu_slope(call)};
  c.N = call.node.input_shapes[0][0];
  c.CO = call.node.input_shapes[1][0];
  c.x = call.inputs[0];
  c.w = call.inputs[1];
  c.bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  c.residual = std::get<Conv2DParams>(call.node.params).add_residual ? call.inputs.at(3) : nullptr;
  c.y = call.outputs[0];
  return c;
}

// gemm.cu: im2col_gemm, gemm_1x1 (both split over K at batch 1 where it pays), gemm_1x1_nhwc
size_t im2col_gemm_workspace(const NodeDesc& node);
void run_im2col_gemm(const KernelCall& call);
void run_gemm_1x1(const KernelCall& call);
int gemm_1x1_nhwc_priority(const NodeDesc& node);
void run_gemm_1x1_nhwc(const KernelCall& call);

// direct.cu: direct (any conv2d node), direct_small_cout (C_out <= 8)
void run_direct(const KernelCall& call);
bool small_cout_applicable(const NodeDesc& node);
int small_cout_priority(const NodeDesc& node);
void run_small_cout(const KernelCall& call);

}  // namespace infer::cuda::conv
