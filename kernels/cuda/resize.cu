// CUDA resize "direct": nearest / bilinear (ResizeParams), float or half storage, float arithmetic,
// NCHW and NHWC. One thread per output element in a grid-stride loop (int64 indices): NCHW threads
// walk output columns (coalesced stores), NHWC threads walk channels (coalesced loads and stores).
// Each thread maps its row and column with kernels/resize_coords.h, as the CPU kernel does.
// Also depth_to_space "direct" (DCR / CRD, NCHW or NHWC): one thread per output element, a gather.
#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"
#include "kernels/resize_coords.h"

namespace infer::cuda {
namespace {

struct ResizeGeometry {
  resize::Axis ay, ax;
  int64_t C;
  bool nearest, nhwc;
  ResizeNearest rounding;
};

template <class T>
__global__ void resize_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, ResizeGeometry g) {
  const int64_t H = g.ay.in, W = g.ax.in, HO = g.ay.out, WO = g.ax.out;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, c, oy, ox;
    if (g.nhwc) {  // i = ((n * HO + oy) * WO + ox) * C + c
      c = i % g.C;
      int64_t r = i / g.C;
      ox = r % WO, r /= WO;
      oy = r % HO, n = r / HO;
    } else {  // i = ((n * C + c) * HO + oy) * WO + ox
      ox = i % WO;
      int64_t r = i / WO;
      oy = r % HO, r /= HO;
      c = r % g.C, n = r / g.C;
    }
    // element (n, c, iy, ix) of x in the node's layout
    const auto at = [&](int64_t iy, int64_t ix) {
      return g.nhwc ? x[((n * H + iy) * W + ix) * g.C + c] : x[((n * g.C + c) * H + iy) * W + ix];
    };
    float v;
    if (g.nearest) {
      v = to_float(at(resize::nearest(g.ay, int(oy), g.rounding), resize::nearest(g.ax, int(ox), g.rounding)));
    } else {
      const resize::Taps ty = resize::linear(g.ay, int(oy)), tx = resize::linear(g.ax, int(ox));
      const float a = to_float(at(ty.i0, tx.i0)), b = to_float(at(ty.i0, tx.i1));
      const float d = to_float(at(ty.i1, tx.i0)), e = to_float(at(ty.i1, tx.i1));
      const float top = a + tx.w1 * (b - a), bot = d + tx.w1 * (e - d);
      v = top + ty.w1 * (bot - top);
    }
    y[i] = from_float<T>(v);
  }
}

// Coordinates are int in resize_coords.h: every spatial size must fit.
bool resize_applicable(const NodeDesc& node) {
  const Shape &xs = node.input_shapes[0], &ys = node.output_shapes[0];
  const auto fits = [](int64_t v) { return v >= 0 && v < (int64_t(1) << 30); };
  return fits(xs[2]) && fits(xs[3]) && fits(ys[2]) && fits(ys[3]);
}

void resize_run(const KernelCall& call) {
  if (!resize_applicable(call.node))
    throw Error("cuda resize.direct: a spatial size is too large for its 32-bit coordinates");
  const auto& p = std::get<ResizeParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  const int64_t total = shape_numel(ys);
  if (total == 0) return;
  const ResizeGeometry g{resize::make_axis(xs[2], ys[2], p.coord, p.scale_h),
                         resize::make_axis(xs[3], ys[3], p.coord, p.scale_w),
                         xs[1], p.mode == ResizeMode::Nearest, call.node.layout == Layout::NHWC, p.nearest};
  Context& ctx = context_of(call);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    resize_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        reinterpret_cast<const T*>(call.inputs[0]), reinterpret_cast<T*>(call.outputs[0]), total, g);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

// Output element i = ((n * CO + c) * HO + oy) * WO + ox (NCHW) or ((n * HO + oy) * WO + ox) * CO + c
// (NHWC) reads input channel ic (DCR or CRD) at (oy / b, ox / b).
template <class T>
__global__ void depth_to_space_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, int64_t CO,
                                      int64_t HO, int64_t WO, int64_t b, bool dcr, bool nhwc) {
  const int64_t C = CO * b * b, H = HO / b, W = WO / b;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i, c = 0;
    if (nhwc) c = r % CO, r /= CO;
    const int64_t ox = r % WO;
    r /= WO;
    const int64_t oy = r % HO;
    r /= HO;
    if (!nhwc) c = r % CO, r /= CO;
    const int64_t n = r, pi = oy % b, pj = ox % b;
    const int64_t ic = dcr ? (pi * b + pj) * CO + c : c * b * b + pi * b + pj;
    y[i] = nhwc ? x[((n * H + oy / b) * W + ox / b) * C + ic] : x[((n * C + ic) * H + oy / b) * W + ox / b];
  }
}

void depth_to_space_run(const KernelCall& call) {
  const auto& p = std::get<DepthToSpaceParams>(call.node.params);
  const Shape& ys = call.node.output_shapes[0];
  const int64_t total = shape_numel(ys);
  if (total == 0) return;
  Context& ctx = context_of(call);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    depth_to_space_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        reinterpret_cast<const T*>(call.inputs[0]), reinterpret_cast<T*>(call.outputs[0]), total, ys[1],
        ys[2], ys[3], p.block, p.mode == DepthToSpaceMode::DCR, call.node.layout == Layout::NHWC);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(resize) {
  registry.add("cuda", {
      {.op = "resize", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = resize_applicable, .run = resize_run},
      {.op = "depth_to_space", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .run = depth_to_space_run},
  });
}

}  // namespace infer::cuda
