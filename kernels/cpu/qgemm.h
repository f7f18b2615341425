// The integer GEMM under the int8 CPU kernels (quantized_conv2d.qgemm; issue 30, docs/kernels.md):
// C[m][n] (int32) = sum_k (a[m][k] - a_zero) * w[n][k], a uint8 activations with one zero point (a
// quantize_linear's output), w int8 weights (symmetric, no zero point), exact (no saturation). Method:
// pmaddwd on int16 pairs at every level (SSE2 / AVX2 / AVX-512BW): both operands widened to int16 when
// packed, the zero point subtracted from A then, so (a - a_zero) in [-255, 255] times w in [-128, 127]
// summed in pairs stays far inside int32. vpmaddubsw (u8 x s8, four k per 32-bit lane) saturates its
// int16 pair sums once 255 * |w| * 2 > 32767, so its form (the *_u8s8 functions, AVX2 and AVX-512;
// SSE2 has no pmaddubsw) takes only 7-bit weights, |w| <= 64 (`infer quantize --reduce-range`, as ONNX
// Runtime's reduce_range): then 2 * 255 * 64 = 32640 fits and it is exact too. Where the CPU has VNNI
// for the level (AVX-512 VNNI at AVX-512, AVX-VNNI at AVX2) the same form runs vpdpbusd instead (four
// u8 x s8 products summed straight into each int32 lane, no int16 step): one instruction per step and
// no saturation, so it takes every int8 weight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "infer/cpu_isa.h"

