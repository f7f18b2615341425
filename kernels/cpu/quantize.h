// quantize_linear's arithmetic for the CPU kernels, vectorised with GCC vector extensions at every ISA
// level (always_inline templates over isa.h's traits: call them from an INFER_PER_ISA function):
// t = x / scale, rounded half to even by adding and subtracting 1.5 * 2^23 (exact in the default rounding mode for |t| <= 2^22; t is clamped
// there first, far outside any integer range), plus the zero point, saturated to [lo, hi], NaN to lo:
// the values of the reference kernel (kernels/reference/quantize.cc, std::nearbyint), bit for bit.
#pragma once

#include <immintrin.h>  // declares the x86 builtins store_u8x4 uses

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "infer/error.h"
#include "infer/ops.h"
#include "kernels/cpu/isa.h"

namespace infer::cpu::quant {

// What both quantized_conv2d variants check of their constants in prepare(), once here: each of the n
// weight_q values an int8 integer, and mult[k] = x_scale * weight_scale[k] for k < channels (a [1]
// scale repeated), every scale finite and > 0. Errors name `variant` ("cpu quantized_conv2d.qgemm").
inline void check_int8_weights(const float* w, int64_t n, const char* variant) {
  for (int64_t i = 0; i < n; ++i)
    if (!(w[i] >= -128.f && w[i] <= 127.f) || w[i] != std::nearbyint(w[i]))
      throw Error(std::string(variant) + ": weight_q holds " + std::to_string(w[i]) + ", not an int8 value");
}
inline void scale_multipliers(const float* scales, bool per_channel, float x_scale, int64_t channels, float* mult,
                              const char* variant) {
  for (int64_t k = 0; k < channels; ++k) {
    const float s = scales[per_channel ? k : 0];
    if (!std::isfinite(s) || !(s > 0.f))
      throw Error(std::string(variant) + ": weight_scale holds " + std::to_string(s) + " (finite and > 0)");
    mult[k] = x_scale * s;
  }
}

// The integer range of a quantize_linear output type, as floats: I8 [-128, 127], else U8 [0, 255].
inline void range_of(DType type, float& lo, float& hi) {
  lo = type == DType::I8 ? -128.f : 0.f;
  hi = type == DType::I8 ? 127.f : 255.f;
}

INFER_INLINE float quantize_value(float x, float scale, float zero, float lo, float hi) {
  float t = x / scale;
  t = t > 4194304.f ? 4194304.f : t;  // +-2^22; a NaN passes both tests unchanged
  t = t < -4194304.f ? -4194304.f : t;
  const float v = ((t + 12582912.f) - 12582912.f) + zero;  // 1.5 * 2^23: round half to even
  return v != v ? lo : v < lo ? lo : v > hi ? hi : v;
}

// Integer vectors with as many lanes as V (structs: GCC drops the attribute of a dependent alias).
template <class V>
struct I32Of {
  typedef int32_t type __attribute__((vector_size(sizeof(V))));
};
template <class V>
struct I16Of {
  typedef int16_t type __attribute__((vector_size(sizeof(V) / 2)));
};
template <class V>
struct U8Of {
  typedef uint8_t type __attribute__((vector_size(sizeof(V) / 4)));
};

// quantize_value on one vector of I's lanes (GCC vector extensions, as activation_simd.h: element-wise
// selects, so GCC need not if-convert a loop itself, which it does not do for the baseline level).
template <class I>
INFER_INLINE typename I::Vec quantize_vec(const float* x, float scale, float zero, float lo, float hi) {
  using V = typename I::Vec;
  V v;
  std::memcpy(&v, x, sizeof v);
  const V big = V{} + 4194304.f, small = V{} - 4194304.f, magic = V{} + 12582912.f;
  const V vlo = V{} + lo, vhi = V{} + hi;
  V t = v / scale;
  t = t > big ? big : t;
  t = t < small ? small : t;
  V q = ((t + magic) - magic) + zero;
  q = q < vlo ? vlo : q;  // a NaN compares false everywhere: it stays NaN here
  q = q > vhi ? vhi : q;
  return q != q ? vlo : q;
}

// out[i] = quantize_value(x[i]) (as float: the integer's exact value) for i < n.
template <class I>
INFER_INLINE void quantize_row(const float* x, int64_t n, float scale, float zero, float lo, float hi, float* out) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const V q = quantize_vec<I>(x + i, scale, zero, lo, hi);
    std::memcpy(out + i, &q, sizeof q);
  }
  for (; i < n; ++i) out[i] = quantize_value(x[i], scale, zero, lo, hi);
}

