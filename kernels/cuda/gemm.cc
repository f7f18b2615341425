// cuBLAS row-major GEMM (see gemm.h): a row-major C = A B is the column-major C^T = B^T A^T, so the
// operands are passed to cublasGemm(StridedBatched)Ex swapped. Data and compute types follow the
// session's precision; fp32 runs with CUBLAS_COMPUTE_32F under CUBLAS_DEFAULT_MATH, which never uses TF32.
#include "kernels/cuda/gemm.h"

#include <climits>

#include <fmt/format.h>

#include "infer/error.h"

namespace infer::cuda {

void gemm(Context& ctx, Precision p, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch})
    if (v < 0 || v > INT_MAX)
      throw Error(fmt::format("cuda gemm: dimension {} out of cuBLAS's range (m={} n={} k={})", v, g.m,
                              g.n, g.k));
  const cudaDataType_t type = p == Precision::FP16 ? CUDA_R_16F : CUDA_R_32F;
  const cudaDataType_t c_type = g.c_float ? CUDA_R_32F : type;
  const cublasComputeType_t compute =
      p == Precision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  // Column-major view: C^T (n x m, ld ldc) = op(B)^T (n x k) * op(A)^T (k x m).
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = static_cast<int>(g.n), n = static_cast<int>(g.m), k = static_cast<int>(g.k);
  if (g.batch == 1) {
    INFER_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, op_b, op_a, m, n, k, &g.alpha, g.b, type,
                                    static_cast<int>(g.ldb), g.a, type, static_cast<int>(g.lda), &g.beta,
                                    g.c, c_type, static_cast<int>(g.ldc), compute, CUBLAS_GEMM_DEFAULT));
  } else {
    INFER_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        ctx.cublas, op_b, op_a, m, n, k, &g.alpha, g.b, type, static_cast<int>(g.ldb), g.stride_b, g.a,
        type, static_cast<int>(g.lda), g.stride_a, &g.beta, g.c, c_type, static_cast<int>(g.ldc),
        g.stride_c, static_cast<int>(g.batch), compute, CUBLAS_GEMM_DEFAULT));
  }
}

void gemm_x_wt(Context& ctx, Precision p, const void* x, const void* w, void* y, int64_t rows, int64_t in,
               int64_t out) {
  if (rows == 0 || out == 0) return;
  if (in == 0) {
    INFER_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(rows * out) * element_size(p), ctx.stream));
    return;
  }
  GemmArgs g;
  g.m = rows;
  g.n = out;
  g.k = in;
  g.a = x;
  g.lda = in;
  g.b = w;
  g.ldb = in;
  g.trans_b = true;
  g.c = y;
  g.ldc = out;
  gemm(ctx, p, g);
}

}  // namespace infer::cuda
