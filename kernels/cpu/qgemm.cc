// The int8 CPU GEMM (qgemm.h): packing of uint8 activations (zero point subtracted) and int8 weights
// into int16 pairs, and the register-tiled pmaddwd micro-kernel, compiled per ISA level (one
// function per level with isa.h's target attribute). A tile: kMR rows x kNV vectors of int32
// accumulators; per k-pair, kNV loads of B, and per row one 32-bit broadcast of A's pair, then kNV
// pmaddwd + add. The u8s8 form (7-bit weights, AVX2 / AVX-512): per k-quad the same loads and
// broadcasts, then vpmaddubsw, pmaddwd by ones (int16 pairs to int32) and add; with the level's VNNI
// (AVX-512 VNNI, AVX-VNNI) one vpdpbusd instead (any int8 weight). Threads: none.
#include "kernels/cpu/qgemm.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <string>
#include <utility>

#include "infer/error.h"
#include "kernels/cpu/isa.h"

namespace infer::cpu::qgemm {
namespace {

// The micro-kernel once, as a macro expanded inside each level's function: the intrinsics are
// always_inline functions of their own target, which GCC refuses to inline into a target-less
// template before that template is inlined into the targeted function (isa.h's bodies therefore use
// GCC vector extensions and builtins, nhwc.h's load_n says the same); pmaddwd has no vector-extension
// form. The macros: INIT(q) (accumulator q's start; may read j and NR), LOAD(ptr to B's elements),
// BCAST(int32), MADD(acc, a, b), PANEL (a statement at each panel's start: the requantizing form's
// per-column constants), EMIT(r) (row r of the tile out: Q_EMIT_C stores the int32 sums, the *_EMIT_Q8
// macros requantize them); E elements of B per column and step (2: int16 pairs, 4: int8 quads), STEPS
// steps of k. Loop order: row blocks of A sized for L2 (kBlockBytes), in
// each every panel of B over every row tile.
// A's step p of tile row r is at rowp[r][p * PS]: packed A (PS = MR, rowp[r] = the tile's block + r)
// or row-major A (PS = 1, rowp[r] = row m0 + r, the last row repeated past M).
#define INFER_QGEMM_BODY(V, MR, NV, L, E, STEPS, INIT, LOAD, BCAST, MADD, PANEL, EMIT)                  \
  do {                                                                                                 \
    constexpr int NR = (NV) * (L), NV_ = (NV), L_ = (L);                                               \
    const int64_t P = (STEPS);                                                                         \
    const int64_t PS = lda ? 1 : (MR);                                                                 \
    const int64_t mb = std::max<int64_t>(MR, kBlockBytes / (std::max<int64_t>(P, 1) * 4 * (MR)) * (MR)); \
    for (int64_t mb0 = 0; mb0 < M; mb0 += mb) {                                                        \
      const int64_t mb1 = std::min(M, mb0 + mb);                                                       \
      for (int64_t j = j0; j < j1; ++j) {                                                              \
        const auto* bp = b.data.data() + j * P * NR * (E);                                             \
        const int64_t n0 = j * NR; /* C's column n0 - j0 * NR */                                       \
        const int cols = int(std::min<int64_t>(NR, b.N - n0));                                         \
        PANEL;                                                                                         \
        for (int64_t m0 = mb0; m0 < mb1; m0 += (MR)) {                                                 \
          const AliasI32* rowp[MR];                                                                    \
          for (int r = 0; r < (MR); ++r)                                                               \
            rowp[r] = lda ? a + std::min<int64_t>(m0 + r, M - 1) * lda : a + (m0 / (MR)) * P * (MR) + r; \
          V acc[MR][NV];                                                                               \
          for (int r = 0; r < (MR); ++r)                                                               \
            for (int q = 0; q < (NV); ++q) acc[r][q] = INIT(q);                                        \
          for (int64_t p = 0; p < P; ++p) {                                                            \
            V bv[NV];                                                                                  \
            for (int q = 0; q < (NV); ++q) bv[q] = LOAD(bp + (p * (NV) + q) * (L) * (E));              \
            for (int r = 0; r < (MR); ++r) {                                                           \
              const V av = BCAST(rowp[r][p * PS]);                                                     \
              for (int q = 0; q < (NV); ++q) acc[r][q] = MADD(acc[r][q], av, bv[q]);                   \
            }                                                                                          \
          }                                                                                            \
          const int rows = int(std::min<int64_t>(MR, mb1 - m0));                                       \
          for (int r = 0; r < rows; ++r) EMIT(r);                                                      \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
  } while (0)

// A's pairs are read as int32 from memory its producer may have written as int16 (gemm_rows: an im2col
// row, the quantized input itself): a may_alias type keeps that access defined under strict aliasing.
typedef int32_t AliasI32 __attribute__((may_alias));

// Row r of the tile as int32 sums into C (columns past N of the last panel dropped).
#define Q_EMIT_C(r, STORE)                                                                             \
  do {                                                                                                 \
    int32_t* cr = c + (m0 + (r)) * ldc + (n0 - j0 * NR);                                               \
    if (cols == NR) {                                                                                  \
      for (int q = 0; q < (NV_); ++q) STORE(cr + q * (L_), acc[r][q]);                                 \
    } else { /* the last panel's columns past N are not C's */                                         \
      alignas(64) int32_t tmp[NR];                                                                     \
      for (int q = 0; q < (NV_); ++q) STORE(tmp + q * (L_), acc[r][q]);                                \
      std::copy(tmp, tmp + cols, cr);                                                                  \
    }                                                                                                  \
  } while (0)
#define Q_NO_PANEL (void)0

// Bytes of packed A a row block aims at, so that it stays in L2 while every panel of B passes over it.
constexpr int64_t kBlockBytes = 128 << 10;

// The tile per level (qgemm.h's table): rows, int32 lanes, vectors.
constexpr TileShape kBaseline{4, 4, 2}, kAvx2{4, 8, 2}, kAvx512{8, 16, 2};

#define Q_SSE2_ZERO(q) _mm_setzero_si128()
#define Q_SSE2_LOAD(p) _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
#define Q_SSE2_BCAST(x) _mm_set1_epi32(x)
#define Q_SSE2_MADD(acc, x, y) _mm_add_epi32(acc, _mm_madd_epi16(x, y))
#define Q_SSE2_STORE(p, v) _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v)
#define Q_AVX2_ZERO(q) _mm256_setzero_si256()
#define Q_AVX2_START(q) Q_AVX2_LOAD(b.start.data() + j * NR + (q) * 8)
#define Q_AVX2_LOAD(p) _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
#define Q_AVX2_BCAST(x) _mm256_set1_epi32(x)
#define Q_AVX2_MADD(acc, x, y) _mm256_add_epi32(acc, _mm256_madd_epi16(x, y))
#define Q_AVX2_MADD8(acc, x, y) \
  _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1)))
#define Q_AVX2_STORE(p, v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v)
#define Q_AVXVNNI_MADD8(acc, x, y) _mm256_dpbusd_avx_epi32(acc, x, y)  // x: u8 (A's broadcast quad), y: s8
#define INFER_TARGET_AVX_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define Q_AVX512_ZERO(q) _mm512_setzero_si512()
#define Q_AVX512_START(q) Q_AVX512_LOAD(b.start.data() + j * NR + (q) * 16)
#define Q_AVX512_LOAD(p) _mm512_loadu_si512(p)
#define Q_AVX512_BCAST(x) _mm512_set1_epi32(x)
#define Q_AVX512_MADD(acc, x, y) _mm512_add_epi32(acc, _mm512_madd_epi16(x, y))
#define Q_AVX512_MADD8(acc, x, y) \
  _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(x, y), _mm512_set1_epi16(1)))
