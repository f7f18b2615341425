// CUDA conv2d "depthwise" (groups == C_in > 1, weight [M*C_in,1,KH,KW], output channel co reads input
// channel co/M; any kernel, stride, padding, dilation), NCHW and NHWC, float or half storage with float
// sums, bias + activation fused. A direct convolution: a GEMM with K = KH*KW (9) wastes the machine.
// NCHW: one thread per output element, consecutive threads along ox (coalesced rows, weights a
// broadcast). NHWC: one thread per (pixel, vector of V channels), V = 2 (float) or 4 (half) when
// M == 1 and C allows, so each tap is one 8-byte load of V adjacent channels; else one channel.
#include <cstdint>
#include <variant>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

struct DwArgs {
  int64_t N, C, H, W, CO, HO, WO, KH, KW, M;  // M = C_out / C_in, the channel multiplier
  int64_t sh, sw, pt, pl, dh, dw;
  DeviceActivation act;
};

DwArgs dw_args(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  const Shape &x = call.node.input_shapes[0], &w = call.node.input_shapes[1];
  const Shape& y = call.node.output_shapes[0];
  return {x[0], x[1], x[2], x[3], w[0], y[2], y[3], w[2], w[3], w[0] / x[1],
          p.stride_h, p.stride_w, p.pad.top, p.pad.left, p.dilation_h, p.dilation_w,
          device_activation(fused_activation(call.node.params))};
}

template <class T>
__global__ void depthwise_nchw_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                      const T* __restrict__ bias, T* __restrict__ y, DwArgs a,
                                      int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % a.WO;
    const int64_t oy = (i / a.WO) % a.HO;
    const int64_t plane = i / (a.WO * a.HO);  // n * CO + co
    const int64_t co = plane % a.CO, n = plane / a.CO;
    const T* xp = x + (n * a.C + co / a.M) * a.H * a.W;
    const T* wp = w + co * a.KH * a.KW;
    const int64_t iy0 = oy * a.sh - a.pt, ix0 = ox * a.sw - a.pl;
    float acc = bias ? to_float(bias[co]) : 0.f;
    for (int64_t ky = 0; ky < a.KH; ++ky) {
      const int64_t iy = iy0 + ky * a.dh;
      if (iy < 0 || iy >= a.H) continue;
      for (int64_t kx = 0; kx < a.KW; ++kx) {
        const int64_t ix = ix0 + kx * a.dw;
        if (ix < 0 || ix >= a.W) continue;
        acc += to_float(wp[ky * a.KW + kx]) * to_float(xp[iy * a.W + ix]);
      }
    }
    y[i] = from_float<T>(activate(a.act, acc));
  }
}

// V output channels per thread; V > 1 only with M == 1 (input channel = output channel) and C % V == 0.
template <class T, int V>
__global__ void depthwise_nhwc_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                      const T* __restrict__ bias, T* __restrict__ y, DwArgs a,
                                      int64_t total) {
  const int64_t vecs = a.CO / V;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t co = (i % vecs) * V;
    const int64_t pix = i / vecs;  // (n * HO + oy) * WO + ox
    const int64_t ox = pix % a.WO, oy = (pix / a.WO) % a.HO, n = pix / (a.WO * a.HO);
    const int64_t ci = co / a.M;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = bias ? to_float(bias[co + j]) : 0.f;
    const int64_t iy0 = oy * a.sh - a.pt, ix0 = ox * a.sw - a.pl;
    for (int64_t ky = 0; ky < a.KH; ++ky) {
      const int64_t iy = iy0 + ky * a.dh;
      if (iy < 0 || iy >= a.H) continue;
      for (int64_t kx = 0; kx < a.KW; ++kx) {
        const int64_t ix = ix0 + kx * a.dw;
        if (ix < 0 || ix >= a.W) continue;
        const int64_t tap = ky * a.KW + kx;
        const Pack<T, V> v =
            *reinterpret_cast<const Pack<T, V>*>(x + ((n * a.H + iy) * a.W + ix) * a.C + ci);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] += to_float(w[(co + j) * a.KH * a.KW + tap]) * to_float(v.v[j]);
      }
    }
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(activate(a.act, acc[j]));
    *reinterpret_cast<Pack<T, V>*>(y + pix * a.CO + co) = out;
  }
}

void run_depthwise(const KernelCall& call) {
  const DwArgs a = dw_args(call);
  Context& ctx = context_of(call);
  // The pointers are typed float in KernelCall; under fp16 they hold half (the session precision).
  const void* xv = call.inputs[0];
  const void* wv = call.inputs[1];
  const void* bias = call.inputs.size() == 3 ? call.inputs[2] : nullptr;
  void* yv = call.outputs[0];
  const int64_t outputs = a.N * a.CO * a.HO * a.WO;
  if (outputs == 0) return;
  const bool nhwc = call.node.layout == Layout::NHWC;
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(xv);
    const T* w = static_cast<const T*>(wv);
    const T* b = static_cast<const T*>(bias);
    T* y = static_cast<T*>(yv);
    if (!nhwc) {
      depthwise_nchw_kernel<T><<<grid_for(outputs), 256, 0, ctx.stream>>>(x, w, b, y, a, outputs);
      return;
    }
    const int v = a.M == 1 ? pack_width(sizeof(T), a.C, {x, y}) : 1;
    const int64_t total = outputs / v;
    if (v == 4)
      depthwise_nhwc_kernel<T, 4><<<grid_for(total), 256, 0, ctx.stream>>>(x, w, b, y, a, total);
    else if (v == 2)
      depthwise_nhwc_kernel<T, 2><<<grid_for(total), 256, 0, ctx.stream>>>(x, w, b, y, a, total);
    else
      depthwise_nhwc_kernel<T, 1><<<grid_for(total), 256, 0, ctx.stream>>>(x, w, b, y, a, total);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(conv2d_depthwise) {
  registry.add("cuda", {
      {.op = "conv2d", .name = "depthwise", .priority = 20, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = conv2d_depthwise, .run = run_depthwise},
  });
}

}  // namespace infer::cuda
