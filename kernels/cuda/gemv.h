// Matrix-vector products at batch <= 4 for the layers that are a stream of their weights there (dense
// heads, a generator's 1x1 -> KxK projection): y[r][j] = act(sum_c x[r][c] W(c, j) + bias[...]) for
// r < rows, float sums, bias and activation applied in the same kernel (no epilogue pass), in the
// session's storage type. Shared by dense.cu and conv_transpose2d/projection.cc; kernels in gemv.cu.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.h"

namespace infer::cuda {

constexpr int64_t kGemvMaxRows = 4;

// The epilogue (gemm_epilogue.cuh): output j's channel is (j / bias_div) % bias_mod; its bias and
// PRelu slope (storage type, either may be null) are indexed by it; act between the two.
struct GemvEpilogue {
  const void* bias = nullptr;
  int64_t bias_div = 1, bias_mod = 1;
  Activation act;
  const void* slope = nullptr;
};

// W stored [J][K] (one row per output, a dense weight): one warp per output j reads its row once in
// 16-byte vectors (scalars when K or the pointers are not aligned) and reduces with shuffles.
void gemv_rows(Context& ctx, Precision p, const void* x, const void* w, void* y, int64_t rows, int64_t K,
               int64_t J, const GemvEpilogue& ep);

// W stored [K][J] (one row per input, the projection's weight): one thread per output j walks the K
// rows, the warp reading 32 consecutive outputs' weights per row (coalesced).
void gemv_cols(Context& ctx, Precision p, const void* x, const void* w, void* y, int64_t rows, int64_t K,
               int64_t J, const GemvEpilogue& ep);

}  // namespace infer::cuda
