// CPU conv2d "depthwise_nhwc": a depthwise conv2d (groups == C_in == C_out, weight [C,1,KH,KW], any
// kernel, stride, padding and dilation) on NHWC activations, vectorised along the channels: an output
// pixel's kLanes channels (16 on AVX-512, 8 on AVX2, 4 on baseline) are one vector, and each tap is
// one FMA of the input pixel's channel vector with the tap's weight vector. The weight is re-laid out
// once in prepare() as [KH*KW][C rounded up to kLanes] (zeros past C) with the bias beside it, so the
// taps' weights are whole-vector loads; a channel count that is not a multiple of the vector (24, 40
// at AVX-512) ends in one masked vector of inputs and outputs (nhwc.h). 3x3 and 5x5 at stride 1 or 2
// (the common case, compile-time kernel and stride): the KH*KW weight vectors stay in registers while
// one output row of one channel vector is computed, U output columns at a time (8 on AVX-512 3x3,
// else 4) as a sliding window, each input vector loaded once and multiplied into every accumulator
// that needs it; the border columns two at a time, taps outside the image reading a zero vector.
// Other kernels, strides, dilations: one output at a time, taps clipped. Bias and the fused
// activation at the store (ReLU, Clip, HardSigmoid, HardSwish in registers; others per element after
// the row). Threads: the kernels' team (thread_pool.h) over (image, output row, group of up to 4
// channel vectors), guided; one thread below kParallelMin multiply-adds.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "infer/kernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

// Multiply-adds below which one thread runs the node (docs/kernels.md "CPU: the channels-last path").
constexpr int64_t kParallelMin = int64_t(1) << 19;
constexpr int64_t kGroupVectors = 4;  // channel vectors per OpenMP iteration

struct DwDims {
  int64_t L;  // the ISA's lanes
  int64_t N, C, H, W, HO, WO, KH, KW, sh, sw, pt, pl, dh, dw;
  int64_t Cp;        // C rounded up to whole vectors
  int64_t group;     // channels per iteration (whole vectors)
  int64_t groups;    // channel groups
  int64_t in_lo, in_hi;  // output columns whose every tap column is inside the image
};

DwDims dw_dims(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  DwDims d;
  d.L = isa::shape(node.isa).lanes;
  d.N = xs[0], d.C = xs[1], d.H = xs[2], d.W = xs[3], d.HO = ys[2], d.WO = ys[3], d.KH = ws[2], d.KW = ws[3];
  d.sh = p.stride_h, d.sw = p.stride_w, d.pt = p.pad.top, d.pl = p.pad.left;
  d.dh = p.dilation_h, d.dw = p.dilation_w;
  d.Cp = (d.C + d.L - 1) / d.L * d.L;
  d.group = std::min(d.Cp, kGroupVectors * d.L);
  d.groups = (d.Cp + d.group - 1) / d.group;
  // ox in [in_lo, in_hi): ox*sw - pl >= 0 and ox*sw - pl + (KW-1)*dw < W
  d.in_lo = std::min(d.WO, (d.pl + d.sw - 1) / d.sw);
  const int64_t last = d.W - 1 - (d.KW - 1) * d.dw + d.pl;  // the largest ox*sw allowed
  d.in_hi = last < 0 ? 0 : std::min(d.WO, last / d.sw + 1);
  d.in_hi = std::max(d.in_hi, d.in_lo);
  return d;
}

struct DwPrepared {
  std::vector<float> w;     // [KH*KW][Cp]
  std::vector<float> bias;  // [Cp], zeros without a bias
};

std::shared_ptr<void> dw_prepare(const NodeDesc& node) {
  const DwDims d = dw_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv2d.depthwise_nhwc: the weight must be a constant");
  auto prep = std::make_shared<DwPrepared>();
  const int64_t taps = d.KH * d.KW;
  prep->w.assign(static_cast<size_t>(taps * d.Cp), 0.f);
  prep->bias.assign(static_cast<size_t>(d.Cp), 0.f);
  for (int64_t c = 0; c < d.C; ++c)
    for (int64_t t = 0; t < taps; ++t) prep->w[static_cast<size_t>(t * d.Cp + c)] = w[c * taps + t];
  if (node.constants.size() >= 3 && node.constants[2])
    std::copy(node.constants[2], node.constants[2] + d.C, prep->bias.begin());
  return prep;
}

