// Row-major GEMM through cuBLAS for every CUDA kernel that has GEMM-shaped work (conv2d after im2col,
// dense, the conventional and GEMM transposed convolutions, conv_pool2d): C = alpha op(A) op(B) + beta C,
// optionally strided-batched, in the session's precision: fp32 strict (CUBLAS_COMPUTE_32F, no TF32),
// tf32 (CUBLAS_COMPUTE_32F_FAST_TF32), fp16 (half A/B/C, float accumulation). Capture-safe.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.h"

namespace infer::cuda {

// Row-major operands: op(A) is m x k, op(B) is k x n, C is m x n. With trans_a, A is stored k x m
// (lda >= m); without, m x k (lda >= k). Likewise B. ldc >= n. Strides are in elements between the
// matrices of consecutive batch entries (0 broadcasts one matrix to every entry).
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr; int64_t lda = 0; int64_t stride_a = 0; bool trans_a = false;
  const void* b = nullptr; int64_t ldb = 0; int64_t stride_b = 0; bool trans_b = false;
  void* c = nullptr; int64_t ldc = 0; int64_t stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.f, beta = 0.f;
  bool c_float = false;  // C in float whatever the precision (split-K partial sums under fp16)
};

// Throws infer::Error on a cuBLAS failure or on dimensions cuBLAS cannot take (over INT_MAX).
void gemm(Context& ctx, Precision p, const GemmArgs& g);

// y [rows, out] = x [rows, in] * W^T, W [out, in] used as stored (trans_b): a dense layer, or a 1x1
// convolution over the pixels of an NHWC batch. in == 0 writes zeros (cuBLAS would not reliably write
// y for an empty dot product); rows or out == 0 does nothing.
void gemm_x_wt(Context& ctx, Precision p, const void* x, const void* w, void* y, int64_t rows, int64_t in,
               int64_t out);

// The channel (or GEMM K / N) multiple the tensor-core kernels of cuBLAS and cuDNN want: 16 bytes,
// i.e. 8 halves (fp16) or 4 floats (tf32; strict fp32 has no tensor-core path but keeps the rule).
inline int64_t tensor_core_multiple(Precision p) { return p == Precision::FP16 ? 8 : 4; }

}  // namespace infer::cuda