#define Q_AVX512_STORE(p, v) _mm512_storeu_si512(p, v)
#define Q_VNNI_MADD8(acc, x, y) _mm512_dpbusd_epi32(acc, x, y)  // x: u8 (A's broadcast quad), y: s8
#define INFER_TARGET_AVX512_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

#define Q_AVX512_EMIT(r) Q_EMIT_C(r, Q_AVX512_STORE)
#define Q_AVX2_EMIT(r) Q_EMIT_C(r, Q_AVX2_STORE)
#define Q_SSE2_EMIT(r) Q_EMIT_C(r, Q_SSE2_STORE)

INFER_TARGET_AVX512 void gemm_avx512(const int32_t* a, int64_t lda, int64_t M, const PackedB& b, int64_t j0, int64_t j1, int32_t* c,
                 int64_t ldc) {
  INFER_QGEMM_BODY(__m512i, 8, 2, 16, 2, b.pairs, Q_AVX512_ZERO, Q_AVX512_LOAD, Q_AVX512_BCAST, Q_AVX512_MADD,
                   Q_NO_PANEL, Q_AVX512_EMIT);
}
INFER_TARGET_AVX2 void gemm_avx2(const int32_t* a, int64_t lda, int64_t M, const PackedB& b, int64_t j0, int64_t j1, int32_t* c,
               int64_t ldc) {
  INFER_QGEMM_BODY(__m256i, 4, 2, 8, 2, b.pairs, Q_AVX2_ZERO, Q_AVX2_LOAD, Q_AVX2_BCAST, Q_AVX2_MADD, Q_NO_PANEL,
                   Q_AVX2_EMIT);
}
void gemm_baseline(const int32_t* a, int64_t lda, int64_t M, const PackedB& b, int64_t j0, int64_t j1, int32_t* c,
                   int64_t ldc) {
  INFER_QGEMM_BODY(__m128i, 4, 2, 4, 2, b.pairs, Q_SSE2_ZERO, Q_SSE2_LOAD, Q_SSE2_BCAST, Q_SSE2_MADD, Q_NO_PANEL,
                   Q_SSE2_EMIT);
}
// The u8s8 form: A row-major only (lda int32 a row).
INFER_TARGET_AVX512 void gemm8_avx512(const int32_t* a, int64_t lda, int64_t M, const PackedB8& b, int64_t j0, int64_t j1,
                                      int32_t* c, int64_t ldc) {
  INFER_QGEMM_BODY(__m512i, 8, 2, 16, 4, b.quads, Q_AVX512_START, Q_AVX512_LOAD, Q_AVX512_BCAST, Q_AVX512_MADD8,
                   Q_NO_PANEL, Q_AVX512_EMIT);
}
INFER_TARGET_AVX512_VNNI void gemm8_vnni(const int32_t* a, int64_t lda, int64_t M, const PackedB8& b, int64_t j0,
                                         int64_t j1, int32_t* c, int64_t ldc) {
  INFER_QGEMM_BODY(__m512i, 8, 2, 16, 4, b.quads, Q_AVX512_START, Q_AVX512_LOAD, Q_AVX512_BCAST, Q_VNNI_MADD8,
                   Q_NO_PANEL, Q_AVX512_EMIT);
}
INFER_TARGET_AVX_VNNI void gemm8_avxvnni(const int32_t* a, int64_t lda, int64_t M, const PackedB8& b, int64_t j0,
                                        int64_t j1, int32_t* c, int64_t ldc) {
  INFER_QGEMM_BODY(__m256i, 4, 2, 8, 4, b.quads, Q_AVX2_START, Q_AVX2_LOAD, Q_AVX2_BCAST, Q_AVXVNNI_MADD8,
                   Q_NO_PANEL, Q_AVX2_EMIT);
}
INFER_TARGET_AVX2 void gemm8_avx2(const int32_t* a, int64_t lda, int64_t M, const PackedB8& b, int64_t j0, int64_t j1,
                                  int32_t* c, int64_t ldc) {
  INFER_QGEMM_BODY(__m256i, 4, 2, 8, 4, b.quads, Q_AVX2_START, Q_AVX2_LOAD, Q_AVX2_BCAST, Q_AVX2_MADD8, Q_NO_PANEL,
                   Q_AVX2_EMIT);
}

