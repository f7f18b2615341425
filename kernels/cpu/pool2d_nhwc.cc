// CPU pool2d "direct_nhwc": max / average pooling (any kernel, stride, asymmetric padding,
// count_include_pad, ceil_mode) on NHWC activations, vectorised along the channels: each output
// pixel's kLanes channels are one vector, reduced over the window's cells clipped to the image (the
// last vector of a channel count that is not a multiple of kLanes masked, nhwc.h). The reference's
// semantics: padded cells never win a max; an average divides by the window clipped to the padded
// image (count_include_pad) or by the cells read. A global pool (MobileNet's and EfficientNet's head)
// is one output pixel per image: its window is the image, read once, pixel by pixel, channel-vector
// rows in order. Threads: the team (thread_pool.h) over (image, output row, group of up to 16 channel vectors); one
// thread below kParallelMin elements read.
#include <algorithm>
#include <limits>

#include "infer/kernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 17;  // input elements read, window overlaps counted
constexpr int64_t kGroupVectors = 16;

struct PoolDims {
  int64_t N, C, H, W, HO, WO, group, groups;
};

template <class I>
INFER_INLINE void pool_rows_body(const Pool2DParams& p, const PoolDims& d, const float* x, float* y, int64_t t0,
                                 int64_t t1) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const bool is_max = p.kind == PoolKind::Max;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t g = t % d.groups, row = t / d.groups, n = row / d.HO, oy = row % d.HO;
    const int64_t c0 = g * d.group, c1 = std::min(d.C, c0 + d.group);
    const int64_t y0 = oy * p.stride_h - p.pad.top;
    const int64_t yb = std::max<int64_t>(y0, 0), ye = std::min<int64_t>(y0 + p.kernel_h, d.H);
    const int64_t py = std::min<int64_t>(y0 + p.kernel_h, d.H + p.pad.bottom) - y0;
    const float* xn = x + n * d.H * d.W * d.C;
    for (int64_t ox = 0; ox < d.WO; ++ox) {
      const int64_t x0 = ox * p.stride_w - p.pad.left;
      const int64_t xb = std::max<int64_t>(x0, 0), xe = std::min<int64_t>(x0 + p.kernel_w, d.W);
      const int64_t px = std::min<int64_t>(x0 + p.kernel_w, d.W + p.pad.right) - x0;
      const int64_t cells = std::max<int64_t>(0, ye - yb) * std::max<int64_t>(0, xe - xb);
      const float scale = cells == 0 ? 0.f : 1.f / float(p.count_include_pad ? py * px : cells);
      float* yp = y + ((n * d.HO + oy) * d.WO + ox) * d.C;
      for (int64_t c = c0; c < c1; c += L) {
        const int64_t nl = std::min<int64_t>(L, d.C - c);
        V acc = V{} + (is_max ? -std::numeric_limits<float>::infinity() : 0.f);
        for (int64_t iy = yb; iy < ye; ++iy)
          for (int64_t ix = xb; ix < xe; ++ix) {
            V v;
            nhwc::load_upto<I>(v, xn + (iy * d.W + ix) * d.C + c, nl);
            if (is_max) acc = acc < v ? v : acc;  // std::max(acc, v), as pool2d.direct
            else acc += v;
          }
        if (cells == 0) acc = V{};
        else if (!is_max) acc *= scale;
        nhwc::store_upto<I>(yp + c, acc, nl);
      }
    }
  }
}
INFER_PER_ISA(void, pool_rows, pool_rows_body,
              (const Pool2DParams& p, const PoolDims& d, const float* x, float* y, int64_t t0, int64_t t1),
              (p, d, x, y, t0, t1))

void pool_run(const KernelCall& call) {
  const auto& p = std::get<Pool2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  PoolDims d{xs[0], xs[1], xs[2], xs[3], ys[2], ys[3], 0, 0};
  const int64_t L = isa::shape(call.node.isa).lanes;
  d.group = std::max<int64_t>(1, std::min((d.C + L - 1) / L, kGroupVectors)) * L;
  d.groups = (d.C + d.group - 1) / d.group;
  const int64_t tasks = d.N * d.HO * d.groups;
  const int64_t work = d.N * d.C * d.HO * d.WO * p.kernel_h * p.kernel_w;
  const auto pool_rows = pool_rows_for(call.node.isa);
  parallel_for(tasks, work >= kParallelMin,
               [&](int64_t t0, int64_t t1, int) { pool_rows(p, d, call.inputs[0], call.outputs[0], t0, t1); });
}

}  // namespace

INFER_REGISTER_KERNELS(pool2d_nhwc) {
  registry.add("cpu", {
      // the node's NCHW priority: pooling follows its input's layout
      {.op = "pool2d", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .isa = KernelVariant::Isa::PerIsa, .run = pool_run},
  });
}

}  // namespace infer::cpu
