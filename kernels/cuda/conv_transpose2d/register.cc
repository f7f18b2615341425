// Registers the CUDA conv_transpose2d variants of this folder (INFER_REGISTER_KERNELS, infer/kernel.h):
// names, priorities, applicability, workspace and prepare per variant; the kernels are in one file per
// variant family; each applies a per-channel PRelu epilogue (fuses_prelu). projection.cc, cudnn.cc,
// segregated_mma_nhwc.cu and cutlass.cu register their own variants. Host code only.
#include <climits>
#include <string>
#include <utility>

#include "kernels/cuda/conv_transpose2d/common.h"
#include "infer/kernel.h"

namespace infer::cuda {

using namespace tconv;

namespace {

// flipped_conv, segregated_unified (and segregated_gemm, segregated_cublas, cudnn, projection in
// their files): groups 1 and dilation 1 only (plain); gemm_col2im and conventional take any.
bool flipped_applicable(const NodeDesc& node) {
  return plain(node) && has_constant_weight(node) && strides(node) == std::make_pair(1, 1);
}

bool col2im_applicable(const NodeDesc& node) {
  if (!valid(node)) return false;
  const TconvDims d = tconv_dims(node);
  // cuBLAS's int dimensions; col2im's 32-bit in-plane index math (one image's columns per output
  // channel, and an output plane, under 2^31 elements)
  // dilated: the gather's tap offsets ky*dh, kx*dw in int too
  return d.CO * d.KH * d.KW <= INT_MAX && d.H * d.W <= INT_MAX && d.CI <= INT_MAX &&
         d.KH * d.KW * d.H * d.W <= INT_MAX && d.HO * d.WO <= INT_MAX && d.CO <= INT_MAX &&
         d.dh * d.KH <= INT_MAX && d.dw * d.KW <= INT_MAX;
}

bool unified_applicable(const NodeDesc& node) {
  return plain(node) && strides(node) == std::make_pair(2, 2);
}

}  // namespace

INFER_REGISTER_KERNELS(conv_transpose2d) {
  registry.add("cuda", {
      {.op = "conv_transpose2d", .name = "flipped_conv", .priority = 30, .fuses_prelu = true,
       .applicable = flipped_applicable, .workspace_bytes = flipped_workspace_bytes,
       .prepare = prepare_flipped, .run = run_flipped_conv},
      // priority: when a caller ignores priority_for
      {.op = "conv_transpose2d", .name = "gemm_col2im", .priority = 12,
       .priority_for = gemm_col2im_priority, .fuses_prelu = true, .applicable = col2im_applicable,
       .workspace_bytes = col2im_workspace_bytes, .run = run_gemm_col2im},
      {.op = "conv_transpose2d", .name = "segregated_gemm", .priority = 20, .fuses_prelu = true,
       .applicable = segregated_gemm_applicable, .prepare = prepare_segregated_gemm,
       .run = run_segregated_gemm},
      {.op = "conv_transpose2d", .name = "segregated_unified", .priority = 10, .fuses_prelu = true,
       .applicable = unified_applicable, .run = run_unified},
      {.op = "conv_transpose2d", .name = "conventional", .priority = 1, .fuses_prelu = true,
       .applicable = conventional_applicable, .workspace_bytes = conventional_workspace_bytes,
       .prepare = prepare_flipped, .run = run_conventional},
      // priority: when a caller ignores priority_for, below segregated_gemm (20)
      {.op = "conv_transpose2d", .name = "segregated_cublas", .priority = 15,
       .priority_for = segregated_cublas_priority, .fuses_prelu = true,
       .applicable = segregated_cublas_applicable,
       .workspace_bytes = segregated_cublas_workspace_bytes, .prepare = prepare_segregated_cublas,
       .run = run_segregated_cublas},
  });
}

}  // namespace infer::cuda
