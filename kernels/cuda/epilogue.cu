// Bias + residual + activation epilogue and float32 <-> half conversion (epilogue.h). Feature maps
// (>= 32 elements per channel plane): planes across grid.y, packs of up to 8 bytes per thread along
// the plane; smaller planes and the conversions: one thread per element, grid-stride loops (the channel
// of element i of an NCHW tensor is (i / inner) % channels). NHWC: packs along the channels (the bias
// of a pack is contiguous), one row of C per pixel, rows across the grid-stride loop. The residual r
// (a conv + residual add, fuse_conv_residual) has y's layout: element i of r adds to element i of y.
// A per-channel PRelu (fuse_prelu) reads its channel's slope where the kernel finds the bias
// (activate_channel, common.cuh: the select GemmEpilogue applies too). The feature-map and NHWC kernels
// are instantiated per common activation (dispatch_fixed_activation) so no element pays the run-time
// switch; the NHWC one also indexes in int where the tensor allows.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/epilogue.h"

#include <algorithm>
#include <climits>
#include <string>

namespace infer::cuda {
namespace {

// Small planes (dense outputs, 1x1 maps): one thread per element, flat index.
template <class T>
__global__ void bias_activation_kernel(T* y, const T* bias, const T* r, const T* slope, int64_t total,
                                       int64_t channels, int64_t inner, DeviceActivation act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    float v = to_float(y[i]);
    if (bias) v += to_float(bias[c]);
    if (r) v += to_float(r[i]);
    y[i] = from_float<T>(activate_channel(act, v, slope, c));
  }
}

// Feature maps: planes (image, channel) across grid.y, so the channel and its bias are found once
// per plane; in a plane each thread moves packs of V elements with 32-bit indices (the flat kernel's
// int64 division per element held VGG's 224x224 epilogues to ~0.3 TB/s).
// A: the activation fixed at compile time (activate_fixed; no slope) or kGenericActivation.
template <class T, int V, int A>
__global__ void bias_activation_planes_kernel(T* y, const T* bias, const T* r, const T* slope, int64_t planes,
                                              int64_t channels, int packs, int inner, DeviceActivation act) {
  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const float b = bias ? to_float(bias[plane % channels]) : 0.f;
    const int64_t c = plane % channels;
    Pack<T, V>* row = reinterpret_cast<Pack<T, V>*>(y + plane * inner);
    const Pack<T, V>* rrow = r ? reinterpret_cast<const Pack<T, V>*>(r + plane * inner) : nullptr;
    for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < packs;
         i += static_cast<int>(gridDim.x * blockDim.x)) {
      Pack<T, V> v = row[i];
      Pack<T, V> rv;
      if (rrow) rv = rrow[i];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float f = to_float(v.v[k]);
        if (bias) f += b;
        if (rrow) f += to_float(rv.v[k]);
        if constexpr (A < 0)
          v.v[k] = from_float<T>(activate_channel(act, f, slope, c));
        else
          v.v[k] = from_float<T>(activate_fixed<A>(act, f));
      }
      row[i] = v;
    }
  }
}

template <class T, int V>
void launch_planes(Context& ctx, T* y, const T* bias, const T* r, const T* slope, int64_t planes,
                   int64_t channels, int64_t inner, DeviceActivation act) {
  const int packs = static_cast<int>(inner / V);
  const dim3 grid(std::min<unsigned>(grid_for(packs), 1024u),
                  static_cast<unsigned>(std::min<int64_t>(planes, 65535)));
  dispatch_fixed_activation(act.kind, slope == nullptr, [&](auto a) {
    bias_activation_planes_kernel<T, V, decltype(a)::value><<<grid, 256, 0, ctx.stream>>>(
        y, bias, r, slope, planes, channels, packs, static_cast<int>(inner), act);
  });
}

// NHWC: pack i of the tensor holds channels (i % packs_per_row) * V ... + V - 1 of one pixel. I: the
// index type, int where the tensor's packs (and the grid's stride past them) fit, whose modulo is a
// few instructions against int64's ~40; A: the activation fixed at compile time (activate_fixed; no
// slope) or kGenericActivation (with int64 indices only: any tensor, any epilogue).
template <class T, int V, int A, class I>
__global__ void bias_activation_nhwc_kernel(T* y, const T* bias, const T* r, const T* slope, I total_packs,
                                            int packs_per_row, DeviceActivation act) {
  Pack<T, V>* p = reinterpret_cast<Pack<T, V>*>(y);
  const Pack<T, V>* rp = reinterpret_cast<const Pack<T, V>*>(r);
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total_packs; i += I(gridDim.x) * blockDim.x) {
    const int c0 = static_cast<int>(i % packs_per_row) * V;
    Pack<T, V> v = p[i];
    Pack<T, V> rv;
    if (rp) rv = rp[i];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float f = to_float(v.v[k]);
      if (bias) f += to_float(bias[c0 + k]);
      if (rp) f += to_float(rv.v[k]);
      if constexpr (A < 0)
        v.v[k] = from_float<T>(activate_channel(act, f, slope, c0 + k));
      else
        v.v[k] = from_float<T>(activate_fixed<A>(act, f));
    }
    p[i] = v;
  }
}