// The requantizing form (gemm_rows_u8s8_q8): per panel the columns' multipliers and biases and the
// constants in vectors (Q8_PANEL), per row of the tile each accumulator vector through
// quantized_conv2d's 8-bit epilogue in registers: float(acc) * mult + bias as one FMA, the activation's
// bounds (maxps / minps, bound first), / scale, the +-2^22 clamp, cvtps2dq, + the zero point (and 128
// for an int8 type, whose bytes are then flipped); then the row's two vectors to bytes by packssdw and
// packuswb, whose saturation is the type's range (q + shift outside [0, 255] is exactly what the clamp
// to [qlo - zero, qhi - zero] would cut), and a dword permute restoring the order. y is row m's columns
// from y + m * ldy (the last panel's columns past N dropped). Statement macros, not lambdas: a lambda
// lacks its function's target attribute, so the intrinsics would not inline into it.
#define Q8_PANEL(VF, VI, LOADF, SET1F, SET1I)                                                          \
  const VF mv0 = LOADF(rq.mult + n0), mv1 = LOADF(rq.mult + n0 + L_);                                \
  const VF bv0 = LOADF(rq.bias + n0), bv1 = LOADF(rq.bias + n0 + L_);                                \
  const VF alo = SET1F(rq.act_lo), ahi = SET1F(rq.act_hi), sc = SET1F(rq.scale);                     \
  const VF big = SET1F(4194304.f), nbig = SET1F(-4194304.f);                                         \
  const VI shift = SET1I(rq.shift), flip = SET1I(int32_t(uint32_t(rq.flip) * 0x01010101u))  /* the byte in every lane */
