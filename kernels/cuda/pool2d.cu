// CUDA pool2d "direct": max / average pooling, any kernel and stride, asymmetric padding,
// count_include_pad; float or half storage, float arithmetic. NCHW: one thread per output pixel of a
// plane and planes across grid.y (32-bit in-plane indices; adjacent threads take adjacent output
// columns). NHWC: one thread per pack of V channels of one output pixel (adjacent threads take
// adjacent channels, so every window read and the store are coalesced 8-byte accesses).
// "global" (a window that is the whole unpadded image: GlobalAveragePool / GlobalMaxPool, the squeeze
// of squeeze-excitation): NCHW one block per plane, its threads stride the plane and reduce by warp
// shuffles; NHWC one block per image and 32 channel packs, 16 rows of threads striding the pixels.
// direct's one thread per plane summed 12544 values alone there (EfficientNet-B0's 17 global pools
// took 0.49 ms of its 2.2 ms batch-1 fp16 profile).
// Reference semantics: the window is clipped to the image (padded cells never win a max), an average
// divides by the window clipped to the padded image (count_include_pad) or by the real cells read, a
// window wholly in the padding gives 0. ceil_mode's extra last window is clipped the same way (only the
// output size, from shape inference, differs).
#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

// The parameters a thread needs, by value as one launch argument; in-plane sizes fit in int
// (pool2d_applicable), so threads index within a plane with 32-bit math.
struct PoolGeometry {
  int H, W, HO, WO;
  int kh, kw, sh, sw, pad_top, pad_left, pad_bottom, pad_right;
  bool is_max, count_include_pad;
};

// The window of output pixel (oy, ox) clipped to the image (rows yb..ye-1, columns xb..xe-1) and an
// average's divisor: the window clipped to the padded image (count_include_pad) or its real cells.
struct Window {
  int yb, ye, xb, xe, divisor;
};
__device__ __forceinline__ Window window(const PoolGeometry& g, int oy, int ox) {
  const int y0 = oy * g.sh - g.pad_top, x0 = ox * g.sw - g.pad_left;
  Window w;
  w.yb = y0 > 0 ? y0 : 0, w.ye = y0 + g.kh < g.H ? y0 + g.kh : g.H;
  w.xb = x0 > 0 ? x0 : 0, w.xe = x0 + g.kw < g.W ? x0 + g.kw : g.W;
  w.divisor = (w.ye - w.yb) * (w.xe - w.xb);
  if (g.count_include_pad) {
    const int py_end = y0 + g.kh < g.H + g.pad_bottom ? y0 + g.kh : g.H + g.pad_bottom;
    const int px_end = x0 + g.kw < g.W + g.pad_right ? x0 + g.kw : g.W + g.pad_right;
    w.divisor = (py_end - y0) * (px_end - x0);
  }
  return w;
}

// Threads: x walks the output pixels of a plane (adjacent threads, adjacent columns), y the planes
// (n * C + c), several per block when a plane is shorter than a block. The plane is located once per
// thread and plane, not by int64 division per element (which held VGG's pools to ~0.4 TB/s).
template <class T>
__global__ void pool2d_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t planes, PoolGeometry g) {
  const int P = g.HO * g.WO;
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= P) return;
  const int oy = i / g.WO, ox = i - oy * g.WO;
  const Window win = window(g, oy, ox);
  const int yb = win.yb, ye = win.ye, xb = win.xb, xe = win.xe, divisor = win.divisor;
  for (int64_t plane = blockIdx.y * int64_t(blockDim.y) + threadIdx.y; plane < planes;
       plane += int64_t(gridDim.y) * blockDim.y) {
    const T* xp = x + plane * g.H * g.W;
    float out = 0.f;  // a window entirely in the padding (only when padding >= kernel)
    if (yb < ye && xb < xe) {
      if (g.is_max) {
        float m = -INFINITY;
        for (int iy = yb; iy < ye; ++iy)
          for (int ix = xb; ix < xe; ++ix) m = fmaxf(m, to_float(xp[iy * g.W + ix]));
        out = m;
      } else {
        float s = 0.f;
        for (int iy = yb; iy < ye; ++iy)
          for (int ix = xb; ix < xe; ++ix) s += to_float(xp[iy * g.W + ix]);
        out = s / float(divisor);
      }
    }
    y[plane * P + i] = from_float<T>(out);
  }
}