// One channel vector of one output row: the geometry as locals (the kernel's may_alias vector stores
// could otherwise alias a DwDims read through a reference, and every field would be reloaded per tap).
struct DwRow {
  int64_t C, W, WO, KH, KW, sw, pl, dh, dw, Cp, in_lo, in_hi;
  int64_t iy0, ky0, ky1;  // the row's first tap row and the tap rows inside the image
  int64_t nl;             // real lanes of this channel vector
};

// A vector of x at p: whole (Full) or its first nl lanes (the last vector of the channels).
template <class I, bool Full>
INFER_INLINE void load_x(typename I::Vec& v, const float* p, int64_t nl) {
  if constexpr (Full) mk::load(v, p);
  else nhwc::load_n<I>(v, p, nl);
}
template <class I, bool Full>
INFER_INLINE void store_y(float* p, const typename I::Vec& v, int64_t nl) {
  if constexpr (Full) mk::store(p, v);
  else nhwc::store_n<I>(p, v, nl);
}

// Output column ox with its tap rows and columns clipped to the image, for kernels other than 3x3 /
// 5x5: one accumulator, the weights read from w.
template <class I, int K, int A, bool Full>
INFER_INLINE void dw_one(const DwRow& r, const float* xc, const typename I::Vec* wv, const float* w,
                         const typename I::Vec& b, int64_t ox, float* yc, const Activation& act) {
  using V = typename I::Vec;
  const int64_t ix0 = ox * r.sw - r.pl;
  const int64_t kx0 = ix0 >= 0 ? 0 : std::min(r.KW, (-ix0 + r.dw - 1) / r.dw);
  const int64_t kx1 = std::max(kx0, std::min(r.KW, r.W - ix0 <= 0 ? 0 : (r.W - ix0 - 1) / r.dw + 1));
  V acc = b;
  for (int64_t ky = r.ky0; ky < r.ky1; ++ky) {
    const float* xr = xc + ((r.iy0 + ky * r.dh) * r.W + ix0) * r.C;
    for (int64_t kx = kx0; kx < kx1; ++kx) {
      V xv, wk;
      load_x<I, Full>(xv, xr + kx * r.dw * r.C, r.nl);
      if constexpr (K > 0) wk = wv[ky * K + kx];
      else mk::load(wk, w + (ky * r.KW + kx) * r.Cp);
      acc += wk * xv;
    }
  }
  store_y<I, Full>(yc + ox * r.C, nhwc::act_class<I, A>(acc, act), r.nl);
}

// Output columns per step of the interior loop: independent accumulators, so the FMA chains of
// several pixels overlap (one pixel's 9 taps are a chain of dependent FMAs, latency-bound alone);
// K*K weight vectors + U accumulators + one input fit the level's registers (32 zmm; 16 ymm / xmm).
template <class I, int K>
constexpr int dw_unroll() {
  return I::kIsa == CpuIsa::Avx512 && K == 3 ? 8 : 4;
}

