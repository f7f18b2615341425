// CPU quantized_conv2d "depthwise" (issue 30): a QDQ depthwise conv (groups == C_in == C_out, kernel rows <= 64,
// any stride, dilation, padding), NHWC or NCHW, the reference's values: the input quantized once (quantize_linear's
// rounding), exact int32 pmaddwd sums over horizontal tap pairs, float(acc) * (x_scale * w_scale[c]) + bias[c] (+
// residual), activation; an 8-bit input (x_quantized) widened instead of quantized, an 8-bit output (y_dtype) each
// row's floats quantized from the slot. Threads: the kernels' team over (image, output row) in contiguous chunks, a ring of quantized
// pair rows in each thread's workspace slot (NHWC: vectors over channels); over (image, channel) planes (NCHW).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <omp.h>
#include <vector>

#include "infer/error.h"
#include "infer/kernel.h"
#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 17;  // multiply-adds of a node worth a second thread
constexpr int64_t kMaxSlots = 64;  // the most threads one node runs on (a workspace slot each)
// (q - zero) in [-255, 255] times w in [-128, 127]: |sum| <= taps * 32640 stays below 2^31 up to here.
constexpr int64_t kMaxTaps = 65536;
constexpr int64_t kMaxKH = 64;  // NHWC: a row's tap rows are pointers on the stack

struct DDims {
  int64_t N, C, H, W, HO, WO, KH, KW, sh, sw, pt, pl, dh, dw;
  int64_t L;    // int32 lanes a vector at this level
  int64_t Cp;   // C rounded up to whole vectors
  int64_t JP;   // tap pairs a tap row: (KW + 1) / 2, the last one's second tap with weight 0 for odd KW
  int64_t Hp, Wp;  // the padded rows / columns the taps read: (HO-1)*s + (K-1)*d + 1
  // NHWC: pair rows. A pair starts at column ox*sw + 2j*dw: every column (sw odd) or every other one
  // (sw even: xstep 2); Wx of them a row; the row buffer holds Wq padded columns (the last pair's
  // second tap included); the ring holds R = (KH-1)*dh + 1 pair rows, those of one output row.
  int64_t xstep, Wx, Wq, R;
  int64_t slots;
  bool nhwc;
  bool q_out;  // y is 8-bit (y_dtype): each output row is written as floats to the slot, then quantized
  size_t ring_bytes() const { return up(size_t(R * Cp * Wx) * 4); }
  size_t row_bytes() const { return up(std::max(size_t(Wq * C + L) * 2, size_t(Cp) * 4)); }  // + a vector past the end
  size_t out_bytes() const { return q_out ? up(size_t(WO * (nhwc ? C : 1)) * 4) : 0; }  // the float output row
  size_t slot_bytes() const {
    return (nhwc ? ring_bytes() + row_bytes() + up(size_t(Cp) * 4) : up(size_t(Hp * Wp) * 2) + up(size_t(WO) * 4)) +
           out_bytes();
  }
  size_t workspace() const { return size_t(slots) * slot_bytes(); }
  static size_t up(size_t b) { return (b + 255) / 256 * 256; }
};

DDims ddims(const NodeDesc& node) {
  const auto& p = std::get<QuantizedConv2DParams>(node.params).conv;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  DDims d{};
  d.N = x[0], d.C = x[1], d.H = x[2], d.W = x[3];
  d.KH = w[2], d.KW = w[3], d.HO = y[2], d.WO = y[3];
  d.sh = p.stride_h, d.sw = p.stride_w, d.pt = p.pad.top, d.pl = p.pad.left;
  d.dh = p.dilation_h, d.dw = p.dilation_w;
  d.L = isa::shape(node.isa).lanes;
  d.Cp = (d.C + d.L - 1) / d.L * d.L;
  d.JP = (d.KW + 1) / 2;
  d.Hp = (d.HO - 1) * d.sh + (d.KH - 1) * d.dh + 1;
  d.Wp = (d.WO - 1) * d.sw + (d.KW - 1) * d.dw + 1;
  d.xstep = d.sw % 2 == 0 ? 2 : 1;
  const int64_t xmax = (d.WO - 1) * d.sw + 2 * (d.JP - 1) * d.dw;  // the last pair's first column
  d.Wx = xmax / d.xstep + 1;
  d.Wq = xmax + d.dw + 1;
  d.R = (d.KH - 1) * d.dh + 1;
  d.nhwc = node.layout == Layout::NHWC;
  d.q_out = std::get<QuantizedConv2DParams>(node.params).y_dtype != DType::F32;
  // Slots: the threads this node may use as planned (a run with more threads uses no more than this).
  const int64_t threads = std::max(1, omp_get_max_threads());
  d.slots = std::clamp<int64_t>(threads, 1, std::min(kMaxSlots, d.nhwc ? d.N * d.HO : d.N * d.C));
  return d;
}