// NHWC: thread i handles channels (i % CV)*V .. +V-1 of output pixel i / CV (n, oy, ox); the window
// bounds and divisor are the NCHW kernel's. 32-bit indices: pool2d_applicable bounds the tensors.
template <class T, int V>
__global__ void pool2d_nhwc_kernel(const T* __restrict__ x, T* __restrict__ y, int total, int CV,
                                   PoolGeometry g) {
  using P = Pack<T, V>;
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < total;
       i += static_cast<int>(gridDim.x * blockDim.x)) {
    const int cv = i % CV;
    int pix = i / CV;
    const int ox = pix % g.WO;
    pix /= g.WO;
    const int oy = pix % g.HO, n = pix / g.HO;
    const Window win = window(g, oy, ox);
    const int yb = win.yb, ye = win.ye, xb = win.xb, xe = win.xe, divisor = win.divisor;
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = g.is_max ? -INFINITY : 0.f;
    const P* xp = reinterpret_cast<const P*>(x) + static_cast<int64_t>(n) * g.H * g.W * CV + cv;
    for (int iy = yb; iy < ye; ++iy)
      for (int ix = xb; ix < xe; ++ix) {
        const P v = xp[(iy * g.W + ix) * CV];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float f = to_float(v.v[k]);
          acc[k] = g.is_max ? fmaxf(acc[k], f) : acc[k] + f;
        }
      }
    P out;
    const bool empty = !(yb < ye && xb < xe);  // a window wholly in the padding gives 0
#pragma unroll
    for (int k = 0; k < V; ++k)
      out.v[k] = from_float<T>(empty ? 0.f : g.is_max ? acc[k] : acc[k] / float(divisor));
    reinterpret_cast<P*>(y)[i] = out;
  }
}

// One block per plane (n * C + c) of HW elements; blockDim.x a multiple of 32 (<= 1024).
template <class T>
__global__ void global_pool_kernel(const T* __restrict__ x, T* __restrict__ y, int HW, bool is_max) {
  const T* xp = x + static_cast<int64_t>(blockIdx.x) * HW;
  const float none = is_max ? -INFINITY : 0.f;
  float acc = none;
  for (int i = static_cast<int>(threadIdx.x); i < HW; i += static_cast<int>(blockDim.x)) {
    const float f = to_float(xp[i]);
    acc = is_max ? fmaxf(acc, f) : acc + f;
  }
  const auto reduce = [is_max](float v) {
    for (int o = 16; o > 0; o >>= 1) {
      const float u = __shfl_down_sync(0xffffffffu, v, o);
      v = is_max ? fmaxf(v, u) : v + u;
    }
    return v;
  };
  __shared__ float part[32];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  acc = reduce(acc);
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (warp != 0) return;
  acc = reduce(lane < static_cast<int>(blockDim.x >> 5) ? part[lane] : none);
  if (lane == 0) y[blockIdx.x] = from_float<T>(is_max ? acc : acc / float(HW));
}

// NHWC: block (32, 16) of image blockIdx.y: x takes packs of V channels (blockIdx.x * 32 + x), y
// strides the pixels (coalesced rows of C), then the 16 partial results reduce in shared memory.
template <class T, int V>
__global__ void global_pool_nhwc_kernel(const T* __restrict__ x, T* __restrict__ y, int HW, int CV,
                                        bool is_max) {
  using P = Pack<T, V>;
  constexpr int kRows = 16;
  const float none = is_max ? -INFINITY : 0.f;
  const int cv = static_cast<int>(blockIdx.x) * 32 + static_cast<int>(threadIdx.x);
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = none;
  if (cv < CV) {
    const P* xp = reinterpret_cast<const P*>(x) + static_cast<int64_t>(blockIdx.y) * HW * CV + cv;
    for (int pix = static_cast<int>(threadIdx.y); pix < HW; pix += kRows) {
      const P v = xp[static_cast<int64_t>(pix) * CV];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = is_max ? fmaxf(acc[k], to_float(v.v[k])) : acc[k] + to_float(v.v[k]);
    }
  }
  __shared__ float part[kRows][32 * V];
#pragma unroll
  for (int k = 0; k < V; ++k) part[threadIdx.y][threadIdx.x * V + k] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || cv >= CV) return;
  P out;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float a = none;
    for (int r = 0; r < kRows; ++r) a = is_max ? fmaxf(a, part[r][threadIdx.x * V + k]) : a + part[r][threadIdx.x * V + k];
    out.v[k] = from_float<T>(is_max ? a : a / float(HW));
  }
  reinterpret_cast<P*>(y)[static_cast<int64_t>(blockIdx.y) * CV + cv] = out;
}

// The window is the whole image with no padding (an output of 1x1); the planes (NCHW) or images
// (NHWC) fit the grid.
bool global_applicable(const NodeDesc& node) {
  const auto& p = std::get<Pool2DParams>(node.params);
  const Shape &xs = node.input_shapes[0], &ys = node.output_shapes[0];
  const bool grid_fits = node.layout == Layout::NHWC ? xs[0] < 65536 && xs[1] < INT32_MAX
                                                     : xs[0] * xs[1] < INT32_MAX;
  return ys[2] == 1 && ys[3] == 1 && p.kernel_h == xs[2] && p.kernel_w == xs[3] && p.pad.top == 0 &&
         p.pad.left == 0 && p.pad.bottom == 0 && p.pad.right == 0 && xs[2] * xs[3] < (int64_t(1) << 30) &&
         grid_fits;
}