// U interior output columns from ox (every tap column inside the image) at stride S (1 or 2, no
// dilation), the tap rows [ky0, ky1): per tap row the (U-1)*S + K input vectors the U windows cover
// are each loaded once, from one pointer stepping by C, and each is multiplied into every
// accumulator whose window holds it (U independent accumulators, the K x K weights in registers).
// (Addressing each (tap, column) pair on its own made GCC keep 36 pointers, spilled to the stack.)
template <class I, int K, int S, int A, bool Full, int U>
INFER_INLINE void dw_interior(const DwRow& r, const float* const (&xr)[K], const typename I::Vec (&wv)[K * K],
                              const typename I::Vec& b, int64_t ox, float* yc, const Activation& act) {
  using V = typename I::Vec;
  const int64_t C = r.C, base = (ox * S - r.pl) * C;
  V acc[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) acc[u] = b;
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
    if (ky < r.ky0 || ky >= r.ky1) continue;
    const float* q = xr[ky] + base;
#pragma GCC unroll 24
    for (int j = 0; j < (U - 1) * S + K; ++j) {
      V xv;
      load_x<I, Full>(xv, q, r.nl);
      q += C;
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) {
        const int kx = j - u * S;
        if (kx >= 0 && kx < K) acc[u] += wv[ky * K + kx] * xv;
      }
    }
  }
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) store_y<I, Full>(yc + (ox + u) * C, nhwc::act_class<I, A>(acc[u], act), r.nl);
}

alignas(64) constexpr float kZeros[16] = {};  // the input outside the image, one vector

// Two border output columns ox0, ox1 (left and right, or two on one side): as dw_one, but a tap
// column outside the image reads a zero vector (a select of the address, no branch), so the two
// chains run side by side (7x7 maps: 2 of 7 columns are border columns).
template <class I, int K, int A, bool Full>
INFER_INLINE void dw_border2(const DwRow& r, const float* const (&xr)[K], const typename I::Vec (&wv)[K * K],
                             const typename I::Vec& b, int64_t ox0, int64_t ox1, float* yc, const Activation& act) {
  using V = typename I::Vec;
  const int64_t C = r.C, ix0 = ox0 * r.sw - r.pl, ix1 = ox1 * r.sw - r.pl;
  V acc0 = b, acc1 = b;
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
    if (ky < r.ky0 || ky >= r.ky1) continue;
#pragma GCC unroll 5
    for (int kx = 0; kx < K; ++kx) {
      const int64_t i0 = ix0 + kx, i1 = ix1 + kx;
      V x0, x1;
      load_x<I, Full>(x0, i0 >= 0 && i0 < r.W ? xr[ky] + i0 * C : kZeros, r.nl);
      load_x<I, Full>(x1, i1 >= 0 && i1 < r.W ? xr[ky] + i1 * C : kZeros, r.nl);
      acc0 += wv[ky * K + kx] * x0;
      acc1 += wv[ky * K + kx] * x1;
    }
  }
  store_y<I, Full>(yc + ox0 * C, nhwc::act_class<I, A>(acc0, act), r.nl);
  store_y<I, Full>(yc + ox1 * C, nhwc::act_class<I, A>(acc1, act), r.nl);
}

// One channel vector (weights wc, bias bc, input xc, output yc at its first channel) of one output
// row. 3x3 and 5x5 at stride 1 or 2 without dilation: the interior columns (every tap column inside
// the image) U at a time with the K x K weights in registers, then 4, 2, 1; the border columns two
// at a time (tap rows outside the image skipped throughout). Other kernels: column by column, dw_one.
template <class I, int K, int S, int A, bool Full>
INFER_INLINE void dw_channel_row(const DwRow& r, const float* xc, const float* wc, const float* bc, float* yc,
                                 const Activation& act) {
  using V = typename I::Vec;
  V b;
  mk::load(b, bc);
  V wv[K > 0 ? K * K : 1];
  if constexpr (K > 0)
    for (int t = 0; t < K * K; ++t) mk::load(wv[t], wc + t * r.Cp);
  if constexpr (K > 0 && S > 0) {
    constexpr int U = dw_unroll<I, K>();
    const int64_t lo = r.in_lo, hi = r.in_hi;
    const float* xr[K];
    for (int ky = 0; ky < K; ++ky) xr[ky] = xc + (r.iy0 + ky) * r.W * r.C;  // used for ky in [ky0, ky1)
    int64_t ox = lo;
    for (; ox + U <= hi; ox += U) dw_interior<I, K, S, A, Full, U>(r, xr, wv, b, ox, yc, act);
    if constexpr (U > 4)
      if (ox + 4 <= hi) dw_interior<I, K, S, A, Full, 4>(r, xr, wv, b, ox, yc, act), ox += 4;
    if (ox + 2 <= hi) dw_interior<I, K, S, A, Full, 2>(r, xr, wv, b, ox, yc, act), ox += 2;
    if (ox < hi) dw_interior<I, K, S, A, Full, 1>(r, xr, wv, b, ox, yc, act);
    // the border columns [0, lo) and [hi, WO), two at a time
    int64_t pending = -1;
    for (int64_t c = 0; c < r.WO; ++c) {
      if (c == lo) c = std::max(lo, hi);
      if (c >= r.WO) break;
      if (pending < 0) {
        pending = c;
      } else {
        dw_border2<I, K, A, Full>(r, xr, wv, b, pending, c, yc, act);
        pending = -1;
      }
    }
    if (pending >= 0) dw_one<I, K, A, Full>(r, xc, wv, wc, b, pending, yc, act);
  } else {
    for (int64_t ox = 0; ox < r.WO; ++ox) dw_one<I, K, A, Full>(r, xc, wv, wc, b, ox, yc, act);
  }
}

