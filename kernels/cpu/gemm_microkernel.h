// The register-blocked fp32 GEMM micro-kernel shared by the CPU convolutions that run their own GEMM
// (conv2d_winograd.cc's per-product GEMMs, conv2d_packed.cc's packed_gemm and packed_implicit):
// C[kMR rows x NV*16 columns] = A[kMR x K] B[K x NV*16] with A packed once (kMR consecutive floats per
// k, pack_a), B row-major with any leading dimension or its rows at tabulated offsets, the kMR x NV
// accumulators in vector registers. GCC vector extensions, always_inline: each caller compiles it
// inside its own target_clones functions (AVX-512, AVX2, baseline). Single-threaded: callers split
// the micro-tiles over OpenMP. No allocation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace infer::cpu::mk {

typedef float v16 __attribute__((vector_size(64)));  // one vector of 16 columns
constexpr int kLanes = 16;
constexpr int kMR = 8;  // rows per micro-tile (their A values broadcast): 8 x 3 accumulators + 3 B
                        // vectors fit AVX-512's 32 registers

// Unaligned loads and stores (by reference: a v16 passed by value trips GCC's ABI warning outside
// the AVX-512 clone).
__attribute__((always_inline)) inline void load16(v16& v, const float* p) { std::memcpy(&v, p, sizeof v); }
__attribute__((always_inline)) inline void store16(float* p, const v16& v) { std::memcpy(p, &v, sizeof v); }

// Where row k of B starts: rows at a constant stride (B row-major), or at offsets from a table
// (conv2d.packed_implicit: row k of the implicit column matrix is a shifted window of the input, so
// B is never written out).
struct StridedRows {
  const float* b;
  int64_t ldb;
  __attribute__((always_inline)) const float* operator()(int64_t k) const { return b + k * ldb; }
};
struct OffsetRows {
  const float* b;
  const int64_t* off;
  __attribute__((always_inline)) const float* operator()(int64_t k) const { return b + off[k]; }
};

// acc[r][q] = sum_k a[k*kMR + r] * row(k)[q*16 .. +16), r < kMR, q < NV: a is one packed block of A
// (pack_a), row(k) the micro-tile's first column in row k of B.
template <int NV, class Rows>
__attribute__((always_inline)) inline void accumulate_rows(const float* a, Rows row, int64_t K,
                                                           v16 (&acc)[kMR][NV]) {
  for (int r = 0; r < kMR; ++r)
    for (int q = 0; q < NV; ++q) acc[r][q] = v16{};
  for (int64_t k = 0; k < K; ++k) {
    v16 bv[NV];
    const float* bk = row(k);
    for (int q = 0; q < NV; ++q) load16(bv[q], bk + q * kLanes);
    const float* ak = a + k * kMR;
    for (int r = 0; r < kMR; ++r)
      for (int q = 0; q < NV; ++q) acc[r][q] += ak[r] * bv[q];
  }
}

// The same with B row-major (leading dimension ldb), b the micro-tile's first column in row 0.
template <int NV>
__attribute__((always_inline)) inline void accumulate(const float* a, const float* b, int64_t ldb, int64_t K,
                                                      v16 (&acc)[kMR][NV]) {
  accumulate_rows<NV>(a, StridedRows{b, ldb}, K, acc);
}

// The columns left after the whole vectors (1 to 15 of them): acc[j][r] = sum_k a[k*kMR + r] *
// row(k)[j] (b[k*ldb + j] for accumulate_cols), j < R, the 8 rows along an 8-lane vector and one
// column per accumulator. A 16-lane accumulate<1> over a zero-padded copy pays 8 full-width FMAs per k whatever R is; this pays R
// half-width ones (Zen 4 runs a 512-bit FMA as two 256-bit halves), so for 7x7 outputs (49 = 3 * 16
// + 1 columns) the last column costs 1/16 of a vector's work instead of a whole one.
typedef float v8 __attribute__((vector_size(32)));
template <int R, class Rows>
__attribute__((always_inline)) inline void accumulate_cols_rows(const float* a, Rows row, int64_t K, v8 (&acc)[R]) {
  for (int j = 0; j < R; ++j) acc[j] = v8{};
  for (int64_t k = 0; k < K; ++k) {
    v8 av;
    std::memcpy(&av, a + k * kMR, sizeof av);
    const float* bk = row(k);
    for (int j = 0; j < R; ++j) acc[j] += av * bk[j];
  }
}
template <int R>
__attribute__((always_inline)) inline void accumulate_cols(const float* a, const float* b, int64_t ldb, int64_t K,
                                                           v8 (&acc)[R]) {
  accumulate_cols_rows<R>(a, StridedRows{b, ldb}, K, acc);
}

// Packed A: rows [cb*kMR, cb*kMR + kMR) of a row-major A [M][K] (leading dimension lda) as
// out[cb][k][r], rows past M zero; ceil(M / kMR) * K * kMR floats.
inline void pack_a(const float* a, int64_t M, int64_t K, int64_t lda, float* out) {
  const int64_t blocks = (M + kMR - 1) / kMR;
  for (int64_t cb = 0; cb < blocks; ++cb)
    for (int64_t k = 0; k < K; ++k)
      for (int r = 0; r < kMR; ++r) {
        const int64_t row = cb * kMR + r;
        out[(cb * K + k) * kMR + r] = row < M ? a[row * lda + k] : 0.f;
      }
}

}  // namespace infer::cpu::mk
