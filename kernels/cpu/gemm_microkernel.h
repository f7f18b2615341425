// The register-blocked fp32 GEMM micro-kernel shared by the CPU convolutions that run their own GEMM
// (conv2d_winograd.cc's per-product GEMMs, conv2d_packed.cc's packed_gemm and packed_implicit):
// C[kMR rows x kNV*kLanes columns] = A[kMR x K] B[K x kNV*kLanes] with A packed once (kMR consecutive
// floats per k, pack_a), B row-major with any leading dimension or its rows at tabulated offsets, the
// kMR x NV accumulators in vector registers. The tile shape is the ISA's (isa.h: 8 x 3x16 on AVX-512,
// 4 x 3x8 on AVX2, 4 x 2x4 on baseline). GCC vector extensions, always_inline over an isa.h traits
// struct I: each caller compiles it inside its own per-ISA functions (INFER_PER_ISA). Single-threaded:
// callers split the micro-tiles over OpenMP. No allocation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/isa.h"

namespace infer::cpu::mk {

// Unaligned loads and stores of any vector type, through a 4-byte-aligned, may_alias copy of its type:
// one vmovups each. (A memcpy into the vector was expanded, in the AVX2 functions, into a copy loop
// through the stack that kept the accumulators out of registers.) By reference: a vector passed by
// value trips GCC's ABI warning outside the wider levels' functions.
template <class V>
INFER_INLINE void load(V& v, const float* p) {
  typedef V Unaligned __attribute__((aligned(4), may_alias));
  v = *reinterpret_cast<const Unaligned*>(p);
}
template <class V>
INFER_INLINE void store(float* p, const V& v) {
  typedef V Unaligned __attribute__((aligned(4), may_alias));
  *reinterpret_cast<Unaligned*>(p) = v;
}

// Where row k of B starts: rows at a constant stride (B row-major), or at offsets from a table
// (conv2d.packed_implicit: row k of the implicit column matrix is a shifted window of the input, so
// B is never written out).
struct StridedRows {
  const float* b;
  int64_t ldb;
  INFER_INLINE const float* operator()(int64_t k) const { return b + k * ldb; }
};
struct OffsetRows {
  const float* b;
  const int64_t* off;
  INFER_INLINE const float* operator()(int64_t k) const { return b + off[k]; }
};

// acc[r][q] = sum_k a[k*kMR + r] * row(k)[q*kLanes .. +kLanes), r < kMR, q < NV: a is one packed
// block of A (pack_a), row(k) the micro-tile's first column in row k of B.
// accumulate_onto*: the same without zeroing acc first, so that a K split into blocks continues each
// output's one FMA chain from where the previous block stored it (bit for bit the full-K result).
template <class I, int NV, class Rows>
INFER_INLINE void accumulate_rows_onto(const float* a, Rows row, int64_t K, typename I::Vec (&acc)[I::kMR][NV]) {
  using V = typename I::Vec;
  for (int64_t k = 0; k < K; ++k) {
    V bv[NV];
    const float* bk = row(k);
    for (int q = 0; q < NV; ++q) load(bv[q], bk + q * I::kLanes);
    const float* ak = a + k * I::kMR;
    for (int r = 0; r < I::kMR; ++r)
      for (int q = 0; q < NV; ++q) acc[r][q] += ak[r] * bv[q];
  }
}

template <class I, int NV, class Rows>
INFER_INLINE void accumulate_rows(const float* a, Rows row, int64_t K, typename I::Vec (&acc)[I::kMR][NV]) {
  for (int r = 0; r < I::kMR; ++r)
    for (int q = 0; q < NV; ++q) acc[r][q] = typename I::Vec{};
  accumulate_rows_onto<I, NV>(a, row, K, acc);
}

// The same with B row-major (leading dimension ldb), b the micro-tile's first column in row 0.
template <class I, int NV>
INFER_INLINE void accumulate(const float* a, const float* b, int64_t ldb, int64_t K,
                             typename I::Vec (&acc)[I::kMR][NV]) {
  accumulate_rows<I, NV>(a, StridedRows{b, ldb}, K, acc);
}
template <class I, int NV>
INFER_INLINE void accumulate_onto(const float* a, const float* b, int64_t ldb, int64_t K,
                                  typename I::Vec (&acc)[I::kMR][NV]) {
  accumulate_rows_onto<I, NV>(a, StridedRows{b, ldb}, K, acc);
}

// The columns left after the whole vectors (1 to kLanes-1 of them): acc[j][r] = sum_k a[k*kMR + r] *
// row(k)[j] (b[k*ldb + j] for accumulate_cols), j < R, the kMR rows along one RowVec and one column per
// accumulator. A full-width accumulate<1> over a zero-padded copy pays kMR full-width FMAs per k
// whatever R is; this pays R narrower ones, so for 7x7 outputs (49 = 3 * 16 + 1 columns on AVX-512) the
// last column costs 1/16 of a vector's work instead of a whole one.
template <class I, int R, class Rows>
INFER_INLINE void accumulate_cols_rows(const float* a, Rows row, int64_t K, typename I::RowVec (&acc)[R]) {
  using RV = typename I::RowVec;
  static_assert(sizeof(RV) == sizeof(float) * I::kMR, "a RowVec holds one column's kMR rows");
  for (int j = 0; j < R; ++j) acc[j] = RV{};
  for (int64_t k = 0; k < K; ++k) {
    RV av;
    load(av, a + k * I::kMR);
    const float* bk = row(k);
    for (int j = 0; j < R; ++j) acc[j] += av * bk[j];
  }
}
template <class I, int R>
INFER_INLINE void accumulate_cols(const float* a, const float* b, int64_t ldb, int64_t K,
                                  typename I::RowVec (&acc)[R]) {
  accumulate_cols_rows<I, R>(a, StridedRows{b, ldb}, K, acc);
}

// Packed A: rows [cb*mr, cb*mr + mr) of a row-major A [M][K] (leading dimension lda) as
// out[cb][k][r], rows past M zero; ceil(M / mr) * K * mr floats. mr: the ISA's kMR (isa::shape).
inline void pack_a(const float* a, int64_t M, int64_t K, int64_t lda, int mr, float* out) {
  const int64_t blocks = (M + mr - 1) / mr;
  for (int64_t cb = 0; cb < blocks; ++cb)
    for (int64_t k = 0; k < K; ++k)
      for (int r = 0; r < mr; ++r) {
        const int64_t row = cb * mr + r;
        out[(cb * K + k) * mr + r] = row < M ? a[row * lda + k] : 0.f;
      }
}

}  // namespace infer::cpu::mk
