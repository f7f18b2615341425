// quantize_linear's arithmetic for the CPU kernels, written so that GCC vectorises it at every ISA level
// (an always_inline loop: call it from an INFER_PER_ISA function): t = x / scale, rounded half to even by
// adding and subtracting 1.5 * 2^23 (exact in the default rounding mode for |t| <= 2^22; t is clamped
// there first, far outside any integer range), plus the zero point, saturated to [lo, hi], NaN to lo:
// the values of the reference kernel (kernels/reference/quantize.cc, std::nearbyint), bit for bit.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace infer::cpu::quant {

INFER_INLINE float quantize_value(float x, float scale, float zero, float lo, float hi) {
  float t = x / scale;
  t = t > 4194304.f ? 4194304.f : t;  // +-2^22; a NaN passes both tests unchanged
  t = t < -4194304.f ? -4194304.f : t;
  const float v = ((t + 12582912.f) - 12582912.f) + zero;  // 1.5 * 2^23: round half to even
  return v != v ? lo : v < lo ? lo : v > hi ? hi : v;
}

// out[i] = quantize_value(x[i]) (as float: the integer's exact value) for i < n.
INFER_INLINE void quantize_row(const float* x, int64_t n, float scale, float zero, float lo, float hi, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = quantize_value(x[i], scale, zero, lo, hi);
}

// out[i] = quantize_value(x[i]) - zero as int16 (quantized_conv2d's A: q - zero point in [-255, 255]).
INFER_INLINE void quantize_row_i16(const float* x, int64_t n, float scale, float zero, float lo, float hi,
                                   int16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int16_t>(quantize_value(x[i], scale, zero, lo, hi) - zero);
}

}  // namespace infer::cpu::quant
