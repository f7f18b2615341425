// Vectorised activations for the CPU kernels: activate_row<I>(y, n, act) applies any ActivationKind
// (infer/ops.h) to n contiguous floats with the ISA's vectors (isa.h: I::Vec of I::kLanes floats), the
// last n % kLanes as the (overlapping) vector that ends at n, a row shorter than one vector through a
// zero-padded one on the stack: every element takes the same code whatever its position.
// Always_inline templates in GCC vector extensions: call them from inside an INFER_PER_ISA function
// (or a body inlined into one), which is what makes them AVX-512, AVX2 or SSE2 code; called from a
// plain function they compile for baseline x86-64.
//
// exp is Cephes expf's, vectorised: n = round(x / ln 2) with the 1.5 * 2^23 rounding trick (n in the
// low mantissa bits), r = x - n ln2 in two parts (ln2 = 0.693359375 - 2.12194440e-4, the first part
// exact for n * it), e^r - 1 = r + r^2 P(r) with Cephes' degree-5 P on |r| <= ln2 / 2, then scaled by
// 2^n as 2^floor(n/2) * 2^(n - floor(n/2)): both factors normal for n in [-150, 128], so the result
// rounds once, overflows to +inf past ln(FLT_MAX) and goes through the denormals to 0 below -103.97
// like glibc's expf. expm1 (Elu) keeps e^r - 1 as computed: 2^n (e^r - 1) + (2^n - 1), no
// cancellation near 0. tanh is Cephes tanhf (an odd polynomial below |x| = 0.625, 1 - 2 / (e^2|x| + 1)
// above, the sign copied), log1p (Softplus) Cephes logf on 1 + t with Goldberg's correction
// t * log(1 + t) / ((1 + t) - 1). Every select is written so that a NaN input reaches the output,
// and each kind follows activate()'s formula (im2col.h) operation by operation, so the infinities
// give what it gives: silu(-inf) = -inf / inf = NaN, hardswish(-inf) = -inf * 0 = NaN, sigmoid(-inf)
// = 0. Error against activate() (glibc underneath) in docs/kernels.md "CPU: vectorised activations";
// tests/test_cpu_activation.cc checks it per level. Sqrt runs activate() per element (scalar).
#pragma once

#include <cstdint>
#include <cstring>

#include "infer/ops.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"