// out[i] = quantize_value(x[i]) - zero as int16 (quantized_conv2d's A: q - zero point in [-255, 255]).
template <class I>
INFER_INLINE void quantize_row_i16(const float* x, int64_t n, float scale, float zero, float lo, float hi,
                                   int16_t* out) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  using IV = typename I32Of<V>::type;
  using SV = typename I16Of<V>::type;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const SV q = __builtin_convertvector(__builtin_convertvector(quantize_vec<I>(x + i, scale, zero, lo, hi) - zero, IV), SV);
    std::memcpy(out + i, &q, sizeof q);
  }
  for (; i < n; ++i) out[i] = static_cast<int16_t>(quantize_value(x[i], scale, zero, lo, hi) - zero);
}

// 4 vectors of int32 in [0, 255] -> 4 * L bytes in order: packssdw, packuswb (both per 128-bit lane:
// the bytes come out as dwords lane-interleaved), then a dword permute (vpermd) puts them back. GCC
// builtins (isa.h: intrinsics do not inline here); clang (the fuzz build) converts element-wise.
template <class I, class IV>
INFER_INLINE void store_u8x4(const IV& a0, const IV& a1, const IV& a2, const IV& a3, uint8_t* out) {
#if !defined(__clang__)
  if constexpr (I::kIsa == CpuIsa::Avx512) {
    typedef short S __attribute__((vector_size(64)));
    typedef char B __attribute__((vector_size(64)));
    const S p01 = __builtin_ia32_packssdw512_mask(a0, a1, S{}, ~0u);
    const S p23 = __builtin_ia32_packssdw512_mask(a2, a3, S{}, ~0u);
    const IV b = (IV)__builtin_ia32_packuswb512_mask(p01, p23, B{}, ~0ull);
    const IV v = __builtin_ia32_permvarsi512_mask(b, IV{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}, IV{},
                                                  static_cast<uint16_t>(0xFFFF));
    std::memcpy(out, &v, sizeof v);
  } else if constexpr (I::kIsa == CpuIsa::Avx2) {
    const IV b = (IV)__builtin_ia32_packuswb256(__builtin_ia32_packssdw256(a0, a1), __builtin_ia32_packssdw256(a2, a3));
    const IV v = __builtin_ia32_permvarsi256(b, IV{0, 4, 1, 5, 2, 6, 3, 7});
    std::memcpy(out, &v, sizeof v);
  } else {
    const IV v = (IV)__builtin_ia32_packuswb128(__builtin_ia32_packssdw128(a0, a1), __builtin_ia32_packssdw128(a2, a3));
    std::memcpy(out, &v, sizeof v);
  }
#else
  using BV = typename U8Of<IV>::type;
  const IV* a[4] = {&a0, &a1, &a2, &a3};
  for (int k = 0; k < 4; ++k) {
    const BV q = __builtin_convertvector(*a[k], BV);
    std::memcpy(out + k * sizeof(BV), &q, sizeof q);
  }
#endif
}