namespace infer::cpu::qgemm {

// The register tile per level: kMR rows of A (one broadcast int16 pair each) against kNV vectors of
// kLanes int32 columns (each vector of B holds kLanes columns' pairs of k), kMR * kNV accumulators:
//   AVX-512: 8 x 2 x 16 (16 + 2 B + 1 broadcast + 1 product of 32 zmm)
//   AVX2:    4 x 2 x 8  (8 + 2 + 1 + 1 of 16 ymm)
//   baseline: 4 x 2 x 4 (8 + 2 + 1 + 1 of 16 xmm)
struct TileShape {
  int mr, lanes, nv;
  int nr() const { return lanes * nv; }  // columns of a panel
};
TileShape tile_shape(CpuIsa isa);

// Weights packed once for one level: panels of nr() columns (the last zero-padded), per k-pair the
// panel's (w[n][2p], w[n][2p+1]) int16 pairs, k past K zero.
struct PackedB {
  CpuIsa isa = CpuIsa::Baseline;
  int64_t K = 0, N = 0, pairs = 0, panels = 0;
  std::vector<int16_t> data;  // panels * pairs * nr * 2
};
// w: row n of the weight at w + n * ldw, K int8 values (conv2d [C_out][C_in*KH*KW], dense [F_out][F_in]).
PackedB pack_b(const int8_t* w, int64_t N, int64_t K, int64_t ldw, CpuIsa isa);

// Packed A: blocks of mr() rows, per k-pair one int32 per row holding (a[m][2p] - zero, a[m][2p+1] -
// zero) as two int16 (low half first); rows past M and k past K are zeros. packed_a_size() int32s.
size_t packed_a_size(int64_t M, int64_t K, CpuIsa isa);
void pack_a(const uint8_t* a, int64_t M, int64_t K, int64_t lda, int32_t zero, CpuIsa isa, int32_t* out);

// c[m * ldc + n] = sum_k (a[m][k] - zero) * w[n][k] for m < M, n < b.N; `a` from pack_a with the same
// M, K and b.isa's level. Single-threaded (a caller splits rows: pass a row block's packed A, a
// multiple of mr() rows from the start, and its M). No allocation.
void gemm(const int32_t* a, int64_t M, const PackedB& b, int32_t* c, int64_t ldc);

// The same with A row-major, unpacked: row m's k-pair p is the int32 a[m * lda + p] (its two int16, k
// even in the low half; lda >= b.pairs), so an int16 activation matrix with an even row length is A
// as it is (quantized_conv2d's NHWC rows). Rows are read only below M. Only the weight's panels j0 ..
// j1-1 (j1 -1: to the last), columns j0 * nr() .. of the weight written from c's column 0 (so a
// caller splits the columns of a few rows between threads).
void gemm_rows(const int32_t* a, int64_t lda, int64_t M, const PackedB& b, int32_t* c, int64_t ldc,
               int64_t j0 = 0, int64_t j1 = -1);

// The vpmaddubsw form, same tile shapes and panels (tile_shape()): A is raw uint8 (the quantized
// values themselves, zero point not subtracted: 4 k per int32), the weight packed per k-quad, and the
// zero point folded into the accumulators' start, -zero * sum_k w[n][k] per column, so C is the same
// sum_k (a[m][k] - zero) * w[n][k] as gemm_rows' (every partial sum inside int32 for K <= 65536).
// fits_u8s8: the level AVX2 or AVX-512 and every weight in [-64, 64], or any weight where VNNI runs
// it (pack_b_u8s8 refuses others). vnni: use the level's VNNI where this CPU has it (has_vnni(isa));
// false keeps the vpmaddubsw steps (the tests and bench/cpu_qgemm.cc run both).
// has_vnni: cpuid says AVX512_VNNI (level AVX-512) or AVX-VNNI (level AVX2); the OS's vector state is
// the level's own check. False for the baseline level.
bool has_vnni(CpuIsa isa);
bool fits_u8s8(const int8_t* w, int64_t n, CpuIsa isa, bool vnni = true);
struct PackedB8 {
  CpuIsa isa = CpuIsa::Avx2;
  bool vnni = false;  // the steps are vpdpbusd (has_vnni(isa), asked for)
  int64_t K = 0, N = 0, quads = 0, panels = 0;
  std::vector<int8_t> data;    // panels * quads * nr * 4: per k-quad the panel's (w[n][4q..4q+3])
  std::vector<int32_t> start;  // panels * nr: -zero * sum_k w[n][k] (0 past N)
};
PackedB8 pack_b_u8s8(const int8_t* w, int64_t N, int64_t K, int64_t ldw, int32_t zero, CpuIsa isa,
                     bool vnni = true);
// a: row m's k-quad q is the int32 at a + m * lda + 4 * q bytes (lda a multiple of 4, >= 4 * quads; k
// past K any value: its weights are zero). Panels j0 .. j1-1 as gemm_rows.
void gemm_rows_u8s8(const uint8_t* a, int64_t lda, int64_t M, const PackedB8& b, int32_t* c, int64_t ldc,
                    int64_t j0 = 0, int64_t j1 = -1);

// The u8s8 form with a requantizing epilogue in registers (quantized_conv2d's 8-bit outputs; no C):
// for each C[m][n] of the panels run, v = min(act_hi, max(act_lo, fma(float(C[m][n]), mult[n],
// bias[n]))) (maxps / minps, bound first), t = v / scale clamped to +-2^22, q = rint(t) (cvtps2dq,
// half to even), and the byte min(255, max(0, q + shift)) ^ flip at y[m * ldy + n - j0 * nr()]: shift
// = the zero point and flip 0 for uint8, shift = the zero point + 128 and flip 0x80 for int8 (the byte
// is then the saturated q + zero point's two's complement), quantize_linear's value either way.
// quantized_conv2d's epilogue_q8_body computes the same in the same order. mult and bias are read for
// every column of the panels run: pass arrays padded to panels * nr() (zeros past N). Same panels,
// rows and checks as gemm_rows_u8s8.
struct Requant {
  const float* mult = nullptr;
  const float* bias = nullptr;
  float act_lo = 0.f, act_hi = 0.f;  // -inf / +inf where the activation has no bound
  float scale = 1.f;
  int32_t shift = 0;
  uint8_t flip = 0;
  uint8_t* y = nullptr;
  int64_t ldy = 0;
};
void gemm_rows_u8s8_q8(const uint8_t* a, int64_t lda, int64_t M, const PackedB8& b, const Requant& rq,
                       int64_t j0 = 0, int64_t j1 = -1);

}  // namespace infer::cpu::qgemm