namespace infer::cpu::simd {

// The 32-bit integer vector as wide as V (a cast between the two reinterprets the bits).
// (A struct, not an alias template: GCC drops the attribute of a dependent alias.)
template <class V>
struct IntVecOf {
  typedef int32_t type __attribute__((vector_size(sizeof(V))));
};
template <class V>
using IntVec = typename IntVecOf<V>::type;

// Cephes' expf constants.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kRoundMagic = 12582912.f;  // 1.5 * 2^23: t + magic rounds t to an integer
constexpr float kExpHi = 89.f;             // above ln(FLT_MAX) = 88.72: the result is +inf
constexpr float kExpLo = -104.f;           // below ln(denorm_min / 2) = -103.97: the result is +0

// x = n ln2 + r, |r| <= ln2 / 2 (a little more after rounding), n integral; em1 = e^r - 1. x must be
// within [kExpLo, kExpHi] (or NaN: everything NaN then).
template <class V>
INFER_INLINE void exp_reduce(const V& x, IntVec<V>& n, V& em1) {
  using IV = IntVec<V>;
  const V t = x * kLog2e + kRoundMagic;
  n = (IV)t - (IV)(V{} + kRoundMagic);
  const V nf = t - kRoundMagic;
  V r = x - nf * kLn2Hi;
  r = r - nf * kLn2Lo;
  const V z = r * r;
  V p = (V{} + 1.9875691500E-4f);
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  em1 = p * z + r;
}

// s = 2^n for integral n in [-126, 127] (biased exponent bits). Vectors go by reference, in and out:
// by value they trip GCC's ABI warning outside the wider levels' functions (gemm_microkernel.h).
template <class V>
INFER_INLINE void pow2i(const IntVec<V>& n, V& s) {
  s = (V)((n + 127) << 23);
}

// x = e^x, in place.
template <class V>
INFER_INLINE void exp_inplace(V& x) {
  using IV = IntVec<V>;
  V c = x > kExpHi ? (V{} + kExpHi) : x;  // selects written to keep NaN
  c = c < kExpLo ? (V{} + kExpLo) : c;
  IV n;
  V em1;
  exp_reduce(c, n, em1);
  const IV n1 = n >> 1;  // floor(n / 2): n in [-150, 128], both halves in [-75, 64]
  V s1, s2;
  pow2i(n1, s1);
  pow2i<V>(n - n1, s2);
  x = (em1 + 1.f) * s1 * s2;
}

// x = e^x - 1 for x <= 0 (or NaN), in place.
template <class V>
INFER_INLINE void expm1_nonpositive_inplace(V& x) {
  using IV = IntVec<V>;
  const V c = x < -87.f ? (V{} - 87.f) : x;  // e^-87 < FLT_EPSILON^4: -1; 2^n stays normal
  IV n;
  V em1;
  exp_reduce(c, n, em1);
  V s;
  pow2i(n, s);
  x = x == 0.f ? x : em1 * s + (s - 1.f);  // -0 stays -0
}

// log(u) for u >= 1, finite (Cephes logf; Softplus needs u in [1, 2]).
template <class V>
INFER_INLINE void log_ge1(const V& u, V& out) {
  using IV = IntVec<V>;
  const IV bits = (IV)u;
  IV e = (bits >> 23) - 126;                  // u = m * 2^e, m in [0.5, 1)
  V m = (V)((bits & 0x007fffff) | 0x3f000000);
  const IV small = m < 0.707106781186547524f;  // m < sqrt(1/2): use 2m, e - 1
  e += small;                                  // small lanes are -1
  m = small ? m + m - 1.f : m - 1.f;
  const V ef = __builtin_convertvector(e, V);
  const V z = m * m;
  V p = (V{} + 7.0376836292E-2f);
  p = p * m - 1.1514610310E-1f;
  p = p * m + 1.1676998740E-1f;
  p = p * m - 1.2420140846E-1f;
  p = p * m + 1.4249322787E-1f;
  p = p * m - 1.6668057665E-1f;
  p = p * m + 2.0000714765E-1f;
  p = p * m - 2.4999993993E-1f;
  p = p * m + 3.3333331174E-1f;
  V y = m * z * p;
  y = y + ef * kLn2Lo;
  y = y - 0.5f * z;
  out = m + y + ef * kLn2Hi;
}

// log(1 + t) for t in [0, 1] (or NaN).
template <class V>
INFER_INLINE void log1p_unit(const V& t, V& out) {
  const V u = 1.f + t;
  const V d = u - 1.f;
  V l;
  log_ge1(u, l);
  // u == 1 (t below half an ulp of 1): log1p(t) = t; else Goldberg's log(u) * t / (u - 1)
  out = d == 0.f ? t : l * (t / d);
}

// tanh(x), in place (Cephes tanhf).
template <class V>
INFER_INLINE void tanh_inplace(V& x) {
  using IV = IntVec<V>;
  const IV sign = (IV)x & (int32_t)0x80000000;
  const V ax = (V)((IV)x & 0x7fffffff);
  const V z = ax * ax;
  V p = (V{} - 5.70498872745E-3f);
  p = p * z + 2.06390887954E-2f;
  p = p * z - 5.37397155531E-2f;
  p = p * z + 1.33314422036E-1f;
  p = p * z - 3.33332819422E-1f;
  const V small = ax + ax * z * p;
  V e = ax + ax;
  exp_inplace(e);
  const V big = 1.f - 2.f / (e + 1.f);
  x = (V)((IV)(ax < 0.625f ? small : big) | sign);  // tanh(|x|) with x's sign (-0 kept); NaN: big
}

// The per-kind functors: op(v) transforms one vector in place. Each follows activate() (im2col.h).
struct Relu {
  template <class V> INFER_INLINE void operator()(V& v) const { v = v < 0.f ? V{} : v; }
};
struct LeakyRelu {
  float alpha;
  template <class V> INFER_INLINE void operator()(V& v) const { v = v < 0.f ? v * alpha : v; }
};
struct Clip {
  float lo, hi;
  template <class V> INFER_INLINE void operator()(V& v) const {
    v = v < lo ? (V{} + lo) : v;
    v = v > hi ? (V{} + hi) : v;
  }
};
struct HardSigmoid {
  float alpha, beta;
  template <class V> INFER_INLINE void operator()(V& v) const {
    v = alpha * v + beta;
    Clip{0.f, 1.f}(v);
  }
};
struct HardSwish {
  template <class V> INFER_INLINE void operator()(V& v) const {
    V c = v + 3.f;
    Clip{0.f, 6.f}(c);
    v = v * c * (1.f / 6.f);
  }
};
struct Sigmoid {
  template <class V> INFER_INLINE void operator()(V& v) const {
    V e = -v;
    exp_inplace(e);
    v = 1.f / (1.f + e);
  }
};
struct Silu {
  template <class V> INFER_INLINE void operator()(V& v) const {
    V e = -v;
    exp_inplace(e);
    v = v / (1.f + e);
  }
};
struct Tanh {
  template <class V> INFER_INLINE void operator()(V& v) const { tanh_inplace(v); }
};
struct Exp {
  template <class V> INFER_INLINE void operator()(V& v) const { exp_inplace(v); }
};
struct Elu {
  float alpha;
  template <class V> INFER_INLINE void operator()(V& v) const {
    V m = v > 0.f ? V{} : v;  // NaN kept
    expm1_nonpositive_inplace(m);
    v = v > 0.f ? v : alpha * m;
  }
};
struct Softplus {
  // max(v, 0) + log1p(exp(-|v|)): activate()'s two branches in one
  template <class V> INFER_INLINE void operator()(V& v) const {
    using IV = IntVec<V>;
    V e = (V)((IV)v | (int32_t)0x80000000);  // -|v|
    exp_inplace(e);
    V l;
    log1p_unit(e, l);
    v = v > 0.f ? v + l : l;  // NaN: l (NaN)
  }
};
struct Neg {
  template <class V> INFER_INLINE void operator()(V& v) const { v = -v; }
};
struct Abs {
  template <class V> INFER_INLINE void operator()(V& v) const {
    using IV = IntVec<V>;
    v = (V)((IV)v & 0x7fffffff);
  }
};

// y[i] = op(x[i]) for i < n in vectors of I::kLanes (y may be x). The last n % kLanes: where n >= kLanes,
// as the whole vector that ends at n, loaded before the loop overwrites its first lanes (y == x) and
// stored after it (those lanes get the same values again); a shorter row goes through a zero-padded
// vector on the stack, copied element by element (a memcpy call per row cost more than the row).
template <class I, class Op>
INFER_INLINE void map_row(float* y, const float* x, int64_t n, const Op& op) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  if (n < L) {
    if (n <= 0) return;
    float buf[L];
    for (int j = 0; j < L; ++j) buf[j] = j < n ? x[j] : 0.f;
    V v;
    mk::load(v, buf);
    op(v);
    mk::store(buf, v);
    for (int j = 0; j < L; ++j)
      if (j < n) y[j] = buf[j];
    return;
  }
  V last;
  mk::load(last, x + n - L);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V v;
    mk::load(v, x + i);
    op(v);
    mk::store(y + i, v);
  }
  if (i < n) {
    op(last);
    mk::store(y + n - L, last);
  }
}

}  // namespace infer::cpu::simd