// out[i] = quantize_value(x[i]) + offset as uint8: the quantized value itself (offset 0 for a uint8
// type, 128 for int8: qgemm's u8s8 A, whose zero point is shifted alike).
template <class I>
INFER_INLINE void quantize_row_u8(const float* x, int64_t n, float scale, float zero, float lo, float hi, float offset,
                                  uint8_t* out) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  using IV = typename I32Of<V>::type;
  int64_t i = 0;
  const auto four = [&](const float* src, uint8_t* dst) __attribute__((always_inline)) {
    IV a[4];
    for (int k = 0; k < 4; ++k)
      a[k] = __builtin_convertvector(quantize_vec<I>(src + k * L, scale, zero, lo, hi) + offset, IV);
    store_u8x4<I>(a[0], a[1], a[2], a[3], dst);
  };
  for (; i + 4 * L <= n; i += 4 * L) four(x + i, out + i);
  if (i < n) {  // the last 1 .. 4L-1 through a padded copy: short rows (a GEMM tile's) stay vectorised
    float t[4 * L] = {};
    uint8_t o[4 * L];
    std::memcpy(t, x + i, size_t(n - i) * sizeof(float));
    four(t, o);
    std::memcpy(out + i, o, size_t(n - i));
  }
}

// minps / maxps with the bound first: bound < v ? bound : v (and bound > v ? bound : v), so a NaN v
// passes, as the selects `v > bound ? bound : v` they replace; one instruction where GCC emitted a
// compare and a blend for the select. clang (the fuzz build): the select.
template <class I, class V = typename I::Vec>
INFER_INLINE V min_keep_nan(const V& bound, const V& v) {
#if !defined(__clang__)
  if constexpr (I::kIsa == CpuIsa::Avx512)
    return __builtin_ia32_minps512_mask(bound, v, v, static_cast<uint16_t>(0xFFFF), 4);
  else if constexpr (I::kIsa == CpuIsa::Avx2)
    return __builtin_ia32_minps256(bound, v);
  else
    return __builtin_ia32_minps(bound, v);
#else
  return v > bound ? bound : v;
#endif
}
template <class I, class V = typename I::Vec>
INFER_INLINE V max_keep_nan(const V& bound, const V& v) {
#if !defined(__clang__)
  if constexpr (I::kIsa == CpuIsa::Avx512)
    return __builtin_ia32_maxps512_mask(bound, v, v, static_cast<uint16_t>(0xFFFF), 4);
  else if constexpr (I::kIsa == CpuIsa::Avx2)
    return __builtin_ia32_maxps256(bound, v);
  else
    return __builtin_ia32_maxps(bound, v);
#else
  return v < bound ? bound : v;
#endif
}

// (q - zero point) of the L floats at p as int32: quantize_value's values (quantize.h) in fewer
// operations: t = x / scale clamped to +-2^22 (a NaN passes), rounded half to even by cvtps2dq in the
// default rounding mode (a NaN becomes INT_MIN), saturated to [lo - zero, hi - zero] in integers (so a
// NaN gives lo - zero, as quantize_value's lo). clang (the fuzz build) rounds with quantize.h's trick.
template <class I, class V = typename I::Vec, class IV = typename quant::I32Of<typename I::Vec>::type>
INFER_INLINE IV quantize_i32v(V t, const V& scale, const IV& lo, const IV& hi) {
  t = t / scale;
  t = min_keep_nan<I>(V{} + 4194304.f, t);
  t = max_keep_nan<I>(V{} - 4194304.f, t);
  IV q;
#if !defined(__clang__)
  if constexpr (I::kIsa == CpuIsa::Avx512)
    q = (IV)__builtin_ia32_cvtps2dq512_mask(t, IV{}, static_cast<uint16_t>(0xFFFF), 4);
  else if constexpr (I::kIsa == CpuIsa::Avx2) q = (IV)__builtin_ia32_cvtps2dq256(t);
  else q = (IV)__builtin_ia32_cvtps2dq(t);
#else
  const V r = (t + 12582912.f) - 12582912.f;
  q = r != r ? IV{} + INT32_MIN : __builtin_convertvector(r, IV);
#endif
  q = q < lo ? lo : q;
  return q > hi ? hi : q;
}
template <class I, class V = typename I::Vec, class IV = typename quant::I32Of<typename I::Vec>::type>
INFER_INLINE IV quantize_i32(const float* p, const V& scale, const IV& lo, const IV& hi) {
  V t;
  std::memcpy(&t, p, sizeof t);
  return quantize_i32v<I>(t, scale, lo, hi);
}