// Depthwise only: groups == C_in == C_out (weight [C,1,KH,KW]; C = 1 included), KH <= kMaxKH, the weight
// and its scales constants. Any stride, dilation and padding. (A PRelu epilogue never reaches here:
// the op's shape rule refuses it and variant_applies offers it only to fuses_prelu variants.)
bool applicable(const NodeDesc& node) {
  const auto& p = std::get<QuantizedConv2DParams>(node.params);
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1];
  return p.conv.groups == x[1] && w[0] == x[1] && w[1] == 1 && w[2] <= kMaxKH && w[2] * w[3] <= kMaxTaps &&
         node.constants.size() >= 3 && node.constants[1] && node.constants[2];
}

struct Prepared {
  // NHWC: [Cp / L][KH][JP][L] int32, each (w[c][ky][2j], w[c][ky][2j+1] or 0) as two int16 (low: tap
  // 2j), zeros past C; NCHW: [C][KH*KW] int32 (one weight each)
  std::vector<int32_t> w;
  std::vector<float> mult;  // x_scale * w_scale[c], [Cp] (zeros past C)
};

std::shared_ptr<void> prepare(const NodeDesc& node) {
  const auto& p = std::get<QuantizedConv2DParams>(node.params);
  const DDims d = ddims(node);
  const float* w = node.constants[1];
  const float* ws = node.constants[2];
  if (!w || !ws) throw Error("cpu quantized_conv2d.depthwise: the weight and its scale must be constants");
  auto prep = std::make_shared<Prepared>();
  const int64_t taps = d.KH * d.KW;
  quant::check_int8_weights(w, d.C * taps, "cpu quantized_conv2d.depthwise");
  if (d.nhwc) {
    const auto wq = [&](int64_t c, int64_t ky, int64_t kx) -> uint32_t {
      return kx < d.KW ? uint16_t(int16_t(w[(c * d.KH + ky) * d.KW + kx])) : 0u;
    };
    prep->w.assign(size_t(d.Cp * d.KH * d.JP), 0);
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t ky = 0; ky < d.KH; ++ky)
        for (int64_t j = 0; j < d.JP; ++j)
          prep->w[size_t((((c / d.L) * d.KH + ky) * d.JP + j) * d.L + c % d.L)] =
              static_cast<int32_t>(wq(c, ky, 2 * j) | (wq(c, ky, 2 * j + 1) << 16));
  } else {
    prep->w.resize(size_t(d.C * taps));
    for (int64_t i = 0; i < d.C * taps; ++i) prep->w[size_t(i)] = static_cast<int32_t>(w[i]);
  }
  prep->mult.assign(size_t(d.Cp), 0.f);
  quant::scale_multipliers(ws, node.input_shapes[2][0] != 1, p.x_scale, d.C, prep->mult.data(),
                           "cpu quantized_conv2d.depthwise");
  return prep;
}

// pmaddwd: lane i = a.lo16 * b.lo16 + a.hi16 * b.hi16 (exact in int32). GCC's target builtins, not the
// <immintrin.h> intrinsics, which GCC refuses to inline into a template before it is inlined into the
// per-level function (nhwc.h's load_n says the same); clang (the fuzz build) takes the shifts.
template <class I, class IV>
INFER_INLINE IV madd(IV a, IV b) {
#if !defined(__clang__)
  if constexpr (I::kIsa == CpuIsa::Avx512) {
    typedef short S __attribute__((vector_size(64)));
    return (IV)__builtin_ia32_pmaddwd512_mask((S)a, (S)b, IV{}, static_cast<uint16_t>(0xFFFF));
  } else if constexpr (I::kIsa == CpuIsa::Avx2) {
    typedef short S __attribute__((vector_size(32)));
    return (IV)__builtin_ia32_pmaddwd256((S)a, (S)b);
  } else {
    typedef short S __attribute__((vector_size(16)));
    return (IV)__builtin_ia32_pmaddwd128((S)a, (S)b);
  }
#else
  return ((a << 16) >> 16) * ((b << 16) >> 16) + (a >> 16) * (b >> 16);
#endif
}

