// CPU pool2d (max / average over NCHW, any kernel, stride and asymmetric padding, float32), two
// variants, one OpenMP iteration per (n, c) plane in both:
// "separable" (the default but for one-pixel outputs, i.e. global pools): a max or a sum over a KH x KW window is a reduction over its KH rows
// followed by one over its KW columns, so each output row first reduces its input rows into a row
// buffer on the stack (unit-stride vectors; the padding columns hold the reduction's identity, -inf
// or 0), then each output takes KW buffer cells (no bounds checks). Loops compiled for AVX-512, AVX2
// and baseline x86-64 and picked by the node's ISA level (isa.h). Relies on every window touching the image (padding < kernel:
// check_kernel_call enforces it). Windows wider than 1024 columns (none in practice) take "direct".
// "direct": each output clips its window to the image and loops over it (the old default).
// Both: padded cells never win a max; an average divides by the window clipped to the padded image
// (count_include_pad, as PyTorch/ONNX) or by the real cells it read -- the reference's semantics.
// ceil_mode needs nothing here: its extra last window is clipped the same way (shape inference sizes it).
#include <algorithm>
#include <limits>
#include <string>

#include "infer/kernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/omp_last.h"

namespace infer::cpu {
namespace {

// Loops smaller than this many elements run on one thread: waking a thread team costs more than they
// do (and far more on a loaded machine).
constexpr int64_t kParallelMin = int64_t(1) << 15;

void pool2d_run(const KernelCall& call) {
  const auto& p = std::get<Pool2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  const int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], HO = ys[2], WO = ys[3];
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const bool is_max = p.kind == PoolKind::Max;