#define Q8_AVX512_PANEL Q8_PANEL(__m512, __m512i, _mm512_loadu_ps, _mm512_set1_ps, _mm512_set1_epi32)
#define Q8_AVX2_PANEL Q8_PANEL(__m256, __m256i, _mm256_loadu_ps, _mm256_set1_ps, _mm256_set1_epi32)
#define Q8_VEC(out, acc, mv, bv, VI, P)                                                                \
  VI out;                                                                                              \
  {                                                                                                    \
    auto v_ = P##_fmadd_ps(P##_cvtepi32_ps(acc), mv, bv);                                              \
    v_ = P##_min_ps(ahi, P##_max_ps(alo, v_));                                                         \
    v_ = P##_max_ps(nbig, P##_min_ps(big, P##_div_ps(v_, sc)));                                        \
    out = P##_add_epi32(P##_cvtps_epi32(v_), shift);                                                   \
  }
#define Q8_EMIT(r, VI, P, BYTES_T, BYTES, STOREB, PERM)                                                \
  do {                                                                                                 \
    uint8_t* yr = rq.y + (m0 + (r)) * rq.ldy + (n0 - j0 * NR);                                          \
    Q8_VEC(i0, acc[r][0], mv0, bv0, VI, P);                                                            \
    Q8_VEC(i1, acc[r][1], mv1, bv1, VI, P);                                                            \
    const VI p_ = P##_packs_epi32(i0, i1), u_ = P##_packus_epi16(p_, p_);                              \
    const BYTES_T y_ = BYTES(P##_xor_si##PERM(u_, flip));                                              \
    if (cols == NR) {                                                                                  \
      STOREB(reinterpret_cast<BYTES_T*>(yr), y_);                                                      \
    } else {                                                                                           \
      alignas(32) uint8_t tmp[NR];                                                                     \
      STOREB(reinterpret_cast<BYTES_T*>(tmp), y_);                                                     \
      std::copy(tmp, tmp + cols, yr);                                                                  \
    }                                                                                                  \
  } while (0)
// packs per 128-bit lane: lane l's dwords are i0[4l..], i1[4l..] (and copies): i0's are dwords 0, 4, 8,
// 12, i1's 1, 5, 9, 13 (AVX-512); 0, 4 and 1, 5 (AVX2)
#define Q8_AVX512_BYTES(v) \
  _mm512_castsi512_si256(_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0), v))