// One output row oy of image n, channels [c0, c1) (whole vectors but the last).
template <class I, int K, int A>
INFER_INLINE void dw_row(const DwDims& d, const float* x, const float* w, const float* bias, float* y, int64_t n,
                         int64_t oy, int64_t c0, int64_t c1, const Activation& act, const float* slope) {
  constexpr int L = I::kLanes;
  DwRow r{d.C, d.W, d.WO, d.KH, d.KW, d.sw, d.pl, d.dh, d.dw, d.Cp, d.in_lo, d.in_hi, 0, 0, 0, L};
  r.iy0 = oy * d.sh - d.pt;
  // tap rows inside the image: 0 <= iy0 + ky*dh < H
  r.ky0 = r.iy0 >= 0 ? 0 : std::min(d.KH, (-r.iy0 + d.dh - 1) / d.dh);
  r.ky1 = std::max(r.ky0, std::min(d.KH, d.H - r.iy0 <= 0 ? 0 : (d.H - r.iy0 - 1) / d.dh + 1));
  const float* xn = x + n * d.H * d.W * d.C;
  float* yrow = y + (n * d.HO + oy) * d.WO * d.C;
  // 3x3 / 5x5 at stride 1 or 2 without dilation take the interior loop (S > 0), others dw_one (S = 0)
  const int stride = K > 0 && d.dw == 1 && d.dh == 1 && (d.sw == 1 || d.sw == 2) ? static_cast<int>(d.sw) : 0;
  for (int64_t c = c0; c < c1; c += L) {
    r.nl = std::min<int64_t>(L, d.C - c);
    const float *xc = xn + c, *wc = w + c, *bc = bias + c;
    float* yc = yrow + c;
    if (r.nl == L) {
      if (stride == 1) dw_channel_row<I, K, 1, A, true>(r, xc, wc, bc, yc, act);
      else if (stride == 2) dw_channel_row<I, K, 2, A, true>(r, xc, wc, bc, yc, act);
      else dw_channel_row<I, K, 0, A, true>(r, xc, wc, bc, yc, act);
    } else {
      if (stride == 1) dw_channel_row<I, K, 1, A, false>(r, xc, wc, bc, yc, act);
      else if (stride == 2) dw_channel_row<I, K, 2, A, false>(r, xc, wc, bc, yc, act);
      else dw_channel_row<I, K, 0, A, false>(r, xc, wc, bc, yc, act);
    }
  }
  if constexpr (A == nhwc::kActScalar)
    for (int64_t ox = 0; ox < d.WO; ++ox)
      nhwc::activate_span<I>(yrow + ox * d.C + c0, c1 - c0, act, slope ? slope + c0 : nullptr);
}

