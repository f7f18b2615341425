// CUDA dense (x [N,F_in], weight [F_out,F_in] as PyTorch, optional bias [F_out], fused activation), in
// the session precision, float sums. "gemm": one cuBLAS GEMM y [N,F_out] = x W^T (cuda::gemm_x_wt: the
// weight is used as stored), then the shared bias + activation epilogue with one "channel" per output
// feature (inner = 1); F_in = 0 writes zeros (then bias + activation). "gemv": batch <= 4, where the
// layer is a stream of its weights (VGG-16's fc1: 205 MB in fp16 for one 4096-vector): one warp per
// output feature reads its weight row once, in 16-byte vectors, dots it with every input row (small,
// served by L1 / L2), reduces across the warp with shuffles and applies bias and activation itself.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <variant>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/gemm.h"

namespace infer::cuda {
namespace {

// cuBLAS takes int dimensions.
bool dense_applicable(const NodeDesc& node) {
  return node.input_shapes[0][1] <= INT_MAX && node.input_shapes[1][0] <= INT_MAX;
}

void run_dense(const KernelCall& call) {
  const size_t n_in = call.inputs.size();
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const int64_t N = xs[0], FI = xs[1], FO = ws[0];

  Context& ctx = context_of(call);
  const Precision p = call.node.precision;
  if (N == 0 || FO == 0) return;
  gemm_x_wt(ctx, p, call.inputs[0], call.inputs[1], call.outputs[0], N, FI, FO);
  bias_activation(ctx, p, call.outputs[0], n_in == 3 ? call.inputs[2] : nullptr, N, FO, 1,
                  fused_activation(call.node.params));
}

constexpr int kGemvMaxRows = 4;
constexpr int kGemvWarps = 8;  // per block

template <class T, int R, int V>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, T* __restrict__ y,
                int64_t FI, int64_t FO, DeviceActivation act) {
  const int lane = threadIdx.x & 31;
  for (int64_t o = int64_t(blockIdx.x) * kGemvWarps + threadIdx.x / 32; o < FO; o += int64_t(gridDim.x) * kGemvWarps) {
    const T* wrow = w + o * FI;
    float acc[R] = {};
#pragma unroll 4
    for (int64_t i = int64_t(lane) * V; i < FI; i += 32 * V) {
      const Pack<T, V> wv = *reinterpret_cast<const Pack<T, V>*>(wrow + i);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const Pack<T, V> xv = *reinterpret_cast<const Pack<T, V>*>(x + r * FI + i);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[r] = fmaf(to_float(wv.v[k]), to_float(xv.v[k]), acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = acc[r];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) y[r * FO + o] = from_float<T>(activate(act, v + (bias ? to_float(bias[o]) : 0.f)));
    }
  }
}

bool gemv_applicable(const NodeDesc& node) {
  return node.input_shapes[0][0] <= kGemvMaxRows && dense_applicable(node);
}

template <class T, int R>
void launch_gemv(const KernelCall& call, int64_t FI, int64_t FO, cudaStream_t stream) {
  const T* x = reinterpret_cast<const T*>(call.inputs[0]);
  const T* w = reinterpret_cast<const T*>(call.inputs[1]);
  const T* b = call.inputs.size() == 3 ? reinterpret_cast<const T*>(call.inputs[2]) : nullptr;
  T* y = reinterpret_cast<T*>(call.outputs[0]);
  const DeviceActivation act = device_activation(fused_activation(call.node.params));
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((FO + kGemvWarps - 1) / kGemvWarps, 1 << 20));
  constexpr int V = 16 / sizeof(T);  // 16-byte vectors when every row starts 16-byte aligned
  const bool vec = FI % V == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (vec)
    gemv_kernel<T, R, V><<<blocks, kGemvWarps * 32, 0, stream>>>(x, w, b, y, FI, FO, act);
  else
    gemv_kernel<T, R, 1><<<blocks, kGemvWarps * 32, 0, stream>>>(x, w, b, y, FI, FO, act);
}

void run_gemv(const KernelCall& call) {
  const int64_t N = call.node.input_shapes[0][0], FI = call.node.input_shapes[0][1];
  const int64_t FO = call.node.input_shapes[1][0];
  if (N > kGemvMaxRows) throw Error("cuda dense.gemv: at most 4 rows");
  if (N == 0 || FO == 0) return;
  Context& ctx = context_of(call);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    switch (N) {
      case 1: launch_gemv<T, 1>(call, FI, FO, ctx.stream); break;
      case 2: launch_gemv<T, 2>(call, FI, FO, ctx.stream); break;
      case 3: launch_gemv<T, 3>(call, FI, FO, ctx.stream); break;
      default: launch_gemv<T, 4>(call, FI, FO, ctx.stream); break;
    }
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

void register_dense(KernelRegistry& registry) {
  registry.add("cuda", {
      {.op = "dense", .name = "gemm", .priority = 10, .applicable = dense_applicable,
       .run = run_dense},
      {.op = "dense", .name = "gemv", .priority = 20, .applicable = gemv_applicable, .run = run_gemv},
  });
}

}  // namespace infer::cuda