#define Q8_AVX2_BYTES(v) _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0)))
#define Q8_AVX512_EMIT(r) Q8_EMIT(r, __m512i, _mm512, __m256i, Q8_AVX512_BYTES, _mm256_storeu_si256, 512)
#define Q8_AVX2_EMIT(r) Q8_EMIT(r, __m256i, _mm256, __m128i, Q8_AVX2_BYTES, _mm_storeu_si128, 256)

INFER_TARGET_AVX512 void gemm8q_avx512(const int32_t* a, int64_t lda, int64_t M, const PackedB8& b, int64_t j0,
                                       int64_t j1, const Requant& rq) {
  INFER_QGEMM_BODY(__m512i, 8, 2, 16, 4, b.quads, Q_AVX512_START, Q_AVX512_LOAD, Q_AVX512_BCAST, Q_AVX512_MADD8,
                   Q8_AVX512_PANEL, Q8_AVX512_EMIT);
}
INFER_TARGET_AVX512_VNNI void gemm8q_vnni(const int32_t* a, int64_t lda, int64_t M, const PackedB8& b, int64_t j0,
                                          int64_t j1, const Requant& rq) {
  INFER_QGEMM_BODY(__m512i, 8, 2, 16, 4, b.quads, Q_AVX512_START, Q_AVX512_LOAD, Q_AVX512_BCAST, Q_VNNI_MADD8,
                   Q8_AVX512_PANEL, Q8_AVX512_EMIT);
}
INFER_TARGET_AVX_VNNI void gemm8q_avxvnni(const int32_t* a, int64_t lda, int64_t M, const PackedB8& b, int64_t j0,
                                         int64_t j1, const Requant& rq) {
  INFER_QGEMM_BODY(__m256i, 4, 2, 8, 4, b.quads, Q_AVX2_START, Q_AVX2_LOAD, Q_AVX2_BCAST, Q_AVXVNNI_MADD8,
                   Q8_AVX2_PANEL, Q8_AVX2_EMIT);
}
INFER_TARGET_AVX2 void gemm8q_avx2(const int32_t* a, int64_t lda, int64_t M, const PackedB8& b, int64_t j0,
                                   int64_t j1, const Requant& rq) {
  INFER_QGEMM_BODY(__m256i, 4, 2, 8, 4, b.quads, Q_AVX2_START, Q_AVX2_LOAD, Q_AVX2_BCAST, Q_AVX2_MADD8,
                   Q8_AVX2_PANEL, Q8_AVX2_EMIT);
}

}  // namespace

TileShape tile_shape(CpuIsa isa) { return isa == CpuIsa::Avx512 ? kAvx512 : isa == CpuIsa::Avx2 ? kAvx2 : kBaseline; }

PackedB pack_b(const int8_t* w, int64_t N, int64_t K, int64_t ldw, CpuIsa isa) {
  if (N < 0 || K < 0 || ldw < K) throw Error("qgemm: bad weight geometry");
  const TileShape t = tile_shape(isa);
  const int nr = t.nr();
  PackedB b;
  b.isa = isa, b.K = K, b.N = N;
  b.pairs = (K + 1) / 2;
  b.panels = (N + nr - 1) / nr;
  b.data.assign(static_cast<size_t>(b.panels * b.pairs * nr * 2), 0);
  for (int64_t j = 0; j < b.panels; ++j)
    for (int64_t p = 0; p < b.pairs; ++p)
      for (int cc = 0; cc < nr; ++cc) {
        const int64_t n = j * nr + cc;
        if (n >= N) break;
        for (int h = 0; h < 2; ++h) {
          const int64_t k = 2 * p + h;
          if (k < K) b.data[static_cast<size_t>(((j * b.pairs + p) * nr + cc) * 2 + h)] = w[n * ldw + k];
        }
      }
  return b;
}

