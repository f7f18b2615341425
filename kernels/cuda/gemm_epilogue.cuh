// The one epilogue of the hand-written CUDA GEMMs (CUTLASS's Epilogue of <Mma, Epilogue>): per output
// y = prelu(act(sum + bias[c] + residual[i]), slope[c]) in float, stored once as T (float, or half).
// The kernel keeps its own thread -> output map and index math and hands the functor each element's
// channel c and flat index i in y (the residual has y's layout); every pointer may be null; a kernel
// that loads per-channel values once keeps them in a Channel. Also the host helpers that prepare a
// node's bias and PRelu slopes as float. CUDA-C only (.cu files).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <memory>
#include <string>

#include "infer/kernel.h"
#include "kernels/cuda/common.cuh"

namespace infer::cuda {

// T: the storage type of y and the residual; P: that of the per-channel bias and slope (float when a
// kernel prepared them as float, else T).
template <class T, class P = T>
struct GemmEpilogue {
  const P* bias = nullptr;      // [C]
  const P* slope = nullptr;     // [C] PRelu slopes: y < 0 ? slope[c] * y : y (after the activation)
  const T* residual = nullptr;  // y's layout (a conv2d's add_residual input); must not alias y
  DeviceActivation act;

  // Channel c's bias and slope (0 when absent), loaded once.
  struct Channel {
    float bias = 0.f, slope = 0.f;
  };
  __device__ __forceinline__ Channel channel(int64_t c) const {
    Channel ch;
    if (bias) ch.bias = to_float(bias[c]);
    if (slope) ch.slope = to_float(slope[c]);
    return ch;
  }
  // Only the slope, for a kernel whose sums already hold the bias (see finish()).
  __device__ __forceinline__ Channel slope_channel(int64_t c) const {
    Channel ch;
    if (slope) ch.slope = to_float(slope[c]);
    return ch;
  }

  // What follows the bias: v (the sum with the bias already in it, e.g. as an MMA's first addend) +
  // residual[i], the activation and the PRelu (activate_prelu, common.cuh).
  __device__ __forceinline__ float finish(float v, const Channel& ch, int64_t i) const {
    if (residual) v += to_float(residual[i]);
    return activate_prelu(act, v, slope != nullptr, ch.slope);
  }

  // The element's value from its plain sum: bias added first (0 when absent), then finish().
  __device__ __forceinline__ float operator()(float sum, const Channel& ch, int64_t i) const {
    return finish(sum + ch.bias, ch, i);
  }

  // y[i] from the plain sum of channel ch.
  __device__ __forceinline__ void store(T* y, int64_t i, const Channel& ch, float sum) const {
    y[i] = from_float<T>((*this)(sum, ch, i));
  }

  // y[i], y[i + 1] (channels c0, c0 + 1 of one pixel) as one 2-element store; y + i aligned to it.
  __device__ __forceinline__ void store_pair(T* y, int64_t i, const Channel& c0, const Channel& c1, float s0,
                                             float s1) const {
    const float v0 = (*this)(s0, c0, i), v1 = (*this)(s1, c1, i + 1);
    if constexpr (sizeof(T) == 2)
      *reinterpret_cast<__half2*>(y + i) = __floats2half2_rn(v0, v1);
    else
      *reinterpret_cast<float2*>(y + i) = make_float2(v0, v1);
  }

  // operator() with the activation known at compile time: A = int(ActivationKind) when the kernel was
  // launched through dispatch_fixed_epilogue for an epilogue of bias + that activation only (no
  // residual, no PRelu slope), kGenericEpilogue for any other (activate_fixed, common.cuh).
  template <int A>
  __device__ __forceinline__ float apply(float sum, const Channel& ch, int64_t i) const {
    if constexpr (A < 0)
      return (*this)(sum, ch, i);
    else
      return activate_fixed<A>(act, sum + ch.bias);
  }
};

// The generic epilogue's tag for GemmEpilogue::apply (any residual, slope or activation).
constexpr int kGenericEpilogue = kGenericActivation;

// Host side: f(std::integral_constant<int, A>{}) with A = int(ep.act.kind) when the epilogue is bias +
// one of dispatch_fixed_activation's activations and nothing else, else with kGenericEpilogue.
template <class T, class P, class F>
void dispatch_fixed_epilogue(const GemmEpilogue<T, P>& ep, F&& f) {
  dispatch_fixed_activation(ep.act.kind, !ep.residual && !ep.slope, static_cast<F&&>(f));
}

// Host side: the epilogue of a node's fused bias (may be null), activation, residual and PRelu slopes.
template <class T, class P = T>
inline GemmEpilogue<T, P> gemm_epilogue(const void* bias, const Activation& act, const void* residual = nullptr,
                                        const void* slope = nullptr) {
  GemmEpilogue<T, P> ep;
  ep.bias = static_cast<const P*>(bias);
  ep.slope = static_cast<const P*>(slope);
  ep.residual = static_cast<const T*>(residual);
  ep.act = device_activation(act);
  return ep;
}

// Host side, for the kernels that prepare their per-channel operands once as float (GemmEpilogue<T,
// float>): the node's bias (input 2) and per-channel PRelu slopes (its last input, with
// ActivationKind::PRelu) uploaded as float [channels]; null where the node has none, an Error naming
// `variant` where one is not a constant.
inline std::unique_ptr<DeviceArray> float_operand(const NodeDesc& node, size_t input, int64_t channels,
                                                  const char* what, const char* variant) {
  if (node.constants.size() <= input || !node.constants[input])
    throw Error(std::string("cuda ") + variant + ": the " + what + " must be a constant");
  return upload(node.constants[input], static_cast<size_t>(channels), Precision::FP32);
}
inline std::unique_ptr<DeviceArray> float_bias(const NodeDesc& node, int64_t channels, const char* variant) {
  return node.input_shapes.size() >= 3 ? float_operand(node, 2, channels, "bias", variant) : nullptr;
}
inline std::unique_ptr<DeviceArray> float_slope(const NodeDesc& node, int64_t channels, const char* variant) {
  if (fused_activation(node.params).kind != ActivationKind::PRelu) return nullptr;
  return float_operand(node, node.input_shapes.size() - 1, channels, "prelu slope", variant);
}
inline const void* data_or_null(const std::unique_ptr<DeviceArray>& a) { return a ? a->data() : nullptr; }

}  // namespace infer::cuda
