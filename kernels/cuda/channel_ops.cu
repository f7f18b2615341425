// CUDA channel_shuffle and slice "direct" (NCHW), float or half storage (copies, never rounded): one
// thread per output element, grid-stride over int64 indices, adjacent threads on adjacent elements of
// a plane / row so loads and stores coalesce. channel_shuffle: output channel j*g + i reads input
// channel i*(C/g) + j. slice: x viewed as [outer, dim, inner], output [outer, end-start, inner].
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

template <class T>
__global__ void channel_shuffle_kernel(const T* x, T* y, int64_t total, int64_t C, int64_t HW,
                                       int64_t g) {
  const int64_t per = C / g;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total;
       o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = o % HW, nc = o / HW, n = nc / C, c = nc % C;
    y[o] = x[(n * C + (c % g) * per + c / g) * HW + k];
  }
}

template <class T>
__global__ void slice_kernel(const T* x, T* y, int64_t total, int64_t run, int64_t dim_inner,
                             int64_t offset) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total;
       o += int64_t(gridDim.x) * blockDim.x)
    y[o] = x[(o / run) * dim_inner + offset + o % run];
}

void channel_shuffle_run(const KernelCall& call) {
  const Shape& s = call.node.input_shapes[0];
  const int64_t total = shape_numel(s);
  if (total == 0) return;
  const int64_t g = std::get<ChannelShuffleParams>(call.node.params).groups;
  Context& ctx = context_of(call);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    channel_shuffle_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        reinterpret_cast<const T*>(call.inputs[0]), reinterpret_cast<T*>(call.outputs[0]), total, s[1],
        s[2] * s[3], g);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

void slice_run(const KernelCall& call) {
  const auto& p = std::get<SliceParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  const int64_t total = shape_numel(call.node.output_shapes[0]);
  if (total == 0) return;
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(p.axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t dim = s[static_cast<size_t>(p.axis)], run = (p.end - p.start) * inner;
  Context& ctx = context_of(call);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    slice_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        reinterpret_cast<const T*>(call.inputs[0]), reinterpret_cast<T*>(call.outputs[0]), total, run,
        dim * inner, p.start * inner);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(channel_ops) {
  registry.add("cuda", {
      {.op = "channel_shuffle", .name = "direct", .priority = 10, .run = channel_shuffle_run},
      {.op = "slice", .name = "direct", .priority = 10, .run = slice_run},
  });
}

}  // namespace infer::cuda