size_t packed_a_size(int64_t M, int64_t K, CpuIsa isa) {
  const int64_t mr = tile_shape(isa).mr;
  return static_cast<size_t>((M + mr - 1) / mr * mr * ((K + 1) / 2));
}

void pack_a(const uint8_t* a, int64_t M, int64_t K, int64_t lda, int32_t zero, CpuIsa isa, int32_t* out) {
  if (zero < 0 || zero > 255) throw Error("qgemm: a uint8 zero point must be in [0, 255]");
  const int64_t mr = tile_shape(isa).mr, pairs = (K + 1) / 2, blocks = (M + mr - 1) / mr;
  for (int64_t rb = 0; rb < blocks; ++rb)
    for (int64_t p = 0; p < pairs; ++p)
      for (int64_t r = 0; r < mr; ++r) {
        const int64_t m = rb * mr + r, k = 2 * p;
        int32_t lo = 0, hi = 0;
        if (m < M) {
          lo = int32_t(a[m * lda + k]) - zero;
          hi = k + 1 < K ? int32_t(a[m * lda + k + 1]) - zero : 0;
        }
        out[(rb * pairs + p) * mr + r] =
            int32_t(uint32_t(uint16_t(int16_t(lo))) | (uint32_t(uint16_t(int16_t(hi))) << 16));
      }
}

namespace {

// What both forms check of a call: the packed level on this CPU, panels j0 .. j1-1 inside the weight,
// ldc wide enough for the columns written. False: nothing to do (no rows or no panels).
template <class B>
bool check_call(const B& b, int64_t M, int64_t j0, int64_t j1, int64_t ldc) {
  if (b.isa > cpu_isa_supported())
    throw Error(std::string("qgemm: weights packed for ") + cpu_isa_name(b.isa) + ", which this CPU lacks");
  if (j0 < 0 || j1 > b.panels || j0 > j1) throw Error("qgemm: panel range outside the weight");
  const int64_t nr = tile_shape(b.isa).nr();
  if (ldc < std::min(b.N, j1 * nr) - j0 * nr) throw Error("qgemm: ldc below the columns written");
  return M > 0 && j0 < j1;
}

// lda 0: packed A; else row-major A with rows lda int32 apart. Panels j0 .. j1-1 only.
void dispatch(const int32_t* a, int64_t lda, int64_t M, const PackedB& b, int64_t j0, int64_t j1, int32_t* c,
              int64_t ldc) {
  if (!check_call(b, M, j0, j1, ldc)) return;
  switch (b.isa) {
    case CpuIsa::Avx512: gemm_avx512(a, lda, M, b, j0, j1, c, ldc); break;
    case CpuIsa::Avx2: gemm_avx2(a, lda, M, b, j0, j1, c, ldc); break;
    default: gemm_baseline(a, lda, M, b, j0, j1, c, ldc); break;
  }
}

}  // namespace

void gemm(const int32_t* a, int64_t M, const PackedB& b, int32_t* c, int64_t ldc) {
  dispatch(a, 0, M, b, 0, b.panels, c, ldc);
}

void gemm_rows(const int32_t* a, int64_t lda, int64_t M, const PackedB& b, int32_t* c, int64_t ldc, int64_t j0,
               int64_t j1) {
  if (lda < b.pairs) throw Error("qgemm: lda below the pairs of K");
  dispatch(a, lda, M, b, j0, j1 < 0 ? b.panels : j1, c, ldc);
}

bool has_vnni(CpuIsa isa) {
  // cpuid leaf 7: subleaf 0 ECX bit 11 AVX512_VNNI, subleaf 1 EAX bit 4 AVX-VNNI (clang's
  // __builtin_cpu_supports lacks the latter)
  static const auto bits = [] {
    unsigned a = 0, b = 0, c = 0, d = 0, avx512 = 0, avx = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) avx512 = (c >> 11) & 1;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) avx = (a >> 4) & 1;
    return std::make_pair(avx512 != 0, avx != 0);
  }();
  return isa == CpuIsa::Avx512 ? bits.first : isa == CpuIsa::Avx2 ? bits.second : false;
}