template <class IV>
INFER_INLINE IV load_iv(const int32_t* p) {
  IV v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// An 8-bit input (x_quantized): its bytes, their type and zero point; x8 nullptr for a float input.
struct QIn {
  const uint8_t* x8 = nullptr;
  DType type = DType::U8;
  int32_t zero = 0;
};

// An 8-bit output (y_dtype U8 / I8): its bytes and quantize_linear; y8 nullptr for a float output.
struct QOut {
  uint8_t* y8 = nullptr;
  float scale = 1.f, zero = 0.f;
  DType type = DType::U8;
};

// (q - zero point) of the L 8-bit values at p as int32: what quantize_i32 gives for the floats they
// were quantized from.
// Zero-extension by pmovzxbd (AVX-512, AVX2) or two unpacks with zero (SSE2), an int8 type's sign
// then restored by shifts: GCC lowers __builtin_convertvector of bytes to a byte-by-byte insert
// sequence (measured: the 8-bit input path 2.4x slower than quantizing floats). GCC's target builtins,
// as madd(); clang (the fuzz build) converts element-wise.
template <class I, class IV = typename quant::I32Of<typename I::Vec>::type>
INFER_INLINE IV widen_i32(const uint8_t* p, const QIn& in) {
  IV v;
#if !defined(__clang__)
  typedef char B16 __attribute__((vector_size(16)));
  // the L bytes as one load into the low end of a vector (movq / movd zero the rest): a zeroed vector
  // on the stack with the bytes copied over it stalls store-to-load forwarding (measured: AVX2's depthwise
  // 1.6x slower with 8-bit inputs than with floats)
  B16 b;
  if constexpr (sizeof(IV) == 64) {
    std::memcpy(&b, p, 16);
  } else if constexpr (sizeof(IV) == 32) {
    typedef long long Q2 __attribute__((vector_size(16)));
    long long u;
    std::memcpy(&u, p, 8);
    b = (B16)Q2{u, 0};
  } else {
    typedef int D4 __attribute__((vector_size(16)));
    int u;
    std::memcpy(&u, p, 4);
    b = (B16)D4{u, 0, 0, 0};
  }
  if constexpr (I::kIsa == CpuIsa::Avx512) {
    v = (IV)__builtin_ia32_pmovzxbd512_mask(b, IV{}, static_cast<uint16_t>(0xFFFF));
  } else if constexpr (I::kIsa == CpuIsa::Avx2) {
    v = (IV)__builtin_ia32_pmovzxbd256(b);
  } else {
    typedef short S8 __attribute__((vector_size(16)));
    v = (IV)__builtin_ia32_punpcklwd128((S8)__builtin_ia32_punpcklbw128(b, B16{}), S8{});
  }
#else
  using BV = typename quant::U8Of<IV>::type;
  BV b;
  std::memcpy(&b, p, sizeof b);
  v = __builtin_convertvector(b, IV);
#endif
  if (in.type == DType::I8) v = (v << 24) >> 24;
  return v - in.zero;
}

// The epilogue of one output vector: float(acc) * mult + bias (two roundings, as the reference), the
// residual, then the activation of class A: none, ReLU or Clip here as selects against the bounds lo /
// hi (a NaN passes, as activate()); the others afterwards over the row. nl of its L lanes stored at y.
template <class I, int A>
INFER_INLINE void finish(typename quant::I32Of<typename I::Vec>::type acc, const typename I::Vec& mv,
                         const typename I::Vec& bv, const float* res, float* y, int64_t nl, const typename I::Vec& lo,
                         const typename I::Vec& hi) {
  using V = typename I::Vec;
  V v = opaque(__builtin_convertvector(acc, V) * mv) + bv;
  if (res) {
    V rv;
    nhwc::load_upto<I>(rv, res, nl);
    v += rv;
  }
  if constexpr (A == nhwc::kActRelu || A == nhwc::kActClip) v = quant::max_keep_nan<I>(lo, v);
  if constexpr (A == nhwc::kActClip) v = quant::min_keep_nan<I>(hi, v);
  nhwc::store_upto<I>(y, v, nl);
}

// One output row of one channel vector for a KH x KW kernel (JP tap pairs a tap row) at stride S,
// dilation 1: the weights and the tap rows' pointers in registers, U pixels at a time (independent
// sums), each pixel's pair of tap row ky and pair j at column (ox*S + 2j) / xstep of rp[ky].
template <class I, int KH, int JP, int S, int A>
INFER_INLINE void row_fixed(const int32_t* const* rows, const int32_t* w, const typename I::Vec& mv,
                            const typename I::Vec& bv, const float* res, float* y, int64_t C, int64_t WO, int64_t nl,
                            const Activation& act) {
  using V = typename I::Vec;
  using IV = typename quant::I32Of<V>::type;
  // pixels a step: 4 with AVX-512's 32 registers, 2 with 16 (the weights, U sums, the epilogue's
  // constants and a temporary without spills at 3x3)
  constexpr int L = I::kLanes, U = I::kIsa == CpuIsa::Avx512 ? 4 : 2, XS = S % 2 ? 1 : 2;
  const V lo = V{} + (A == nhwc::kActClip ? act.alpha : 0.f), hi = V{} + act.beta;  // ReLU: lo only
  const int32_t* rp[KH];
  IV wv[KH * JP];
#pragma GCC unroll 32
  for (int k = 0; k < KH; ++k) rp[k] = rows[k];
#pragma GCC unroll 32
  for (int t = 0; t < KH * JP; ++t) wv[t] = load_iv<IV>(w + t * L);
  int64_t ox = 0;
  for (; ox + U <= WO; ox += U) {
    IV acc[U];
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) acc[u] = IV{};
#pragma GCC unroll 8
    for (int k = 0; k < KH; ++k)
#pragma GCC unroll 8
      for (int j = 0; j < JP; ++j)
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u)
          acc[u] += madd<I>(load_iv<IV>(rp[k] + ((ox + u) * S + 2 * j) / XS * L), wv[k * JP + j]);
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u)
      finish<I, A>(acc[u], mv, bv, res ? res + (ox + u) * C : nullptr, y + (ox + u) * C, nl, lo, hi);
  }
  for (; ox < WO; ++ox) {
    IV acc{};
#pragma GCC unroll 8
    for (int k = 0; k < KH; ++k)
#pragma GCC unroll 8
      for (int j = 0; j < JP; ++j) acc += madd<I>(load_iv<IV>(rp[k] + (ox * S + 2 * j) / XS * L), wv[k * JP + j]);
    finish<I, A>(acc, mv, bv, res ? res + ox * C : nullptr, y + ox * C, nl, lo, hi);
  }
}

