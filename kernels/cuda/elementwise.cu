// CUDA element-wise "direct" kernels in float or half storage with float arithmetic: activation (none =
// device copy), add (equal shapes + fused activation), inference batchnorm over axis 1 (y = act(a*x + b),
// a = scale/sqrt(var+eps), b = bias - mean*a, recomputed per pack from the cached per-channel constants).
// Grid-stride; 16-byte packs (4 floats / 8 halves, llm.c's Packed128) when all pointers are aligned, else
// scalar. Each thread reads an index before writing the same index, so in place (y == x) is safe.
#include <cstdint>
#include <string>

#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

// 16 bytes of T, loaded and stored as one 128-bit access.
template <class T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  Pack<T> r;
  *reinterpret_cast<int4*>(&r) = *reinterpret_cast<const int4*>(p);
  return r;
}

template <class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& r) {
  *reinterpret_cast<int4*>(p) = *reinterpret_cast<const int4*>(&r);
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// y = act(x), and y = act(a + b): the per-element functions of map_kernel.
struct ActivationFn {
  DeviceActivation act;
  __device__ float operator()(float a, float) const { return activate(act, a); }
};
struct AddFn {
  DeviceActivation act;
  __device__ float operator()(float a, float b) const { return activate(act, a + b); }
};

// y[i] = f(a[i], b[i]) for i < n (b may be null: f sees 0). kVec: packs of 16 bytes while whole
// packs remain, then the < kSize-element tail one element per thread; needs a, b, y 16-byte aligned.
template <class T, bool kVec, class F>
__global__ void map_kernel(const T* a, const T* b, T* y, int64_t n, F f) {
  const int64_t start = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  int64_t done = 0;
  if constexpr (kVec) {
    constexpr int V = Pack<T>::kSize;
    const int64_t packs = n / V;
    for (int64_t p = start; p < packs; p += step) {
      const Pack<T> pa = load_pack(a + p * V);
      Pack<T> pb;
      if (b) pb = load_pack(b + p * V);
      Pack<T> out;
#pragma unroll
      for (int k = 0; k < V; ++k)
        out.v[k] = from_float<T>(f(to_float(pa.v[k]), b ? to_float(pb.v[k]) : 0.f));
      store_pack(y + p * V, out);
    }
    done = packs * V;
  }
  for (int64_t i = done + start; i < n; i += step)
    y[i] = from_float<T>(f(to_float(a[i]), b ? to_float(b[i]) : 0.f));
}

template <class F>
void launch_map(Context& ctx, Precision p, const float* a, const float* b, float* y, int64_t n, F f) {
  const bool vec = aligned16(a) && aligned16(y) && (!b || aligned16(b));
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    const T* ta = reinterpret_cast<const T*>(a);
    const T* tb = reinterpret_cast<const T*>(b);
    T* ty = reinterpret_cast<T*>(y);
    if (vec && n >= Pack<T>::kSize)
      map_kernel<T, true><<<grid_for(n / Pack<T>::kSize), 256, 0, ctx.stream>>>(ta, tb, ty, n, f);
    else
      map_kernel<T, false><<<grid_for(n), 256, 0, ctx.stream>>>(ta, tb, ty, n, f);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

// y = act(a_c * x + b_c) with c = (i / inner) % C. kVec (inner % kSize == 0, pointers aligned): a
// pack never straddles two channels, so its channel and coefficients are computed once.
template <class T, bool kVec>
__global__ void batchnorm_kernel(const T* x, const T* scale, const T* bias, const T* mean,
                                 const T* var, T* y, int64_t n, int64_t C, int64_t inner, float eps,
                                 DeviceActivation act) {
  constexpr int V = kVec ? Pack<T>::kSize : 1;
  const int64_t units = n / V;  // n % V == 0 when kVec, since inner % V == 0
  for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < units;
       u += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = u * V;
    const int64_t c = (i / inner) % C;
    // float sqrtf and division are IEEE-rounded (no fast math), keeping fp32 within ~1 ulp of the
    // CPU kernel's double-computed coefficients.
    const float s = to_float(scale[c]);
    const float inv_std = 1.f / sqrtf(to_float(var[c]) + eps);
    const float a = s * inv_std;
    const float b = to_float(bias[c]) - to_float(mean[c]) * a;
    if constexpr (kVec) {
      const Pack<T> px = load_pack(x + i);
      Pack<T> out;
#pragma unroll
      for (int k = 0; k < V; ++k) out.v[k] = from_float<T>(activate(act, fmaf(a, to_float(px.v[k]), b)));
      store_pack(y + i, out);
    } else {
      y[i] = from_float<T>(activate(act, fmaf(a, to_float(x[i]), b)));
    }
  }
}

void activation_run(const KernelCall& call) {
  const Activation act = std::get<ActivationParams>(call.node.params).activation;
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  if (n == 0) return;
  Context& ctx = context_of(call);
  if (act.kind == ActivationKind::None) {  // identity: a copy, or nothing in place
    if (call.inputs[0] != call.outputs[0])
      INFER_CUDA_CHECK(cudaMemcpyAsync(call.outputs[0], call.inputs[0],
                                       size_t(n) * element_size(call.node.precision),
                                       cudaMemcpyDeviceToDevice, ctx.stream));
    return;
  }
  launch_map(ctx, call.node.precision, call.inputs[0], nullptr, call.outputs[0], n,
             ActivationFn{device_activation(act)});
}

void add_run(const KernelCall& call) {
  const Activation act = std::get<AddParams>(call.node.params).activation;
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  if (n == 0) return;
  launch_map(context_of(call), call.node.precision, call.inputs[0], call.inputs[1], call.outputs[0], n,
             AddFn{device_activation(act)});
}

void batchnorm_run(const KernelCall& call) {
  const auto& p = std::get<BatchNormParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  const int64_t n = shape_numel(s);
  if (n == 0) return;
  const int64_t C = s[1], inner = n / (s[0] * C);
  Context& ctx = context_of(call);
  const float* const* in = call.inputs.data();
  const bool aligned = aligned16(in[0]) && aligned16(call.outputs[0]);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const auto t = [](const float* q) { return reinterpret_cast<const T*>(q); };
    T* y = reinterpret_cast<T*>(call.outputs[0]);
    const DeviceActivation act = device_activation(p.activation);
    if (aligned && inner % Pack<T>::kSize == 0)
      batchnorm_kernel<T, true><<<grid_for(n / Pack<T>::kSize), 256, 0, ctx.stream>>>(
          t(in[0]), t(in[1]), t(in[2]), t(in[3]), t(in[4]), y, n, C, inner, p.epsilon, act);
    else
      batchnorm_kernel<T, false><<<grid_for(n), 256, 0, ctx.stream>>>(
          t(in[0]), t(in[1]), t(in[2]), t(in[3]), t(in[4]), y, n, C, inner, p.epsilon, act);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(elementwise) {
  // activation and add go element by element (add: equal shapes and layouts), so either layout;
  // batchnorm is per channel: NCHW only.
  const std::vector<Layout> any_layout{Layout::NCHW, Layout::NHWC};
  registry.add("cuda", {
      {.op = "activation", .name = "direct", .priority = 10, .layouts = any_layout,
       .run = activation_run},
      {.op = "add", .name = "direct", .priority = 10, .layouts = any_layout, .run = add_run},
      {.op = "batchnorm", .name = "direct", .priority = 10, .run = batchnorm_run},
  });
}

}  // namespace infer::cuda
