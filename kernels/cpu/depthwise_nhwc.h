// The depthwise NHWC row kernel shared by conv2d.depthwise_nhwc (conv2d_depthwise_nhwc.cc, which says
// the method: channel vectors, the K x K weights in registers, U output columns per step) and
// depthwise_pointwise.fused_nhwc (depthwise_pointwise_nhwc.cc, which writes the rows into a per-thread
// tile): the geometry, the packed weight and dw_row, one output row of a range of channel vectors.
// always_inline templates over isa.h's traits: each caller instantiates them in its per-ISA functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "infer/kernel.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"

namespace infer::cpu::dwk {

constexpr int64_t kGroupVectors = 4;  // channel vectors per OpenMP iteration (conv2d.depthwise_nhwc)

struct DwDims {
  int64_t L;  // the ISA's lanes
  int64_t N, C, H, W, HO, WO, KH, KW, sh, sw, pt, pl, dh, dw;
  int64_t Cp;        // C rounded up to whole vectors
  int64_t group;     // channels per iteration (whole vectors)
  int64_t groups;    // channel groups
  int64_t in_lo, in_hi;  // output columns whose every tap column is inside the image
};

// The geometry of a depthwise conv2d p from x [N,C,H,W] with weight ws [C,1,KH,KW] to HO x WO outputs.
inline DwDims dw_dims(const Conv2DParams& p, const Shape& xs, const Shape& ws, int64_t HO, int64_t WO, CpuIsa level) {
  DwDims d;
  d.L = isa::shape(level).lanes;
  d.N = xs[0], d.C = xs[1], d.H = xs[2], d.W = xs[3], d.HO = HO, d.WO = WO, d.KH = ws[2], d.KW = ws[3];
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

// The weight w [C,1,KH,KW] re-laid out as [KH*KW][Cp] and the bias (nullptr: zeros) as [Cp].
inline void dw_pack(const DwDims& d, const float* w, const float* bias, DwPrepared& prep) {
  const int64_t taps = d.KH * d.KW;
  prep.w.assign(static_cast<size_t>(taps * d.Cp), 0.f);
  prep.bias.assign(static_cast<size_t>(d.Cp), 0.f);
  for (int64_t c = 0; c < d.C; ++c)
    for (int64_t t = 0; t < taps; ++t) prep.w[static_cast<size_t>(t * d.Cp + c)] = w[c * taps + t];
  if (bias) std::copy(bias, bias + d.C, prep.bias.begin());
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

alignas(64) inline constexpr float kZeros[16] = {};  // the input outside the image, one vector

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

// One output row oy of image n, channels [c0, c1) (whole vectors but the last), written at yrow (the
// row's first pixel; pixels C floats apart).
template <class I, int K, int A>
INFER_INLINE void dw_row(const DwDims& d, const float* x, const float* w, const float* bias, float* yrow, int64_t n,
                         int64_t oy, int64_t c0, int64_t c1, const Activation& act, const float* slope) {
  constexpr int L = I::kLanes;
  DwRow r{d.C, d.W, d.WO, d.KH, d.KW, d.sw, d.pl, d.dh, d.dw, d.Cp, d.in_lo, d.in_hi, 0, 0, 0, L};
  r.iy0 = oy * d.sh - d.pt;
  // tap rows inside the image: 0 <= iy0 + ky*dh < H
  r.ky0 = r.iy0 >= 0 ? 0 : std::min(d.KH, (-r.iy0 + d.dh - 1) / d.dh);
  r.ky1 = std::max(r.ky0, std::min(d.KH, d.H - r.iy0 <= 0 ? 0 : (d.H - r.iy0 - 1) / d.dh + 1));
  const float* xn = x + n * d.H * d.W * d.C;
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

}  // namespace infer::cpu::dwk
