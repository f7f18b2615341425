// CUDA PRelu, "direct", float or half storage with float arithmetic, either layout: y = x < 0 ?
// slope[c] * x : x (a select, so NaN passes), the slope a constant [C] or [1] in the same storage.
// One thread per element, grid-stride; its channel c is (i / inner) % C in NCHW, i % C in NHWC
// (4-D). Each thread reads index i before writing it, so in place (y == x) is safe.
#include <cstdint>

#include "infer/kernel.h"
#include "kernels/cuda/common.cuh"

namespace infer::cuda {
namespace {

// per_channel == false: slope[0] for every element. nhwc: the channel is the fastest index.
template <class T>
__global__ void prelu_kernel(const T* x, const T* slope, T* y, int64_t n, int64_t C, int64_t inner,
                             bool per_channel, bool nhwc) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = !per_channel ? 0 : nhwc ? i % C : (i / inner) % C;
    const float v = to_float(x[i]), a = to_float(slope[c]);
    y[i] = from_float<T>(v < 0.f ? a * v : v);
  }
}

void prelu_run(const KernelCall& call) {
  const Shape& s = call.node.input_shapes[0];
  const int64_t n = shape_numel(s);
  if (n == 0) return;
  const int64_t C = s[1], inner = n / (s[0] * C);
  const bool per_channel = shape_numel(call.node.input_shapes[1]) != 1;
  const bool nhwc = call.node.layout == Layout::NHWC && s.size() == 4;
  Context& ctx = context_of(call);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    prelu_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(
        reinterpret_cast<const T*>(call.inputs[0]), reinterpret_cast<const T*>(call.inputs[1]),
        reinterpret_cast<T*>(call.outputs[0]), n, C, inner, per_channel, nhwc);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(prelu) {
  registry.add("cuda", {
      {.op = "prelu", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .run = prelu_run},
  });
}

}  // namespace infer::cuda