namespace infer::cpu {

// y[i] = activate(act, x[i]) for i < n (y may be x; None copies unless y == x).
template <class I>
INFER_INLINE void activate_row(float* y, const float* x, int64_t n, const Activation& act) {
  using simd::map_row;
  switch (act.kind) {
    case ActivationKind::None:
      if (y != x && n > 0) std::memmove(y, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case ActivationKind::Relu: return map_row<I>(y, x, n, simd::Relu{});
    case ActivationKind::LeakyRelu: return map_row<I>(y, x, n, simd::LeakyRelu{act.alpha});
    case ActivationKind::Tanh: return map_row<I>(y, x, n, simd::Tanh{});
    case ActivationKind::Sigmoid: return map_row<I>(y, x, n, simd::Sigmoid{});
    case ActivationKind::Clip: return map_row<I>(y, x, n, simd::Clip{act.alpha, act.beta});
    case ActivationKind::HardSigmoid: return map_row<I>(y, x, n, simd::HardSigmoid{act.alpha, act.beta});
    case ActivationKind::HardSwish: return map_row<I>(y, x, n, simd::HardSwish{});
    case ActivationKind::Silu: return map_row<I>(y, x, n, simd::Silu{});
    case ActivationKind::Elu: return map_row<I>(y, x, n, simd::Elu{act.alpha});
    case ActivationKind::Exp: return map_row<I>(y, x, n, simd::Exp{});
    case ActivationKind::Neg: return map_row<I>(y, x, n, simd::Neg{});
    case ActivationKind::Abs: return map_row<I>(y, x, n, simd::Abs{});
    case ActivationKind::Softplus: return map_row<I>(y, x, n, simd::Softplus{});
    default: break;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = activate(act, x[i]);  // Sqrt
}

// y[i] = activate(act, y[i]) for i < n, in place.
template <class I>
INFER_INLINE void activate_row(float* y, int64_t n, const Activation& act) {
  activate_row<I>(y, y, n, act);
}

}  // namespace infer::cpu