void global_run(const KernelCall& call) {
  if (!global_applicable(call.node)) throw Error("cuda pool2d.global: needs a whole-image window");
  const auto& p = std::get<Pool2DParams>(call.node.params);
  const Shape& xs = call.node.input_shapes[0];
  const int64_t planes = xs[0] * xs[1];
  const int HW = static_cast<int>(xs[2] * xs[3]);
  if (planes == 0 || HW == 0) return;
  Context& ctx = context_of(call);
  const bool is_max = p.kind == PoolKind::Max;
  if (call.node.layout == Layout::NHWC) {
    dispatch(call.node.precision, [&](auto tag) {
      using T = decltype(tag);
      const T* x = reinterpret_cast<const T*>(call.inputs[0]);
      T* y = reinterpret_cast<T*>(call.outputs[0]);
      const auto launch = [&](auto v_tag) {
        constexpr int V = decltype(v_tag)::value;
        const int CV = static_cast<int>(xs[1] / V);
        const dim3 grid(static_cast<unsigned>((CV + 31) / 32), static_cast<unsigned>(xs[0]));
        global_pool_nhwc_kernel<T, V><<<grid, dim3(32, 16), 0, ctx.stream>>>(x, y, HW, CV, is_max);
      };
      switch (pack_width(sizeof(T), xs[1], {x, y})) {
        case 4: launch(std::integral_constant<int, 4>{}); break;
        case 2: launch(std::integral_constant<int, 2>{}); break;
        default: launch(std::integral_constant<int, 1>{}); break;
      }
    });
    INFER_CUDA_CHECK_LAUNCH();
    return;
  }
  const int threads = std::min(256, (HW + 31) / 32 * 32);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    global_pool_kernel<T><<<static_cast<unsigned>(planes), threads, 0, ctx.stream>>>(
        reinterpret_cast<const T*>(call.inputs[0]), reinterpret_cast<T*>(call.outputs[0]), HW, is_max);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

bool pool2d_applicable(const NodeDesc& node) {
  const auto* p = &std::get<Pool2DParams>(node.params);
  // The kernel's 32-bit in-plane math: every coordinate and size it forms stays below 2^30.
  const Shape &xs = node.input_shapes[0], &ys = node.output_shapes[0];
  const auto fits = [](int64_t v) { return v >= 0 && v < (int64_t(1) << 30); };
  if (node.layout == Layout::NHWC && !(fits(shape_numel(xs)) && fits(shape_numel(ys)))) return false;
  return fits(xs[2] * xs[3]) && fits(ys[2] * ys[3]) &&
         fits(ys[2] * p->stride_h + p->kernel_h + p->pad.top + p->pad.bottom + xs[2]) &&
         fits(ys[3] * p->stride_w + p->kernel_w + p->pad.left + p->pad.right + xs[3]);
}

void pool2d_run(const KernelCall& call) {
  if (!pool2d_applicable(call.node))
    throw Error("cuda pool2d.direct: the tensors are too large for its 32-bit in-plane indices");
  const auto& p = std::get<Pool2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  if (shape_numel(ys) == 0) return;
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };  // in range: pool2d_applicable
  const PoolGeometry g{i32(xs[2]),      i32(xs[3]),     i32(ys[2]),    i32(ys[3]),
                       p.kernel_h,      p.kernel_w,     p.stride_h,    p.stride_w,
                       p.pad.top,       p.pad.left,     p.pad.bottom,  p.pad.right,
                       p.kind == PoolKind::Max, p.count_include_pad};
  Context& ctx = context_of(call);
  if (call.node.layout == Layout::NHWC) {
    dispatch(call.node.precision, [&](auto tag) {
      using T = decltype(tag);
      const T* x = reinterpret_cast<const T*>(call.inputs[0]);
      T* y = reinterpret_cast<T*>(call.outputs[0]);
      const int64_t C = xs[1], pixels = ys[0] * ys[2] * ys[3];
      const auto launch = [&](auto v_tag) {
        constexpr int V = decltype(v_tag)::value;
        const int total = static_cast<int>(pixels * (C / V));
        pool2d_nhwc_kernel<T, V><<<grid_for(total), 256, 0, ctx.stream>>>(x, y, total,
                                                                          static_cast<int>(C / V), g);
      };
      switch (pack_width(sizeof(T), C, {x, y})) {
        case 4: launch(std::integral_constant<int, 4>{}); break;
        case 2: launch(std::integral_constant<int, 2>{}); break;
        default: launch(std::integral_constant<int, 1>{}); break;
      }
    });
    INFER_CUDA_CHECK_LAUNCH();
    return;
  }
  const int64_t planes = ys[0] * ys[1];
  const PlaneLaunch l = plane_launch(ys[2] * ys[3], planes);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    pool2d_kernel<T><<<l.grid, l.block, 0, ctx.stream>>>(
        reinterpret_cast<const T*>(call.inputs[0]), reinterpret_cast<T*>(call.outputs[0]), planes, g);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(pool2d) {
  registry.add("cuda", {
      {.op = "pool2d", .name = "global", .priority = 20, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = global_applicable, .run = global_run},
      {.op = "pool2d", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = pool2d_applicable, .run = pool2d_run},
  });
}

}  // namespace infer::cuda
