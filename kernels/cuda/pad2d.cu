// CUDA pad2d "direct": constant / reflect / edge padding of a 4-D activation, float or half storage
// (a copy: values are moved, never rounded). One thread per output element, grid-stride over 64-bit
// indices; NCHW (adjacent threads take adjacent output columns) or NHWC (adjacent channels), so the
// stores are coalesced in both. Each thread maps its row and column back into the input by the mode.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

struct PadGeometry {
  int64_t C, H, W, HO, WO;
  int top, left;
  int mode;      // PadMode
  float value;   // Constant mode's fill
};

// The input index that index i (input coordinates) reads along an axis of `size`; -1: the fill.
// Reflect pads are < size (shape rule), so one mirror suffices.
__device__ __forceinline__ int64_t pad_source(int mode, int64_t i, int64_t size) {
  if (i >= 0 && i < size) return i;
  if (mode == static_cast<int>(PadMode::Edge)) return i < 0 ? 0 : size - 1;
  if (mode == static_cast<int>(PadMode::Reflect)) return i < 0 ? -i : 2 * (size - 1) - i;
  return -1;
}

template <class T, bool kNHWC>
__global__ void pad2d_kernel(const T* x, T* y, int64_t total, PadGeometry g) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, c, oy, ox;
    if constexpr (kNHWC) {
      c = o % g.C;
      int64_t r = o / g.C;
      ox = r % g.WO;
      r /= g.WO;
      oy = r % g.HO;
      n = r / g.HO;
    } else {
      ox = o % g.WO;
      int64_t r = o / g.WO;
      oy = r % g.HO;
      r /= g.HO;
      c = r % g.C;
      n = r / g.C;
    }
    const int64_t iy = pad_source(g.mode, oy - g.top, g.H), ix = pad_source(g.mode, ox - g.left, g.W);
    if (iy < 0 || ix < 0) {
      y[o] = from_float<T>(g.value);
    } else {
      const int64_t i = kNHWC ? ((n * g.H + iy) * g.W + ix) * g.C + c : ((n * g.C + c) * g.H + iy) * g.W + ix;
      y[o] = x[i];
    }
  }
}

void pad2d_run(const KernelCall& call) {
  const auto& p = std::get<Pad2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  const int64_t total = shape_numel(ys);
  if (total == 0) return;
  const PadGeometry g{xs[1], xs[2], xs[3], ys[2], ys[3], p.pad.top, p.pad.left,
                      static_cast<int>(p.mode), p.value};
  Context& ctx = context_of(call);
  const bool nhwc = call.node.layout == Layout::NHWC;
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const T* x = reinterpret_cast<const T*>(call.inputs[0]);
    T* y = reinterpret_cast<T*>(call.outputs[0]);
    if (nhwc)
      pad2d_kernel<T, true><<<grid_for(total), 256, 0, ctx.stream>>>(x, y, total, g);
    else
      pad2d_kernel<T, false><<<grid_for(total), 256, 0, ctx.stream>>>(x, y, total, g);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(pad2d) {
  registry.add("cuda", {{.op = "pad2d", .name = "direct", .priority = 10,
                         .layouts = {Layout::NCHW, Layout::NHWC}, .run = pad2d_run}});
}

}  // namespace infer::cuda