// The same for any kernel, stride and dilation: the weights read from w, one pixel at a time.
template <class I>
INFER_INLINE void row_any(const int32_t* const* rp, const int32_t* w, const typename I::Vec& mv,
                          const typename I::Vec& bv, const float* res, float* y, int64_t C, int64_t WO, int64_t nl,
                          int64_t KH, int64_t JP, int64_t sw, int64_t dw, int64_t xstep) {
  using IV = typename quant::I32Of<typename I::Vec>::type;
  constexpr int L = I::kLanes;
  for (int64_t ox = 0; ox < WO; ++ox) {
    IV acc{};
    for (int64_t k = 0; k < KH; ++k)
      for (int64_t j = 0; j < JP; ++j)
        acc += madd<I>(load_iv<IV>(rp[k] + (ox * sw + 2 * j * dw) / xstep * L), load_iv<IV>(w + (k * JP + j) * L));
    finish<I, nhwc::kActNone>(acc, mv, bv, res ? res + ox * C : nullptr, y + ox * C, nl, mv, mv);
  }
}

// Pair row of padded row pr (input row pr - pt) of image n into `ring` (its slot pr % R): per channel
// vector [Wx][L] int32, pair xi = (q[x][c], q[x+dw][c]) as two int16 with x = xi * xstep, q = the
// quantized input (q - zero point; zeros in the padding). A padding row is zeros. Dilation 1: the
// columns quantized in order in registers, each once, and paired with the next; else the row
// quantized into the row buffer `q` first.
template <class I>
INFER_INLINE void build_pair_row(const DDims& d, const float* x, const QIn& in, float scale, float zero, float qlo,
                                 float qhi, int64_t n, int64_t pr, int32_t* ring, int16_t* q) {
  using V = typename I::Vec;
  using IV = typename quant::I32Of<V>::type;
  using SV = typename quant::I16Of<V>::type;
  constexpr int L = I::kLanes;
  int32_t* out = ring + (pr % d.R) * d.Cp * d.Wx;
  const int64_t iy = pr - d.pt;
  if (iy < 0 || iy >= d.H) {
    std::memset(out, 0, size_t(d.Cp * d.Wx) * 4);
    return;
  }
  const int64_t C = d.C, x0 = std::min(d.Wq, d.pl), x1 = std::clamp<int64_t>(d.pl + d.W, x0, d.Wq);
  const int64_t base = ((n * d.H + iy) * d.W - d.pl) * C;  // padded column x at base + x * C
  const float* xr = in.x8 ? nullptr : x + base;
  const uint8_t* xr8 = in.x8 ? in.x8 + base : nullptr;
  if (d.dw == 1) {
    // columns in memory order, each quantized once; the previous column's values wait in `prev` (Cp
    // int32, the row buffer); pair xi = (column xi * xstep, the next column), written with its second
    // column. Whole vectors of channels, then the last (partial) one through a copy on the stack.
    auto* prev = reinterpret_cast<int32_t*>(q);
    const int64_t Cp = d.Cp, Wx = d.Wx, Cf = C / L * L, cols = d.xstep == 1 ? Wx + 1 : 2 * Wx;
    const V vs = V{} + scale;
    const IV lo = IV{} + int32_t(qlo - zero), hi = IV{} + int32_t(qhi - zero), mask = IV{} + 0xFFFF;
    for (int64_t col = 0; col < cols; ++col) {
      const bool inside = col >= x0 && col < x1;
      const bool emit = d.xstep == 1 ? col > 0 : col % 2 == 1;
      int32_t* o = out + (d.xstep == 1 ? col - 1 : col / 2) * L;
      const float* src = in.x8 ? nullptr : xr + col * C;
      const uint8_t* src8 = in.x8 ? xr8 + col * C : nullptr;
      const auto one = [&](int64_t cv, const IV& v) {
        if (emit) {
          IV p0;
          std::memcpy(&p0, prev + cv, sizeof p0);
          const IV pair = (p0 & mask) | (v << 16);
          std::memcpy(o + cv * Wx, &pair, sizeof pair);
        }
        std::memcpy(prev + cv, &v, sizeof v);
      };
      if (inside && src8) {
        for (int64_t cv = 0; cv < Cf; cv += L) one(cv, widen_i32<I>(src8 + cv, in));
        if (Cf < Cp) {
          uint8_t t[L] = {};
          std::memcpy(t, src8 + Cf, size_t(C - Cf));
          one(Cf, widen_i32<I>(t, in));  // lanes past C: weight 0
        }
      } else if (inside) {
        for (int64_t cv = 0; cv < Cf; cv += L) one(cv, quant::quantize_i32<I>(src + cv, vs, lo, hi));
        if (Cf < Cp) {
          float t[L] = {};
          std::memcpy(t, src + Cf, size_t(C - Cf) * 4);
          one(Cf, quant::quantize_i32<I>(t, vs, lo, hi));
        }
      } else {
        for (int64_t cv = 0; cv < Cp; cv += L) one(cv, IV{});
      }
    }
    return;
  }
  std::memset(q, 0, size_t(x0 * C) * 2);
  if (x1 > x0 && in.x8)
    quant::widen_row_i16<I>(xr8 + x0 * C, (x1 - x0) * C, in.type, in.zero, q + x0 * C);
  else if (x1 > x0)
    quant::quantize_row_i16<I>(xr + x0 * C, (x1 - x0) * C, scale, zero, qlo, qhi, q + x0 * C);
  std::memset(q + x1 * C, 0, size_t((d.Wq - x1) * C + L) * 2);
  const int64_t step = d.xstep * C, second = d.dw * C;
  for (int64_t cv = 0; cv < d.Cp; cv += L) {
    int32_t* o = out + cv * d.Wx;
    const int16_t* a = q + cv;
    for (int64_t xi = 0; xi < d.Wx; ++xi, a += step, o += L) {
      SV lo, hi;
      std::memcpy(&lo, a, sizeof lo);
      std::memcpy(&hi, a + second, sizeof hi);
      const IV v = (__builtin_convertvector(lo, IV) & 0xFFFF) | (__builtin_convertvector(hi, IV) << 16);
      std::memcpy(o, &v, sizeof v);
    }
  }
}

