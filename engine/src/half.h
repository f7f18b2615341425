// IEEE 754 binary16 <-> binary32 conversion for f16 weights (stored by the builder, widened once by the
// loader). float -> half rounds to nearest, ties to even; overflow becomes inf; values below half the
// smallest subnormal become signed zero; NaN stays NaN (quiet) and inf stays inf. Pure bit arithmetic,
// no UB for any input.
#pragma once

#include <cstdint>
#include <cstring>

namespace infer::detail {

inline uint16_t float_to_half(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;

  if (exp == 0xffu) {  // inf or NaN; a NaN keeps its top payload bits and is made quiet
    if (mant == 0) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | (mant >> 13));
  }

  const int32_t e = static_cast<int32_t>(exp) - 127 + 15;  // the half's biased exponent
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // too large: inf

  if (e <= 0) {
    // Subnormal half (or zero): value = m * 2^-24 with m = full_mantissa >> shift.
    const int shift = 14 - e;
    if (shift > 24) return sign;  // below half the smallest subnormal (float subnormals too)
    const uint32_t full = mant | 0x800000u;
    uint32_t m = full >> shift;
    const uint32_t rem = full & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (m & 1u))) ++m;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | m);
  }

  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may round up to inf: correct
  return static_cast<uint16_t>(sign | h);
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;  // signed zero
    } else {
      // Subnormal: normalise the mantissa into a float exponent.
      int32_t e = 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --e;
      }
      mant &= 0x3ffu;
      x = sign | (static_cast<uint32_t>(e + 112) << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    // inf, or a NaN made quiet (as hardware conversion does), keeping its payload
    x = sign | 0x7f800000u | (mant != 0 ? 0x400000u : 0u) | (mant << 13);
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float out;
  std::memcpy(&out, &x, sizeof out);
  return out;
}

}  // namespace infer::detail
