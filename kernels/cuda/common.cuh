// Device-side helpers every CUDA kernel file shares: loads and stores of the session's storage type
// (float, or half under Precision::FP16) with float arithmetic in between, the fused activations,
// grid sizing, and dispatch from a run-time Precision to a kernel templated on the storage type.
// CUDA-C only (.cu files); host-side context and checks live in context.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include <cuda_fp16.h>

#include "infer/error.h"
#include "kernels/cuda/context.h"

namespace infer::cuda {

template <class T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }

template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// The activation of a fused epilogue, by value so kernels take it as a launch argument.
struct DeviceActivation {
  ActivationKind kind = ActivationKind::None;
  float alpha = 0.01f;  // LeakyRelu slope, Clip min, HardSigmoid slope, Elu alpha
  float beta = 0.f;     // Clip max, HardSigmoid offset
};
inline DeviceActivation device_activation(const Activation& a) { return {a.kind, a.alpha, a.beta}; }

// x clamped to [lo, hi] with NaN passed through (fminf/fmaxf would drop it, unlike the reference).
__device__ __forceinline__ float clamp_nan(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}

// Formulas: infer/ops.h. Computed in float for both storage types (fp16 rounds once on the store).
// Exp, Elu and Softplus use the accurate expf / expm1f / log1pf: their results are compared with the
// reference at 1e-5 relative over the whole range, where __expf's error grows with |x|.
__device__ __forceinline__ float activate(const DeviceActivation& a, float x) {
  switch (a.kind) {
    case ActivationKind::Relu: return x < 0.f ? 0.f : x;  // NaN passes through, as in the reference
    case ActivationKind::LeakyRelu: return x > 0.f ? x : a.alpha * x;
    case ActivationKind::Tanh: return tanhf(x);
    case ActivationKind::Sigmoid: return 1.f / (1.f + __expf(-x));
    case ActivationKind::Clip: return clamp_nan(x, a.alpha, a.beta);
    case ActivationKind::HardSigmoid: return clamp_nan(fmaf(a.alpha, x, a.beta), 0.f, 1.f);
    case ActivationKind::HardSwish: return x * clamp_nan(x + 3.f, 0.f, 6.f) * (1.f / 6.f);
    case ActivationKind::Silu: return x / (1.f + __expf(-x));
    case ActivationKind::Elu: return x > 0.f ? x : a.alpha * expm1f(x);
    case ActivationKind::Exp: return expf(x);
    case ActivationKind::Sqrt: return sqrtf(x);
    case ActivationKind::Neg: return -x;
    case ActivationKind::Abs: return fabsf(x);
    case ActivationKind::Softplus: return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    default: return x;
  }
}

// The activation of a fused epilogue, then (prelu) the per-channel PRelu select of the fuse_prelu pass,
// v < 0 ? slope * v : v (a select, so NaN passes as in the reference; activate() is the identity for
// ActivationKind::PRelu). The one finish every CUDA epilogue applies: GemmEpilogue (gemm_epilogue.cuh)
// with its channel's slope loaded once, the others through activate_channel below.
__device__ __forceinline__ float activate_prelu(const DeviceActivation& a, float v, bool prelu, float slope) {
  v = activate(a, v);
  return prelu && v < 0.f ? slope * v : v;
}

// activate() with the kind fixed at compile time (A = int(ActivationKind)): the same formulas without
// the run-time switch per element, which costs a memory-bound kernel its bandwidth and doubled the
// instructions of the depthwise ones (ncu, H200). Kernels templated on A are launched through
// dispatch_fixed_activation.
template <int A>
__device__ __forceinline__ float activate_fixed(DeviceActivation a, float x) {
  a.kind = static_cast<ActivationKind>(A);
  return activate(a, x);
}

// The tag of the run-time activation path (any kind, PRelu slopes, ...).
constexpr int kGenericActivation = -1;

// Host side: f(std::integral_constant<int, int(kind)>{}) for the activations common after a convolution
// or GEMM (none, ReLU, Clip / ReLU6, SiLU, HardSwish) when `fixed` (the caller's epilogue needs nothing
// per element beyond activate(): no PRelu slope, say), else f(std::integral_constant<int,
// kGenericActivation>{}): a kernel templated on the tag instantiates six versions.
template <class F>
void dispatch_fixed_activation(ActivationKind kind, bool fixed, F&& f) {
  if (fixed) {
    switch (kind) {
      case ActivationKind::None: return f(std::integral_constant<int, int(ActivationKind::None)>{});
      case ActivationKind::Relu: return f(std::integral_constant<int, int(ActivationKind::Relu)>{});
      case ActivationKind::Clip: return f(std::integral_constant<int, int(ActivationKind::Clip)>{});
      case ActivationKind::Silu: return f(std::integral_constant<int, int(ActivationKind::Silu)>{});
      case ActivationKind::HardSwish: return f(std::integral_constant<int, int(ActivationKind::HardSwish)>{});
      default: break;
    }
  }
  f(std::integral_constant<int, kGenericActivation>{});
}

// activate_prelu for an element of channel c, its slope read from `slope` (P: float or half; null
// without a per-channel PRelu): the epilogue of the kernels that find an element's channel as they go.
template <class P>
__device__ __forceinline__ float activate_channel(const DeviceActivation& a, float v, const P* slope, int64_t c) {
  return activate_prelu(a, v, slope != nullptr, slope ? to_float(slope[c]) : 0.f);
}

// The sum of v over the 32 lanes of a full warp, returned to every lane (butterfly shuffles).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Blocks of `threads` covering n items, capped so a grid-stride loop covers the rest.
inline unsigned grid_for(int64_t n, int threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > (int64_t(1) << 20)) blocks = int64_t(1) << 20;
  return static_cast<unsigned>(blocks);
}

// Launch shape for kernels whose x threads walk the `pixels` of a plane (coalesced) and whose y
// threads and blocks walk the `planes`: x rounded up to whole warps, at most 256; when a plane is
// shorter, one 256-thread block packs several planes; grid.y capped at 65535 (the kernel loops).
struct PlaneLaunch {
  dim3 grid, block;
};
inline PlaneLaunch plane_launch(int64_t pixels, int64_t planes) {
  const int tx = static_cast<int>(std::min<int64_t>(256, (pixels + 31) / 32 * 32)), ty = 256 / tx;
  return {dim3(static_cast<unsigned>((pixels + tx - 1) / tx),
               static_cast<unsigned>(std::min<int64_t>((planes + ty - 1) / ty, 65535))),
          dim3(tx, ty)};
}

// V consecutive elements moved as one 8-byte (or narrower) load or store: memory-bound kernels over
// half storage otherwise issue 2-byte accesses and reach a fraction of the bandwidth.
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// The widest V <= 8 / element size (a power of two) with `multiple` % V == 0 and every pointer given
// aligned to V elements: the pack width a kernel over rows of `multiple` elements can use.
inline int pack_width(size_t element_size, int64_t multiple, std::initializer_list<const void*> ptrs) {
  for (int v = static_cast<int>(8 / element_size); v > 1; v /= 2) {
    bool ok = multiple % v == 0;
    for (const void* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % (element_size * v) == 0;
    if (ok) return v;
  }
  return 1;
}

// Calls f(float{}) or f(__half{}) for the precision's storage type: `dispatch(p, [&](auto tag) {
// using T = decltype(tag); kernel<T><<<...>>>(...); })`.
template <class F>
void dispatch(Precision p, F&& f) {
  if (p == Precision::FP16)
    f(__half{});
  else
    f(float{});
}

}  // namespace infer::cuda