// Output rows it0 .. it1-1 of the flattened (image, output row) range, NHWC, in order: the pair rows
// each needs and the ring lacks are built (a row once, while it stays in the ring), then per channel
// vector the row's pixels, then the activations that are not a few vector operations.
template <class I>
INFER_INLINE void nhwc_rows_body(const DDims& d, const Prepared& prep, const float* x, const QIn& in, float scale,
                                 float zero, float qlo, float qhi, const float* bias, const float* residual,
                                 const Activation& act, float* y, const QOut& out, int64_t it0, int64_t it1,
                                 char* slot) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  auto* ring = reinterpret_cast<int32_t*>(slot);
  auto* q = reinterpret_cast<int16_t*>(slot + d.ring_bytes());
  auto* bp = reinterpret_cast<float*>(slot + d.ring_bytes() + d.row_bytes());
  auto* yrow = reinterpret_cast<float*>(slot + d.ring_bytes() + d.row_bytes() + DDims::up(size_t(d.Cp) * 4));
  std::copy(bias, bias + d.C, bp);
  std::fill(bp + d.C, bp + d.Cp, 0.f);
  // 3x3 / 5x5 at stride 1 / 2, dilation 1, with ReLU, ReLU6 (Clip) or none fused: fixed kernels
  const int cls = nhwc::act_class_of(act.kind);
  const bool fused_act = cls == nhwc::kActNone || cls == nhwc::kActRelu || cls == nhwc::kActClip;
  const int shape = d.dw == 1 && d.KH == d.KW && fused_act && (d.sw == 1 || d.sw == 2)
                        ? (d.KH == 3 ? 1 : d.KH == 5 ? 3 : 0) + (d.KH == 3 || d.KH == 5 ? int(d.sw - 1) : 0)
                        : 0;  // 0: row_any; 1, 2: 3x3 s1, s2; 3, 4: 5x5 s1, s2
  const int64_t C = d.C, WO = d.WO;
  int64_t n_built = -1, built = -1;  // the image and the last padded row the ring holds
  const int32_t* rp[kMaxKH];
  for (int64_t it = it0; it < it1; ++it) {
    const int64_t n = it / d.HO, oy = it % d.HO, first = oy * d.sh, last = first + (d.KH - 1) * d.dh;
    if (n != n_built) n_built = n, built = -1;
    for (int64_t pr = std::max(built + 1, first); pr <= last; ++pr)
      build_pair_row<I>(d, x, in, scale, zero, qlo, qhi, n, pr, ring, q);
    built = last;
    const int64_t at = (n * d.HO + oy) * WO * C;
    float* yr = out.y8 ? yrow : y + at;
    const float* res = residual ? residual + at : nullptr;
    for (int64_t cv = 0; cv < d.Cp; cv += L) {
      for (int64_t ky = 0; ky < d.KH; ++ky) rp[ky] = ring + ((first + ky * d.dh) % d.R) * d.Cp * d.Wx + cv * d.Wx;
      const int32_t* w = prep.w.data() + cv * d.KH * d.JP;
      V mv, bv;
      mk::load(mv, prep.mult.data() + cv);
      mk::load(bv, bp + cv);
      const int64_t nl = std::min<int64_t>(L, C - cv);
      const float* rc = res ? res + cv : nullptr;
      float* yc = yr + cv;
#define INFER_QDW_ROW(KH, JP, S)                                                                               \
  (cls == nhwc::kActRelu   ? row_fixed<I, KH, JP, S, nhwc::kActRelu>(rp, w, mv, bv, rc, yc, C, WO, nl, act) \
   : cls == nhwc::kActClip ? row_fixed<I, KH, JP, S, nhwc::kActClip>(rp, w, mv, bv, rc, yc, C, WO, nl, act) \
                           : row_fixed<I, KH, JP, S, nhwc::kActNone>(rp, w, mv, bv, rc, yc, C, WO, nl, act))
      switch (shape) {
        case 1: INFER_QDW_ROW(3, 2, 1); break;
        case 2: INFER_QDW_ROW(3, 2, 2); break;
        case 3: INFER_QDW_ROW(5, 3, 1); break;
        case 4: INFER_QDW_ROW(5, 3, 2); break;
        default: row_any<I>(rp, w, mv, bv, rc, yc, C, WO, nl, d.KH, d.JP, d.sw, d.dw, d.xstep);
      }
#undef INFER_QDW_ROW
    }
    if (shape == 0 && act.kind != ActivationKind::None) activate_row<I>(yr, WO * C, act);
    if (out.y8) quant::quantize_row_q8<I>(yr, WO * C, out.scale, out.zero, out.type, out.y8 + at);
  }
}
INFER_PER_ISA(void, nhwc_rows, nhwc_rows_body,
              (const DDims& d, const Prepared& prep, const float* x, const QIn& in, float scale, float zero, float qlo,
               float qhi, const float* bias, const float* residual, const Activation& act, float* y, const QOut& out,
               int64_t it0, int64_t it1, char* slot),
              (d, prep, x, in, scale, zero, qlo, qhi, bias, residual, act, y, out, it0, it1, slot))

