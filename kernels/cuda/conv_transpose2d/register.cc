// Registers the CUDA conv_transpose2d variants of this folder (register_conv_transpose2d, declared in
// kernels/cuda/cuda_kernels.h): names, priorities, applicability, workspace and prepare per variant;
// the kernels are in one file per variant family. projection.cc and cudnn.cc register their own
// variants (register_conv_transpose2d_projection / _cudnn). Host code only.
#include <climits>
#include <string>
#include <utility>

#include "kernels/cuda/conv_transpose2d/common.h"
#include "kernels/cuda/cuda_kernels.h"

namespace infer::cuda {

using namespace tconv;

namespace {

void register_segregated_cublas(KernelRegistry& registry) {
  KernelVariant v;
  v.op = "conv_transpose2d";
  v.name = "segregated_cublas";
  v.backend = "cuda";
  v.priority = 15;  // when a caller ignores priority_for: below segregated_gemm (20)
  v.priority_for = segregated_cublas_priority;
  v.applicable = segregated_cublas_applicable;
  v.workspace_bytes = segregated_cublas_workspace_bytes;
  v.prepare = prepare_segregated_cublas;
  v.run = run_segregated_cublas;
  registry.add(std::move(v));
}

}  // namespace

void register_conv_transpose2d(KernelRegistry& registry) {
  const std::string op = "conv_transpose2d";

  KernelVariant flipped;
  flipped.op = op;
  flipped.name = "flipped_conv";
  flipped.backend = "cuda";
  flipped.priority = 30;
  flipped.applicable = [](const NodeDesc& node) {
    return valid(node) && has_constant_weight(node) && strides(node) == std::make_pair(1, 1);
  };
  flipped.workspace_bytes = flipped_workspace_bytes;
  flipped.prepare = prepare_flipped;
  flipped.run = run_flipped_conv;
  registry.add(std::move(flipped));

  KernelVariant col2im;
  col2im.op = op;
  col2im.name = "gemm_col2im";
  col2im.backend = "cuda";
  col2im.priority = 12;  // when a caller ignores priority_for
  col2im.priority_for = gemm_col2im_priority;
  col2im.applicable = [](const NodeDesc& node) {
    if (!valid(node)) return false;
    const TconvDims d = tconv_dims(node);
    // cuBLAS's int dimensions; col2im's 32-bit in-plane index math (one image's columns per
    // output channel, and an output plane, under 2^31 elements)
    return d.CO * d.KH * d.KW <= INT_MAX && d.H * d.W <= INT_MAX && d.CI <= INT_MAX &&
           d.KH * d.KW * d.H * d.W <= INT_MAX && d.HO * d.WO <= INT_MAX && d.CO <= INT_MAX;
  };
  col2im.workspace_bytes = col2im_workspace_bytes;
  col2im.run = run_gemm_col2im;
  registry.add(std::move(col2im));

  KernelVariant gemm;
  gemm.op = op;
  gemm.name = "segregated_gemm";
  gemm.backend = "cuda";
  gemm.priority = 20;
  gemm.applicable = segregated_gemm_applicable;
  gemm.prepare = prepare_segregated_gemm;
  gemm.run = run_segregated_gemm;
  registry.add(std::move(gemm));

  KernelVariant unified;
  unified.op = op;
  unified.name = "segregated_unified";
  unified.backend = "cuda";
  unified.priority = 10;
  unified.applicable = [](const NodeDesc& node) {
    return valid(node) && strides(node) == std::make_pair(2, 2);
  };
  unified.run = run_unified;
  registry.add(std::move(unified));

  KernelVariant conventional;
  conventional.op = op;
  conventional.name = "conventional";
  conventional.backend = "cuda";
  conventional.priority = 1;
  conventional.applicable = conventional_applicable;
  conventional.workspace_bytes = conventional_workspace_bytes;
  conventional.prepare = prepare_flipped;
  conventional.run = run_conventional;
  registry.add(std::move(conventional));
  register_segregated_cublas(registry);
}

}  // namespace infer::cuda