  const int64_t work = NC * HO * WO * p.kernel_h * p.kernel_w;
  MasterLast last;  // guided and the master last: see separable_run
#pragma omp parallel if (work >= kParallelMin)
  {
#pragma omp for schedule(guided) nowait
    for (int64_t c = 0; c < NC; ++c) {
      const float* xp = x + c * H * W;
      float* yp = y + c * HO * WO;
      for (int64_t oy = 0; oy < HO; ++oy) {
        const int64_t y0 = oy * p.stride_h - p.pad.top;
        const int64_t yb = std::max<int64_t>(y0, 0), ye = std::min<int64_t>(y0 + p.kernel_h, H);
        const int64_t py = std::min<int64_t>(y0 + p.kernel_h, H + p.pad.bottom) - y0;
        for (int64_t ox = 0; ox < WO; ++ox) {
          const int64_t x0 = ox * p.stride_w - p.pad.left;
          const int64_t xb = std::max<int64_t>(x0, 0), xe = std::min<int64_t>(x0 + p.kernel_w, W);
          if (yb >= ye || xb >= xe) {  // a window entirely in the padding (padding >= kernel)
            yp[oy * WO + ox] = 0.f;
            continue;
          }
          if (is_max) {
            float m = -std::numeric_limits<float>::infinity();
            for (int64_t iy = yb; iy < ye; ++iy)
              for (int64_t ix = xb; ix < xe; ++ix) m = std::max(m, xp[iy * W + ix]);
            yp[oy * WO + ox] = m;
          } else {
            float s = 0.f;
            for (int64_t iy = yb; iy < ye; ++iy)
              for (int64_t ix = xb; ix < xe; ++ix) s += xp[iy * W + ix];
            const int64_t px = std::min<int64_t>(x0 + p.kernel_w, W + p.pad.right) - x0;
            const int64_t divisor = p.count_include_pad ? py * px : (ye - yb) * (xe - xb);
            yp[oy * WO + ox] = s / float(divisor);
          }
        }
      }
    }
    last.arrive();
  }
}

// ---- separable --------------------------------------------------------------------------------

// The row buffer's floats (64 KiB on each thread's stack): an output row runs in chunks of output
// columns whose windows' columns fit in it.
constexpr int64_t kRowBuf = 16384;
constexpr int kMaxKernelW = 1024;  // wider windows or strides (none in practice) take "direct"

struct PoolPlane {
  int64_t H, W, HO, WO, KH, KW, sh, sw, pt, pb, pl, pr;
  bool is_max, include_pad;
  int64_t chunk;  // output columns per row-buffer fill
};

// b[j] = max or sum over rows [yb, ye) of image column ix0 + j, j < n; the identity outside the image.
template <bool Max>
__attribute__((always_inline)) inline void reduce_rows(const PoolPlane& d, const float* xp, int64_t yb,
                                                       int64_t ye, int64_t ix0, int64_t n, float* b) {
  const float identity = Max ? -std::numeric_limits<float>::infinity() : 0.f;
  const int64_t jb = std::clamp<int64_t>(-ix0, 0, n), je = std::clamp<int64_t>(d.W - ix0, jb, n);
  for (int64_t j = 0; j < jb; ++j) b[j] = identity;
  for (int64_t j = je; j < n; ++j) b[j] = identity;
  const float* r0 = xp + yb * d.W + ix0;
#pragma omp simd
  for (int64_t j = jb; j < je; ++j) b[j] = r0[j];
  for (int64_t iy = yb + 1; iy < ye; ++iy) {
    const float* r = xp + iy * d.W + ix0;
    if constexpr (Max) {
#pragma omp simd
      for (int64_t j = jb; j < je; ++j) b[j] = b[j] < r[j] ? r[j] : b[j];
    } else {
#pragma omp simd
      for (int64_t j = jb; j < je; ++j) b[j] += r[j];
    }
  }
}

// out[o] = max or sum of b[o * S + kx], kx < K, o < n. K, S: compile-time kernel width and stride
// where known (3, 1 or 2: unrolled, unit-stride or deinterleaving loads), else 0 and d's.
template <bool Max, int K, int S>
__attribute__((always_inline)) inline void reduce_cols(const PoolPlane& d, const float* b, int64_t n,
                                                       float* out) {
  const int64_t kw = K > 0 ? K : d.KW, s = S > 0 ? S : d.sw;
#pragma omp simd
  for (int64_t o = 0; o < n; ++o) {
    float v = b[o * s];
    for (int64_t kx = 1; kx < kw; ++kx) {
      const float c = b[o * s + kx];
      if constexpr (Max) v = v < c ? c : v;
      else v += c;
    }
    out[o] = v;
  }
}

template <bool Max, int K, int S>
__attribute__((always_inline)) inline void pool_plane_impl(const PoolPlane& d, const float* xp, float* yp) {
  float b[kRowBuf];
  for (int64_t oy = 0; oy < d.HO; ++oy) {
    const int64_t y0 = oy * d.sh - d.pt;
    const int64_t yb = std::max<int64_t>(y0, 0), ye = std::min<int64_t>(y0 + d.KH, d.H);
    const int64_t py = std::min<int64_t>(y0 + d.KH, d.H + d.pb) - y0;
    float* yrow = yp + oy * d.WO;
    for (int64_t ox0 = 0; ox0 < d.WO; ox0 += d.chunk) {
      const int64_t n = std::min(d.chunk, d.WO - ox0);
      const int64_t ix0 = ox0 * d.sw - d.pl;
      reduce_rows<Max>(d, xp, yb, ye, ix0, (n - 1) * d.sw + d.KW, b);
      reduce_cols<Max, K, S>(d, b, n, yrow + ox0);
      if constexpr (!Max) {
        for (int64_t o = ox0; o < ox0 + n; ++o) {
          const int64_t x0 = o * d.sw - d.pl;
          const int64_t divisor =
              d.include_pad ? py * (std::min<int64_t>(x0 + d.KW, d.W + d.pr) - x0)
                            : (ye - yb) * (std::min<int64_t>(x0 + d.KW, d.W) - std::max<int64_t>(x0, 0));
          yrow[o] /= float(divisor);
        }
      }
    }
  }
}

template <bool Max>
__attribute__((always_inline)) inline void pool_plane_kind(const PoolPlane& d, const float* xp, float* yp) {
  if (d.KW == 3 && d.sw == 2) return pool_plane_impl<Max, 3, 2>(d, xp, yp);
  if (d.KW == 3 && d.sw == 1) return pool_plane_impl<Max, 3, 1>(d, xp, yp);
  if (d.KW == 2 && d.sw == 2) return pool_plane_impl<Max, 2, 2>(d, xp, yp);
  if (d.sw == 1) return pool_plane_impl<Max, 0, 1>(d, xp, yp);
  pool_plane_impl<Max, 0, 0>(d, xp, yp);
}

// The loops are written for the auto-vectoriser; compiled once per ISA level (isa.h).
template <class>
INFER_INLINE void pool_plane_body(const PoolPlane& d, const float* xp, float* yp) {
  if (d.is_max) return pool_plane_kind<true>(d, xp, yp);
  pool_plane_kind<false>(d, xp, yp);
}
INFER_PER_ISA(void, pool_plane, pool_plane_body, (const PoolPlane& d, const float* xp, float* yp), (d, xp, yp))

// A window row and a stride fit the row buffer many times over.
bool separable_applicable(const NodeDesc& node) {
  const auto& p = std::get<Pool2DParams>(node.params);
  return p.kernel_w <= kMaxKernelW && p.stride_w <= kMaxKernelW;
}

// The default choice ("direct" has 10), from ResNet-18's pools in the model (2-core EPYC VM,
// docs/kernels.md "CPU: pool2d"): the 3x3 stride-2 max pool 64 x 112x112 -> 56x56 took 0.094-0.097 ms
// vs 0.49 (direct); the global 7x7 average pool over 512 channels 0.023 vs 0.017 (a one-pixel output:
// its seven 7-float row loops cost more than direct's one clipped loop), so direct keeps those.
int separable_priority(const NodeDesc& node) {
  const Shape& ys = node.output_shapes[0];
  return ys[2] * ys[3] == 1 ? 5 : 20;
}

void separable_run(const KernelCall& call) {
  const auto& p = std::get<Pool2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  const PoolPlane d{xs[2], xs[3], ys[2], ys[3], p.kernel_h, p.kernel_w, p.stride_h, p.stride_w,
                    p.pad.top, p.pad.bottom, p.pad.left, p.pad.right, p.kind == PoolKind::Max,
                    p.count_include_pad, (kRowBuf - p.kernel_w) / p.stride_w + 1};
  const int64_t NC = xs[0] * xs[1];
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const int64_t work = NC * d.HO * d.WO * d.KH * d.KW;
  // guided: under OMP_WAIT_POLICY=passive the other thread starts late and the awake one takes over
  // part of its share; the master waits for it with a bounded spin instead of sleeping at the
  // closing barrier (omp_last.h; docs/kernels.md "OpenMP schedules")
  const auto pool_plane = pool_plane_for(call.node.isa);
  MasterLast last;
#pragma omp parallel if (work >= kParallelMin)
  {
#pragma omp for schedule(guided) nowait
    for (int64_t c = 0; c < NC; ++c) pool_plane(d, x + c * d.H * d.W, y + c * d.HO * d.WO);
    last.arrive();
  }
}

}  // namespace

INFER_REGISTER_KERNELS(pool2d) {
  registry.add("cpu", {
      {.op = "pool2d", .name = "separable", .priority = 20, .priority_for = separable_priority,
       .isa = KernelVariant::Isa::PerIsa,
       .applicable = separable_applicable,
       .run = separable_run},
      {.op = "pool2d", .name = "direct", .priority = 10, .run = pool2d_run},
  });
}

}  // namespace infer::cpu