// The first n (<= L) of a vector's int32 lanes, each in [0, 255], stored as n bytes: one vector's
// share of store_u8x4 (pmovdb; packs and the two lanes' low dwords; packs), the same builtins' rule.
template <class I, class IV>
INFER_INLINE void store_u8x1(const IV& a, uint8_t* out, int64_t n) {
  constexpr int L = sizeof(IV) / 4;
  uint8_t b[16];
#if !defined(__clang__)
  if constexpr (I::kIsa == CpuIsa::Avx512) {
    typedef char B16 __attribute__((vector_size(16)));
    const B16 v = __builtin_ia32_pmovdb512_mask(a, B16{}, static_cast<uint16_t>(0xFFFF));
    std::memcpy(b, &v, 16);
  } else if constexpr (I::kIsa == CpuIsa::Avx2) {
    const auto p = __builtin_ia32_packssdw256(a, a);
    const IV v = (IV)__builtin_ia32_packuswb256(p, p);  // a0..a3 in dword 0, a4..a7 in dword 4
    const uint64_t u = uint32_t(v[0]) | uint64_t(uint32_t(v[4])) << 32;
    std::memcpy(b, &u, 8);
  } else {
    const auto p = __builtin_ia32_packssdw128(a, a);
    const IV v = (IV)__builtin_ia32_packuswb128(p, p);
    std::memcpy(b, &v, 4);
  }
#else
  for (int k = 0; k < L; ++k) b[k] = static_cast<uint8_t>(a[k]);
#endif
  if (n == L)
    std::memcpy(out, b, L);
  else
    for (int64_t k = 0; k < n; ++k) out[k] = b[k];
}

// out[i] = quantize_value(x[i]) as its type's byte: q itself (U8), or q's two's complement (I8): how
// a quantized_conv2d writes an 8-bit output (the quantized_activations pass). quantize_i32's rounding
// (cvtps2dq, integer clamps: half the operations of quantize_vec's), the last 1 .. 4L-1 values through
// a padded copy so that short rows (a GEMM tile's channels) stay vectorised.
template <class I>
INFER_INLINE void quantize_row_q8(const float* x, int64_t n, float scale, float zero, DType type, uint8_t* out) {
  using V = typename I::Vec;
  using IV = typename I32Of<V>::type;
  constexpr int L = I::kLanes;
  float qlo, qhi;
  range_of(type, qlo, qhi);
  const bool i8 = type == DType::I8;
  const V vs = V{} + scale;
  const IV lo = IV{} + int32_t(qlo - zero), hi = IV{} + int32_t(qhi - zero);
  const IV shift = IV{} + (int32_t(zero) + (i8 ? 128 : 0));  // q + 128 for an int8 type: [0, 255]
  const auto four = [&](const float* src, uint8_t* dst) __attribute__((always_inline)) {
    IV a[4];
    for (int k = 0; k < 4; ++k) a[k] = quantize_i32<I>(src + k * L, vs, lo, hi) + shift;
    store_u8x4<I>(a[0], a[1], a[2], a[3], dst);
  };
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) four(x + i, out + i);
  if (i < n) {
    float t[4 * L] = {};
    uint8_t o[4 * L];
    std::memcpy(t, x + i, size_t(n - i) * sizeof(float));
    four(t, o);
    std::memcpy(out + i, o, size_t(n - i));
  }
  if (i8)
    for (int64_t k = 0; k < n; ++k) out[k] ^= 0x80;  // q + 128 -> q's bits
}

// The 8-bit values of `type` at q (U8: q; I8: q's two's complement) minus `zero` as int16: an 8-bit
// input's (q - zero point), what quantize_row_i16 gives for the float it came from.
template <class I>
INFER_INLINE void widen_row_i16(const uint8_t* q, int64_t n, DType type, int32_t zero, int16_t* out) {
  const auto z = static_cast<int16_t>(zero);
  if (type == DType::I8)
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int16_t>(int16_t(int8_t(q[i])) - z);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int16_t>(int16_t(q[i]) - z);
}

}  // namespace infer::cpu::quant