// Plane (n, c), NCHW: the input plane quantized into the slot as int16 with its padding (zeros), then
// per output row the int32 sums over the taps (vectorised along the row by the compiler), the
// epilogue, the residual and the activation.
template <class I>
INFER_INLINE void nchw_plane_body(const DDims& d, const Prepared& prep, const float* x, const QIn& in, float scale,
                                  float zero, float qlo, float qhi, const float* bias, const float* residual,
                                  const Activation& act, float* y, const QOut& out, int64_t n, int64_t c, char* slot) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  auto* q = reinterpret_cast<int16_t*>(slot);
  auto* acc = reinterpret_cast<int32_t*>(slot + DDims::up(size_t(d.Hp * d.Wp) * 2));
  auto* yrow = reinterpret_cast<float*>(slot + DDims::up(size_t(d.Hp * d.Wp) * 2) + DDims::up(size_t(d.WO) * 4));
  const int64_t plane = (n * d.C + c) * d.H * d.W;
  const float* xp = in.x8 ? nullptr : x + plane;
  const uint8_t* xp8 = in.x8 ? in.x8 + plane : nullptr;
  for (int64_t r = 0; r < d.Hp; ++r) {
    int16_t* qr = q + r * d.Wp;
    const int64_t iy = r - d.pt;
    if (iy < 0 || iy >= d.H) {
      std::fill(qr, qr + d.Wp, int16_t{0});
      continue;
    }
    const int64_t x0 = std::min(d.Wp, d.pl), x1 = std::clamp<int64_t>(d.pl + d.W, x0, d.Wp);
    std::fill(qr, qr + x0, int16_t{0});
    if (x1 > x0 && xp8)
      quant::widen_row_i16<I>(xp8 + iy * d.W + (x0 - d.pl), x1 - x0, in.type, in.zero, qr + x0);
    else if (x1 > x0)
      quant::quantize_row_i16<I>(xp + iy * d.W + (x0 - d.pl), x1 - x0, scale, zero, qlo, qhi, qr + x0);
    std::fill(qr + x1, qr + d.Wp, int16_t{0});
  }
  const int32_t* w = prep.w.data() + c * d.KH * d.KW;
  const float m = prep.mult[size_t(c)], b = bias[c];
  const int64_t WO = d.WO, sw = d.sw;
  for (int64_t oy = 0; oy < d.HO; ++oy) {
    std::fill(acc, acc + WO, 0);
    for (int64_t ky = 0; ky < d.KH; ++ky)
      for (int64_t kx = 0; kx < d.KW; ++kx) {
        const int32_t wk = w[ky * d.KW + kx];
        const int16_t* src = q + (oy * d.sh + ky * d.dh) * d.Wp + kx * d.dw;
        if (sw == 1)
          for (int64_t ox = 0; ox < WO; ++ox) acc[ox] += int32_t(src[ox]) * wk;
        else
          for (int64_t ox = 0; ox < WO; ++ox) acc[ox] += int32_t(src[ox * sw]) * wk;
      }
    const int64_t at = ((n * d.C + c) * d.HO + oy) * WO;
    float* yr = out.y8 ? yrow : y + at;
    int64_t ox = 0;
    for (; ox + L <= WO; ox += L) {
      typename quant::I32Of<V>::type a;
      std::memcpy(&a, acc + ox, sizeof a);
      const V f = opaque(__builtin_convertvector(a, V) * m) + b;
      std::memcpy(yr + ox, &f, sizeof f);
    }
    for (; ox < WO; ++ox) yr[ox] = opaque(static_cast<float>(acc[ox]) * m) + b;
    if (residual)
      for (int64_t i = 0; i < WO; ++i) yr[i] += residual[at + i];
    if (act.kind != ActivationKind::None) activate_row<I>(yr, WO, act);
    if (out.y8) quant::quantize_row_q8<I>(yr, WO, out.scale, out.zero, out.type, out.y8 + at);
  }
}
INFER_PER_ISA(void, nchw_plane, nchw_plane_body,
              (const DDims& d, const Prepared& prep, const float* x, const QIn& in, float scale, float zero, float qlo,
               float qhi, const float* bias, const float* residual, const Activation& act, float* y, const QOut& out,
               int64_t n, int64_t c, char* slot),
              (d, prep, x, in, scale, zero, qlo, qhi, bias, residual, act, y, out, n, c, slot))