template <class T, int V>
void launch_nhwc(Context& ctx, T* y, const T* bias, const T* r, const T* slope, int64_t rows, int64_t channels,
                 DeviceActivation act) {
  const int64_t total = rows * channels / V;
  const unsigned grid = grid_for(total);
  const bool small = total + int64_t(grid) * 256 < INT_MAX;  // i + the grid's stride stays in int
  const int ppr = static_cast<int>(channels / V);
  dispatch_fixed_activation(act.kind, small && slope == nullptr, [&](auto a) {
    constexpr int A = decltype(a)::value;
    if constexpr (A < 0)
      bias_activation_nhwc_kernel<T, V, A, int64_t><<<grid, 256, 0, ctx.stream>>>(y, bias, r, slope, total, ppr, act);
    else
      bias_activation_nhwc_kernel<T, V, A, int><<<grid, 256, 0, ctx.stream>>>(y, bias, r, slope, int(total), ppr, act);
  });
}

__global__ void f32_to_f16_kernel(const float* in, __half* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(in[i]);
}

__global__ void f16_to_f32_kernel(const __half* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __half2float(in[i]);
}

// The argument checks of both entry points: false when there is nothing to do (no elements, or
// neither bias, residual nor activation); an Error naming `name` for a PRelu without its slopes or
// slopes without a PRelu.
bool epilogue_to_run(const char* name, int64_t elements, const void* bias, const void* residual,
                     const Activation& act, const void* slope) {
  if (elements == 0 || (!bias && !residual && act.kind == ActivationKind::None)) return false;
  if ((act.kind == ActivationKind::PRelu) != (slope != nullptr))
    throw Error(std::string("cuda ") + name + ": a prelu epilogue needs its slopes (and only it takes them)");
  return true;
}

}  // namespace

void bias_activation(Context& ctx, Precision p, void* y, const void* bias, int64_t batch,
                     int64_t channels, int64_t inner, Activation act, const void* residual,
                     const void* slope) {
  const int64_t total = batch * channels * inner;
  if (!epilogue_to_run("bias_activation", total, bias, residual, act, slope)) return;
  const DeviceActivation a = device_activation(act);
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    T* yt = static_cast<T*>(y);
    const T* bt = static_cast<const T*>(bias);
    const T* rt = static_cast<const T*>(residual);
    const T* st = static_cast<const T*>(slope);
    if (inner < 32 || inner > INT_MAX) {
      bias_activation_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(yt, bt, rt, st, total, channels, inner, a);
      return;
    }
    const int64_t planes = batch * channels;
    switch (pack_width(sizeof(T), inner, {y, residual})) {
      case 4: launch_planes<T, 4>(ctx, yt, bt, rt, st, planes, channels, inner, a); break;
      case 2: launch_planes<T, 2>(ctx, yt, bt, rt, st, planes, channels, inner, a); break;
      default: launch_planes<T, 1>(ctx, yt, bt, rt, st, planes, channels, inner, a); break;
    }
  });
  INFER_CUDA_CHECK_LAUNCH();
}

void bias_activation_nhwc(Context& ctx, Precision p, void* y, const void* bias, int64_t rows,
                          int64_t channels, Activation act, const void* residual, const void* slope) {
  if (!epilogue_to_run("bias_activation_nhwc", rows * channels, bias, residual, act, slope)) return;
  if (channels > INT_MAX) throw Error("cuda bias_activation_nhwc: too many channels");
  const DeviceActivation a = device_activation(act);
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    T* yt = static_cast<T*>(y);
    const T* bt = static_cast<const T*>(bias);
    const T* rt = static_cast<const T*>(residual);
    const T* st = static_cast<const T*>(slope);
    switch (pack_width(sizeof(T), channels, {y, bias, residual})) {
      case 4: launch_nhwc<T, 4>(ctx, yt, bt, rt, st, rows, channels, a); break;
      case 2: launch_nhwc<T, 2>(ctx, yt, bt, rt, st, rows, channels, a); break;
      default: launch_nhwc<T, 1>(ctx, yt, bt, rt, st, rows, channels, a); break;
    }
  });
  INFER_CUDA_CHECK_LAUNCH();
}

void convert_f32_to_f16(const float* in, void* out_half, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  f32_to_f16_kernel<<<grid_for(n), 256, 0, stream>>>(in, static_cast<__half*>(out_half), n);
  INFER_CUDA_CHECK_LAUNCH();
}

void convert_f16_to_f32(const void* in_half, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  f16_to_f32_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<const __half*>(in_half), out, n);
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace infer::cuda
