// The depthwise NHWC row kernel (depthwise_nhwc.h; the method is in conv2d_depthwise_nhwc.cc's header):
// one output row of a range of channel vectors, at each ISA level. Compiled here once for both of its
// users. Each (level, K, stride, activation class) is its own function, compiled for its level: inlined into one function a level, the variants made functions on which
// GCC's register dataflow spent minutes (and ASan / UBSan far longer, in every CI build).
#include "kernels/cpu/depthwise_nhwc.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"

namespace infer::cpu::dwk {
namespace {

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
INFER_INLINE void dw_channel_row_body(const DwRow& r, const float* xc, const float* wc, const float* bc, float* yc,
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

// Channels [c0, c1) of one output row (r without nl), one channel vector after another: whole vectors,
// then the last one masked where C is not a multiple of the lanes.
template <class I, int K, int S, int A>
INFER_INLINE void dw_channels_body(DwRow r, const float* xn, const float* w, const float* bias, float* yrow,
                                   int64_t c0, int64_t c1, const Activation& act) {
  constexpr int L = I::kLanes;
  for (int64_t c = c0; c < c1; c += L) {
    r.nl = std::min<int64_t>(L, r.C - c);
    if (r.nl == L) dw_channel_row_body<I, K, S, A, true>(r, xn + c, w + c, bias + c, yrow + c, act);
    else dw_channel_row_body<I, K, S, A, false>(r, xn + c, w + c, bias + c, yrow + c, act);
  }
}

// dw_channels<K, S, A>(I{}, ...): dw_channels_body out of line at level I, one function per (level, K,
// S, A) (28 a level; a call per output row).
#define INFER_DW_CHANNELS_AT(ATTR, I)                                                                     \
  template <int K, int S, int A>                                                                          \
  [[gnu::noinline]] ATTR void dw_channels(I, const DwRow& r, const float* xn, const float* w, const float* bias, \
                                          float* yrow, int64_t c0, int64_t c1, const Activation& act) {   \
    dw_channels_body<I, K, S, A>(r, xn, w, bias, yrow, c0, c1, act);                                      \
  }
INFER_DW_CHANNELS_AT(INFER_TARGET_AVX512, isa::Avx512)
INFER_DW_CHANNELS_AT(INFER_TARGET_AVX2, isa::Avx2)
INFER_DW_CHANNELS_AT(, isa::Baseline)
#undef INFER_DW_CHANNELS_AT

// One output row oy of image n, channels [c0, c1) (whole vectors but the last), written at yrow (the
// row's first pixel; pixels C floats apart).
template <class I, int K, int A>
INFER_INLINE void dw_row_body(const DwDims& d, const float* x, const float* w, const float* bias, float* yrow, int64_t n,
                         int64_t oy, int64_t c0, int64_t c1, const Activation& act, const float* slope) {
  // a per-element activation (kActScalar) is applied after the row: its channel rows are kActNone's
  constexpr int CA = A == nhwc::kActScalar ? nhwc::kActNone : A;
  DwRow r{d.C, d.W, d.WO, d.KH, d.KW, d.sw, d.pl, d.dh, d.dw, d.Cp, d.in_lo, d.in_hi, 0, 0, 0, I::kLanes};
  r.iy0 = oy * d.sh - d.pt;
  // tap rows inside the image: 0 <= iy0 + ky*dh < H
  r.ky0 = r.iy0 >= 0 ? 0 : std::min(d.KH, (-r.iy0 + d.dh - 1) / d.dh);
  r.ky1 = std::max(r.ky0, std::min(d.KH, d.H - r.iy0 <= 0 ? 0 : (d.H - r.iy0 - 1) / d.dh + 1));
  const float* xn = x + n * d.H * d.W * d.C;
  // 3x3 / 5x5 at stride 1 or 2 without dilation take the interior loop (S > 0), others dw_one (S = 0;
  // K ? S : 0 keeps the K = 0 instantiations to S = 0)
  const int stride = K > 0 && d.dw == 1 && d.dh == 1 && (d.sw == 1 || d.sw == 2) ? static_cast<int>(d.sw) : 0;
  if (K > 0 && stride == 1) dw_channels<K, K ? 1 : 0, CA>(I{}, r, xn, w, bias, yrow, c0, c1, act);
  else if (K > 0 && stride == 2) dw_channels<K, K ? 2 : 0, CA>(I{}, r, xn, w, bias, yrow, c0, c1, act);
  else dw_channels<K, 0, CA>(I{}, r, xn, w, bias, yrow, c0, c1, act);
  if constexpr (A == nhwc::kActScalar)
    for (int64_t ox = 0; ox < d.WO; ++ox)
      nhwc::activate_span<I>(yrow + ox * d.C + c0, c1 - c0, act, slope ? slope + c0 : nullptr);
}

// dw_row_avx512<K, A> ...: DwRowFn's for each level.
#define INFER_DW_ROW_AT(ATTR, I, NAME)                                                                  \
  template <int K, int A>                                                                               \
  ATTR void NAME(const DwDims& d, const float* x, const float* w, const float* bias, float* yrow, int64_t n, \
                 int64_t oy, int64_t c0, int64_t c1, const Activation& act, const float* slope) {       \
    dw_row_body<I, K, A>(d, x, w, bias, yrow, n, oy, c0, c1, act, slope);                               \
  }
INFER_DW_ROW_AT(INFER_TARGET_AVX512, isa::Avx512, dw_row_avx512)
INFER_DW_ROW_AT(INFER_TARGET_AVX2, isa::Avx2, dw_row_avx2)
INFER_DW_ROW_AT(, isa::Baseline, dw_row_baseline)
#undef INFER_DW_ROW_AT

template <int K, int A>
DwRowFn at_level(CpuIsa level) {
  return level == CpuIsa::Avx512 ? &dw_row_avx512<K, A>
         : level == CpuIsa::Avx2 ? &dw_row_avx2<K, A>
                                 : &dw_row_baseline<K, A>;
}

template <int K>
DwRowFn with_act(CpuIsa level, ActivationKind act) {
  switch (nhwc::act_class_of(act)) {
    case nhwc::kActNone: return at_level<K, nhwc::kActNone>(level);
    case nhwc::kActRelu: return at_level<K, nhwc::kActRelu>(level);
    case nhwc::kActClip: return at_level<K, nhwc::kActClip>(level);
    case nhwc::kActVector: return at_level<K, nhwc::kActVector>(level);
    default: return at_level<K, nhwc::kActScalar>(level);  // per element, and a per-channel PRelu
  }
}

}  // namespace

DwRowFn dw_row_fn(CpuIsa level, const DwDims& d, ActivationKind act) {
  // 3x3 and 5x5 have the weights in registers (K > 0); the others take dw_one (K = 0)
  const int64_t k = d.KH == d.KW && (d.KH == 3 || d.KH == 5) ? d.KH : 0;
  return k == 3 ? with_act<3>(level, act) : k == 5 ? with_act<5>(level, act) : with_act<0>(level, act);
}

}  // namespace infer::cpu::dwk