bool fits_u8s8(const int8_t* w, int64_t n, CpuIsa isa, bool vnni) {
  if (isa != CpuIsa::Avx2 && isa != CpuIsa::Avx512) return false;
  if (vnni && has_vnni(isa)) return true;  // vpdpbusd: no int16 step to saturate
  for (int64_t i = 0; i < n; ++i)
    if (w[i] < -64 || w[i] > 64) return false;
  return true;
}

PackedB8 pack_b_u8s8(const int8_t* w, int64_t N, int64_t K, int64_t ldw, int32_t zero, CpuIsa isa, bool vnni) {
  if (N < 0 || K < 0 || ldw < K) throw Error("qgemm: bad weight geometry");
  if (isa != CpuIsa::Avx2 && isa != CpuIsa::Avx512) throw Error("qgemm: the u8s8 form needs AVX2 or AVX-512");
  if (zero < 0 || zero > 255) throw Error("qgemm: a uint8 zero point must be in [0, 255]");
  if (K > 65536) throw Error("qgemm: the u8s8 form takes K up to 65536");
  const int nr = tile_shape(isa).nr();
  PackedB8 b;
  b.isa = isa, b.K = K, b.N = N;
  b.vnni = vnni && has_vnni(isa);
  b.quads = (K + 3) / 4;
  b.panels = (N + nr - 1) / nr;
  b.data.assign(static_cast<size_t>(b.panels * b.quads * nr * 4), 0);
  b.start.assign(static_cast<size_t>(b.panels * nr), 0);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t j = n / nr, cc = n % nr;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int8_t v = w[n * ldw + k];
      if (!b.vnni && (v < -64 || v > 64)) throw Error("qgemm: the u8s8 form takes weights in [-64, 64], got " + std::to_string(v));
      sum += v;
      b.data[static_cast<size_t>(((j * b.quads + k / 4) * nr + cc) * 4 + k % 4)] = v;
    }
    b.start[static_cast<size_t>(n)] = -zero * sum;
  }
  return b;
}

void gemm_rows_u8s8_q8(const uint8_t* a, int64_t lda, int64_t M, const PackedB8& b, const Requant& rq, int64_t j0,
                       int64_t j1) {
  if (lda % 4 || lda < 4 * b.quads) throw Error("qgemm: lda not a multiple of 4 at or above the quads of K");
  j1 = j1 < 0 ? b.panels : j1;
  if (!check_call(b, M, j0, j1, rq.ldy)) return;
  if (!rq.mult || !rq.bias || !rq.y || !(rq.scale > 0.f)) throw Error("qgemm: requantization without its arrays");
  const auto* a32 = reinterpret_cast<const int32_t*>(a);
  if (b.isa == CpuIsa::Avx512)
    (b.vnni ? gemm8q_vnni : gemm8q_avx512)(a32, lda / 4, M, b, j0, j1, rq);
  else
    (b.vnni ? gemm8q_avxvnni : gemm8q_avx2)(a32, lda / 4, M, b, j0, j1, rq);
}

void gemm_rows_u8s8(const uint8_t* a, int64_t lda, int64_t M, const PackedB8& b, int32_t* c, int64_t ldc, int64_t j0,
                    int64_t j1) {
  if (lda % 4 || lda < 4 * b.quads) throw Error("qgemm: lda not a multiple of 4 at or above the quads of K");
  j1 = j1 < 0 ? b.panels : j1;
  if (!check_call(b, M, j0, j1, ldc)) return;
  const auto* a32 = reinterpret_cast<const int32_t*>(a);
  if (b.isa == CpuIsa::Avx512)
    (b.vnni ? gemm8_vnni : gemm8_avx512)(a32, lda / 4, M, b, j0, j1, c, ldc);
  else
    (b.vnni ? gemm8_avxvnni : gemm8_avx2)(a32, lda / 4, M, b, j0, j1, c, ldc);
}

}  // namespace infer::cpu::qgemm