size_t workspace(const NodeDesc& node) { return ddims(node).workspace(); }

void run(const KernelCall& call) {
  const auto& p = std::get<QuantizedConv2DParams>(call.node.params);
  const auto* prep = static_cast<const Prepared*>(call.prepared);
  if (!prep) throw Error("cpu quantized_conv2d.depthwise: not prepared for this node");
  if (!call.workspace) throw Error("cpu quantized_conv2d.depthwise: needs a workspace, got none");
  const DDims d = ddims(call.node);
  auto* ws = static_cast<char*>(call.workspace);
  const float* x = call.inputs[0];
  const float* bias = call.inputs[3];
  const float* residual = p.conv.add_residual ? call.inputs[4] : nullptr;
  float* y = call.outputs[0];
  const Activation act = p.conv.activation;
  const bool parallel = d.N * d.HO * d.WO * d.C * d.KH * d.KW >= kParallelMin;
  float qlo, qhi;
  quant::range_of(p.x_dtype, qlo, qhi);
  const float zero = float(p.x_zero_point);
  QIn in;
  if (p.x_quantized) in = {reinterpret_cast<const uint8_t*>(call.inputs[0]), p.x_dtype, p.x_zero_point};
  QOut out;
  if (d.q_out) out = {reinterpret_cast<uint8_t*>(call.outputs[0]), p.y_scale, float(p.y_zero_point), p.y_dtype};
  if (d.nhwc) {
    const auto rows = nhwc_rows_for(call.node.isa);
    parallel_for(
        d.N * d.HO, parallel,
        [&](int64_t b, int64_t e, int t) {
          rows(d, *prep, x, in, p.x_scale, zero, qlo, qhi, bias, residual, act, y, out, b, e,
               ws + size_t(t) * d.slot_bytes());
        },
        static_cast<int>(d.slots));
  } else {
    const auto plane = nchw_plane_for(call.node.isa);
    parallel_for(
        d.N * d.C, parallel,
        [&](int64_t b, int64_t e, int t) {
          char* slot = ws + size_t(t) * d.slot_bytes();
          for (int64_t it = b; it < e; ++it)
            plane(d, *prep, x, in, p.x_scale, zero, qlo, qhi, bias, residual, act, y, out, it / d.C, it % d.C, slot);
        },
        static_cast<int>(d.slots));
  }
}

}  // namespace

INFER_REGISTER_KERNELS(quantized_depthwise) {
  // NHWC ranks higher (vectors over the channels), as qgemm's does, so the channels_last pass keeps a
  // quantized graph NHWC through its depthwise convolutions
  registry.add("cpu", {{.op = "quantized_conv2d", .name = "depthwise", .priority = 10,
                        .priority_for = [](const NodeDesc& d) { return d.layout == Layout::NHWC ? 11 : 10; },
                        .layouts = {Layout::NCHW, Layout::NHWC},
                        .isa = KernelVariant::Isa::PerIsa,
                        .applicable = applicable,
                        .workspace_bytes = workspace,
                        .prepare = prepare,
                        .run = run}});
}

}  // namespace infer::cpu
