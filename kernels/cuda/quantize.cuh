// quantize_linear's arithmetic on the device, once for every CUDA kernel that quantizes (quantize.cu,
// quantized_conv2d.cu): the reference's (kernels/reference/common.h, ONNX Runtime's MLAS) in float32:
// x / scale correctly rounded (Markstein's division from the reciprocal: exactly __fdiv_rn's quotient,
// tests/test_cuda_quantized.cc compares bit for bit), rounded half to even, plus the zero point,
// saturated to the type's range, NaN to its low end. CUDA-C only (.cu files).
#pragma once

#include <cstdint>

namespace infer::cuda {

// x / scale correctly rounded from rcp = __frcp_rn(scale) (Markstein's division: q = RN(x rcp), the
// remainder x - q scale exact in one FMA, then RN(q + remainder rcp) is RN(x / scale) while nothing
// overflows; an infinite or NaN first quotient is the answer already): three FMA-class instructions
// where __fdiv_rn takes a dozen and a branch.
__device__ __forceinline__ float div_rn(float x, float scale, float rcp) {
  const float q = x * rcp;
  if (!isfinite(q)) return q;
  return fmaf(fmaf(-q, scale, x), rcp, q);
}

// The quantized value as a float holding an integer in [lo, hi]; rcp = __frcp_rn(scale).
__device__ __forceinline__ float quantize_float(float x, float scale, float rcp, float zero, float lo, float hi) {
  const float v = rintf(div_rn(x, scale, rcp)) + zero;
  return !(v >= lo) ? lo : v > hi ? hi : v;  // !(v >= lo): NaN too
}

// The same value as its stored byte (u8, or i8's two's complement).
__device__ __forceinline__ uint8_t quantize_byte(float x, float scale, float rcp, float zero, float lo, float hi) {
  return static_cast<uint8_t>(static_cast<int>(quantize_float(x, scale, rcp, zero, lo, hi)));
}

}  // namespace infer::cuda
