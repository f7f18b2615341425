// CUDA instance_norm "direct" (NCHW): one 256-thread block per (n, c) plane (grid-stride over planes),
// float or half storage with float accumulation. Three sweeps over the plane: the sum (block
// reduction: warp shuffles, then one value per warp in shared memory) gives the mean; the sum of
// squared deviations gives the biased variance (two passes: no cancellation); then
// y = act((x - mean) * a + bias) with a = scale / sqrt(var + eps). In place is safe: every
// read of a plane happens before the block's barrier that precedes its writes.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

constexpr int kThreads = 256;

// The sum of v over the block, returned to every thread. `shared` holds kThreads / 32 floats; the
// leading barrier lets a caller reuse it across calls.
__device__ float block_sum(float v, float* shared) {
  v = warp_sum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) total += shared[w];
  return total;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    instance_norm_kernel(const T* x, const T* scale, const T* bias, T* y, int64_t planes, int64_t C,
                         int64_t inner, float eps, DeviceActivation act) {
  __shared__ float shared[kThreads / 32];
  for (int64_t nc = blockIdx.x; nc < planes; nc += gridDim.x) {
    const T* xp = x + nc * inner;
    T* yp = y + nc * inner;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < inner; i += kThreads) s += to_float(xp[i]);
    const float mean = block_sum(s, shared) / float(inner);
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < inner; i += kThreads) {
      const float d = to_float(xp[i]) - mean;
      q = fmaf(d, d, q);
    }
    const float var = block_sum(q, shared) / float(inner);
    const int64_t c = nc % C;
    const float a = to_float(scale[c]) / sqrtf(var + eps);
    const float b = to_float(bias[c]);
    for (int64_t i = threadIdx.x; i < inner; i += kThreads)  // (x - mean) first: no cancellation
      yp[i] = from_float<T>(activate(act, fmaf(a, to_float(xp[i]) - mean, b)));
    __syncthreads();  // the next plane's block_sum reuses `shared`
  }
}

void instance_norm_run(const KernelCall& call) {
  const auto& p = std::get<InstanceNormParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  const int64_t planes = s[0] * s[1];
  if (planes == 0) return;
  const int64_t inner = shape_numel(s) / planes;
  if (inner == 0) return;
  Context& ctx = context_of(call);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(planes, int64_t(1) << 20));
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const auto t = [](const float* q) { return reinterpret_cast<const T*>(q); };
    instance_norm_kernel<T><<<blocks, kThreads, 0, ctx.stream>>>(
        t(call.inputs[0]), t(call.inputs[1]), t(call.inputs[2]), reinterpret_cast<T*>(call.outputs[0]),
        planes, s[1], inner, p.epsilon, device_activation(p.activation));
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(instance_norm) {
  registry.add("cuda", {{.op = "instance_norm", .name = "direct", .priority = 10,
                         .run = instance_norm_run}});
}

}  // namespace infer::cuda
