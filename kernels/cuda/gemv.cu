// The batch <= 4 matrix-vector kernels of gemv.h. gemv_rows: one warp per output, 16-byte weight
// vectors streamed past L1, 8 loads in flight per lane, shuffle reduction. gemv_cols: one thread per output, a loop
// over the K weight rows (coalesced across the warp), 4 rows unrolled. Both hold the (at most 4) input
// rows' sums in float registers and apply the GEMMs' epilogue (gemm_epilogue.cuh) in the one store.
#include "kernels/cuda/gemv.h"

#include <algorithm>
#include <cstdint>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_tiles.cuh"

namespace infer::cuda {
namespace {

constexpr int kWarps = 8;  // per block
constexpr int kBatch = 8;  // gemv_rows: 16-byte weight loads in flight per lane


template <class T, int R, int V>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_rows_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t K, int64_t J,
                     GemmEpilogue<T> ep, int64_t bias_div, int64_t bias_mod) {
  const int lane = threadIdx.x & 31;
  for (int64_t o = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; o < J; o += int64_t(gridDim.x) * kWarps) {
    const T* wrow = w + o * K;
    float acc[R] = {};
    const auto dot = [&](const Pack<T, V>& wv, int64_t i) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const Pack<T, V> xv = *reinterpret_cast<const Pack<T, V>*>(x + r * K + i);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[r] = fmaf(to_float(wv.v[k]), to_float(xv.v[k]), acc[r]);
      }
    };
    int64_t i = int64_t(lane) * V;
    if constexpr (V > 1) {
      // kBatch streamed 16-byte loads issued before the first of them is used
      for (; i + (kBatch - 1) * 32 * V < K; i += kBatch * 32 * V) {
        Pack<T, V> wv[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const uint4 raw = load_stream16(wrow + i + u * 32 * V);
          wv[u] = *reinterpret_cast<const Pack<T, V>*>(&raw);
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) dot(wv[u], i + u * 32 * V);
      }
    }
    for (; i < K; i += 32 * V) dot(*reinterpret_cast<const Pack<T, V>*>(wrow + i), i);
    const auto ch = ep.channel((o / bias_div) % bias_mod);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = warp_sum(acc[r]);
      if (lane == 0) ep.store(y, r * J + o, ch, v);
    }
  }
}

template <class T, int R>
__global__ void __launch_bounds__(256)
    gemv_cols_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t K, int64_t J,
                     GemmEpilogue<T> ep, int64_t bias_div, int64_t bias_mod) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < J; j += int64_t(gridDim.x) * blockDim.x) {
    float acc[R] = {};
#pragma unroll 4
    for (int64_t c = 0; c < K; ++c) {
      const float wv = to_float(w[c * J + j]);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = fmaf(to_float(x[r * K + c]), wv, acc[r]);
    }
    const auto ch = ep.channel((j / bias_div) % bias_mod);
#pragma unroll
    for (int r = 0; r < R; ++r) ep.store(y, r * J + j, ch, acc[r]);
  }
}

// Calls f(integral_constant<int, rows>) for rows 1..4.
template <class F>
void with_rows(int64_t rows, F&& f) {
  switch (rows) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    default: throw Error("cuda gemv: 1 to 4 rows, got " + std::to_string(rows));
  }
}

}  // namespace

void gemv_rows(Context& ctx, Precision p, const void* x, const void* w, void* y, int64_t rows, int64_t K,
               int64_t J, const GemvEpilogue& ep) {
  if (rows == 0 || J == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((J + kWarps - 1) / kWarps, 1 << 20));
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    const auto et = gemm_epilogue<T>(ep.bias, ep.act, nullptr, ep.slope);
    T* yt = static_cast<T*>(y);
    constexpr int V = 16 / sizeof(T);  // 16-byte vectors when every row starts 16-byte aligned
    const bool vec = K % V == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
    with_rows(rows, [&](auto r) {
      constexpr int R = decltype(r)::value;
      if (vec)
        gemv_rows_kernel<T, R, V><<<blocks, kWarps * 32, 0, ctx.stream>>>(xt, wt, yt, K, J, et, ep.bias_div,
                                                                           ep.bias_mod);
      else
        gemv_rows_kernel<T, R, 1><<<blocks, kWarps * 32, 0, ctx.stream>>>(xt, wt, yt, K, J, et, ep.bias_div,
                                                                           ep.bias_mod);
    });
  });
  INFER_CUDA_CHECK_LAUNCH();
}

void gemv_cols(Context& ctx, Precision p, const void* x, const void* w, void* y, int64_t rows, int64_t K,
               int64_t J, const GemvEpilogue& ep) {
  if (rows == 0 || J == 0) return;
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    with_rows(rows, [&](auto r) {
      constexpr int R = decltype(r)::value;
      gemv_cols_kernel<T, R><<<grid_for(J), 256, 0, ctx.stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), K, J,
          gemm_epilogue<T>(ep.bias, ep.act, nullptr, ep.slope), ep.bias_div, ep.bias_mod);
    });
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace infer::cuda
