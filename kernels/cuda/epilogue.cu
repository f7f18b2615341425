// Bias + activation epilogue and float32 <-> half conversion (epilogue.h). One thread per element,
// grid-stride loops; the channel of element i of an NCHW tensor is (i / inner) % channels.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/epilogue.h"

namespace infer::cuda {
namespace {

template <class T>
__global__ void bias_activation_kernel(T* y, const T* bias, int64_t total, int64_t channels,
                                       int64_t inner, DeviceActivation act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = to_float(y[i]);
    if (bias) v += to_float(bias[(i / inner) % channels]);
    y[i] = from_float<T>(activate(act, v));
  }
}

__global__ void f32_to_f16_kernel(const float* in, __half* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(in[i]);
}

__global__ void f16_to_f32_kernel(const __half* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __half2float(in[i]);
}

}  // namespace

void bias_activation(Context& ctx, Precision p, void* y, const void* bias, int64_t batch,
                     int64_t channels, int64_t inner, Activation act) {
  const int64_t total = batch * channels * inner;
  if (total == 0 || (!bias && act.kind == ActivationKind::None)) return;
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    bias_activation_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        static_cast<T*>(y), static_cast<const T*>(bias), total, channels, inner, device_activation(act));
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
