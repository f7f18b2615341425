// Device-side helpers every CUDA kernel file shares: loads and stores of the session's storage type
// (float, or half under Precision::FP16) with float arithmetic in between, the fused activations,
// grid sizing, and dispatch from a run-time Precision to a kernel templated on the storage type.
// CUDA-C only (.cu files); host-side context and checks live in context.h.
#pragma once

#include <cstdint>

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
  float alpha = 0.01f;
};
inline DeviceActivation device_activation(const Activation& a) { return {a.kind, a.alpha}; }

__device__ __forceinline__ float activate(const DeviceActivation& a, float x) {
  switch (a.kind) {
    case ActivationKind::Relu: return x < 0.f ? 0.f : x;  // NaN passes through, as in the reference
    case ActivationKind::LeakyRelu: return x > 0.f ? x : a.alpha * x;
    case ActivationKind::Tanh: return tanhf(x);
    case ActivationKind::Sigmoid: return 1.f / (1.f + __expf(-x));
    default: return x;
  }
}

// Blocks of `threads` covering n items, capped so a grid-stride loop covers the rest.
inline unsigned grid_for(int64_t n, int threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > (int64_t(1) << 20)) blocks = int64_t(1) << 20;
  return static_cast<unsigned>(blocks);
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