template <class I, int A>
INFER_INLINE void dw_rows_act(const DwDims& d, const float* x, const float* w, const float* bias, float* y,
                              int64_t t0, int64_t t1, const Activation& act, const float* slope) {
  const int k = d.KH == d.KW && (d.KH == 3 || d.KH == 5) ? static_cast<int>(d.KH) : 0;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t g = t % d.groups, row = t / d.groups, n = row / d.HO, oy = row % d.HO;
    const int64_t c0 = g * d.group, c1 = std::min(d.C, c0 + d.group);
    if (k == 3) dw_row<I, 3, A>(d, x, w, bias, y, n, oy, c0, c1, act, slope);
    else if (k == 5) dw_row<I, 5, A>(d, x, w, bias, y, n, oy, c0, c1, act, slope);
    else dw_row<I, 0, A>(d, x, w, bias, y, n, oy, c0, c1, act, slope);
  }
}

template <class I>
INFER_INLINE void dw_rows_body(const DwDims& d, const float* x, const float* w, const float* bias, float* y,
                               int64_t t0, int64_t t1, const Activation& act, const float* slope) {
  switch (nhwc::act_class_of(act.kind)) {
    case nhwc::kActNone: return dw_rows_act<I, nhwc::kActNone>(d, x, w, bias, y, t0, t1, act, slope);
    case nhwc::kActRelu: return dw_rows_act<I, nhwc::kActRelu>(d, x, w, bias, y, t0, t1, act, slope);
    case nhwc::kActClip: return dw_rows_act<I, nhwc::kActClip>(d, x, w, bias, y, t0, t1, act, slope);
    case nhwc::kActVector: return dw_rows_act<I, nhwc::kActVector>(d, x, w, bias, y, t0, t1, act, slope);
    default:  // the per-element kinds and a per-channel PRelu (nhwc::activate_span)
      return dw_rows_act<I, nhwc::kActScalar>(d, x, w, bias, y, t0, t1, act, slope);
  }
}
INFER_PER_ISA(void, dw_rows, dw_rows_body,
              (const DwDims& d, const float* x, const float* w, const float* bias, float* y, int64_t t0,
               int64_t t1, const Activation& act, const float* slope),
              (d, x, w, bias, y, t0, t1, act, slope))

void dw_run(const KernelCall& call) {
  const DwDims d = dw_dims(call.node);
  const auto* prep = static_cast<const DwPrepared*>(call.prepared);
  if (!prep) throw Error("cpu conv2d.depthwise_nhwc: not prepared for this node");
  const Activation act = fused_activation(call.node.params);
  const float* slope = prelu_slope(call);
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const int64_t tasks = d.N * d.HO * d.groups;
  const bool parallel = d.N * d.HO * d.WO * d.C * d.KH * d.KW >= kParallelMin;
  const auto dw_rows = dw_rows_for(call.node.isa);
  const float *w = prep->w.data(), *bias = prep->bias.data();
  parallel_for(tasks, parallel, [&](int64_t t0, int64_t t1, int) { dw_rows(d, x, w, bias, y, t0, t1, act, slope); });
}

// Depthwise with one output channel per input channel (a channel multiplier would make the input a
// gather along the vector), a constant weight and bias, 4-D shapes.
bool dw_applicable(const NodeDesc& node) {
  if (!conv2d_depthwise(node) || !has_constant_weight(node)) return false;
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1];
  if (node.output_shapes[0].size() != 4 || ws[0] != xs[1]) return false;
  return node.input_shapes.size() < 3 || node.constants[2] != nullptr;
}

}  // namespace

INFER_REGISTER_KERNELS(conv2d_depthwise_nhwc) {
  // Priority 25, above the NCHW depthwise (20): the channels_last pass switches a graph to NHWC at its
  // first depthwise convolution (docs/kernels.md "CPU: the channels-last path": measured faster).
  registry.add("cpu", {
      {.op = "conv2d", .name = "depthwise_nhwc", .priority = 25, .layouts = {Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .fuses_prelu = true, .applicable = dw_applicable,
       .prepare = dw_prepare, .run = dw_run},
  });
}

}  // namespace infer::cpu
