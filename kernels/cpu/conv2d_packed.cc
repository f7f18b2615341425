// CPU conv2d "packed_gemm": an ungrouped, undilated conv2d (NCHW fp32, any kernel, stride and padding,
// constant weight) as y[C_out, HO*WO] = w[C_out, K] col[K, HO*WO] with our own GEMM instead of
// OpenBLAS: the weight packed once in prepare() into blocks of 8 output channels (gemm_microkernel.h),
// the column matrix the input itself for a 1x1 stride-1 unpadded conv, else im2col into the workspace.
// Per sample one OpenMP loop (guided) over (column block, chunk of channel blocks); each iteration runs
// the ISA's register-blocked micro-kernel (8 x 48 on AVX-512, 4 x 24 on AVX2, 4 x 8 on baseline;
// isa.h, compiled per level and picked by NodeDesc::isa) in BLIS's order (gemm_tiles_body): per column
// tile and block of K, the tile packed into L1 and every channel block of the chunk run over it, the
// chain of each output continued across K blocks (the full-K sums bit for bit); bias, residual
// (add_residual) and activation are applied as the last block stores. Columns are blocked so that a
// block of col (K x NC floats) stays in a core's L2. The columns left past whole tiles run at full K
// (gemm_block_body), the last ones past whole vectors through mk::accumulate_cols, one column per
// accumulator, straight from col. No BLAS, no allocation at run time.
// The default from 2^20 multiply-adds up (packed_priority: below, OpenBLAS's small-GEMM path wins).
// "packed_implicit" (below) runs the same GEMM without the column matrix: the input copied once into
// zero-padded stride phases, each column-matrix row read in place at a tabulated offset (conv1's
// 7.4 MB im2col becomes a 0.6 MB copy).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/conv_call.h"
#include "infer/kernel.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/omp_last.h"

namespace infer::cpu {
namespace {

using mk::load, mk::store;
// A column block of col (K x nc floats) is meant to stay in a core's L2 (Zen 4: 1 MiB) while every
// channel block passes over it; each further column block reads the whole packed weight again. Where
// the weight is the larger operand (C_out >= HO*WO: ResNet-50's 14x14 and 7x7 layers, weights of
// 0.5-9.4 MB) those re-reads from memory cost more than col spilling out of L2, so the budget is
// nearly all of L2 there (docs/kernels.md "CPU: conv2d packed_gemm": 384 KiB everywhere vs 960 KiB
// for the weight-heavy ones: ResNet-50 1024->256 1x1 at 14x14 0.61 -> 0.53 ms, 3x3 stride 2 to 7x7
// 1.56 -> 1.35; 960 KiB everywhere made the 56x56 convs slower, 0.59 -> 0.64, conv1 1.87 -> 1.94).
constexpr int64_t kColBlockBytes = 384 << 10;
constexpr int64_t kColBlockBytesWeightHeavy = 960 << 10;
constexpr int64_t kParallelMin = int64_t(1) << 15;  // multiply-adds below which one thread runs
// A column tile (kNV vectors of columns) packed for a K block, on the stack: kept in L1 while a chunk
// of channel blocks passes over it (gemm_tiles_body). kc = 16 KiB / (4 B x tile columns): 170 rows on
// AVX2 (24 columns), 85 on AVX-512 (48), 512 on baseline (8).
constexpr int64_t kTileBytes = 16 << 10;

struct PackedDims {
  ConvProblem g;
  isa::Shape s;         // the register tile of the node's ISA level
  int64_t N, CO, K, P;  // P = HO*WO columns
  int64_t COB;          // blocks of s.mr output channels
  int64_t full;         // columns in whole vectors (P rounded down to s.lanes)
  int64_t nc;           // columns per column block (a multiple of kTileCols)
  int64_t NCB;          // column blocks, the partial vector (if any) in the last one
  bool identity;
  int64_t kc;           // K block of the blocked tiles (a packed col tile of kc x tile_cols() floats in L1)
  int64_t cbs, chunks;  // channel blocks per parallel chunk, chunks
  size_t col_floats() const { return identity ? 0 : static_cast<size_t>(K * P); }
};

PackedDims packed_dims(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  PackedDims d;
  d.g = conv2d_problem(p, node.input_shapes[0], node.input_shapes[1], node.output_shapes[0]);
  d.s = isa::shape(node.isa);
  const int64_t lanes = d.s.lanes;
  d.N = node.input_shapes[0][0], d.CO = node.input_shapes[1][0];
  d.K = d.g.col_rows(), d.P = d.g.col_cols();
  d.COB = (d.CO + d.s.mr - 1) / d.s.mr;
  d.full = d.P / lanes * lanes;
  // as many blocks as the L2 budget needs, then equal ones (whole vectors): guided chunks are runs
  // of iterations, so a thread's share stays whole column blocks where there are several
  const int64_t block_bytes = d.CO >= d.P ? kColBlockBytesWeightHeavy : kColBlockBytes;
  const int64_t budget = std::max<int64_t>(d.s.tile_cols(), block_bytes / (std::max<int64_t>(d.K, 1) * 4));
  d.NCB = std::max<int64_t>(1, (d.P + budget - 1) / budget);
  d.nc = ((d.P + d.NCB - 1) / d.NCB + lanes - 1) / lanes * lanes;
  d.NCB = std::max<int64_t>(1, (d.P + d.nc - 1) / d.nc);
  d.identity = im2col_is_identity(d.g);
  d.kc = kTileBytes / (4 * d.s.tile_cols());
  // Chunks of channel blocks: about 4 parallel iterations per thread with the column blocks, but at
  // least 4 channel blocks a chunk where there are (each chunk packs its column tiles again).
  const int64_t threads = omp_get_max_threads();
  d.chunks = std::clamp<int64_t>((4 * threads + d.NCB - 1) / d.NCB, 1, std::max<int64_t>(1, d.COB / 4));
  d.cbs = (d.COB + d.chunks - 1) / d.chunks;
  d.chunks = (d.COB + d.cbs - 1) / d.cbs;
  return d;
}

struct Prepared {
  std::vector<float> a;  // [COB][K][mr]
};

std::shared_ptr<void> prepare_weights(const NodeDesc& node) {
  const PackedDims d = packed_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv2d.packed_gemm: the weight must be a constant");
  auto prep = std::make_shared<Prepared>();
  prep->a.resize(static_cast<size_t>(d.COB * d.K * d.s.mr));
  mk::pack_a(w, d.CO, d.K, d.K, d.s.mr, prep->a.data());
  return prep;
}

// The epilogue of one micro-tile: rows [0, rows) of acc (output channels co0 + r), NV vectors of
// columns from y's column c0, of which `cols` are real (< kLanes * NV only for the partial vector):
// + bias, + residual, ReLU on whole vectors, store. Other activations run over the whole block
// afterwards (act_block, vectorised per level), one loop per row, so that the tile loop does not
// carry every kind's code.
template <class I, int NV>
INFER_INLINE void store_tile(typename I::Vec (&acc)[I::kMR][NV], int64_t rows, int64_t cols, const float* bias,
                             const float* res, float* y, int64_t ld, bool relu) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  for (int64_t r = 0; r < rows; ++r)
    for (int q = 0; q < NV; ++q) {
      V o = acc[r][q];
      if (bias) o += bias[r];
      const int64_t n = std::min<int64_t>(L, cols - q * L);
      if (n == L) {
        if (res) {
          V rv;
          load(rv, res + r * ld + q * L);
          o += rv;
        }
        if (relu) o = o < 0.f ? V{} : o;
        store(y + r * ld + q * L, o);
      } else {
        float out[L];
        store(out, o);
        for (int64_t l = 0; l < n; ++l) {
          float v = out[l] + (res ? res[r * ld + q * L + l] : 0.f);
          y[r * ld + q * L + l] = relu && v < 0.f ? 0.f : v;
        }
      }
    }
}

// The epilogue of the last R columns (accumulate_cols: acc[j] holds column j's kMR rows).
template <class I, int R>
INFER_INLINE void store_cols(typename I::RowVec (&acc)[R], int64_t rows, const float* bias, const float* res,
                             float* y, int64_t ld, bool relu) {
  float out[R][I::kMR];
  std::memcpy(out, acc, sizeof out);
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < R; ++j) {
      float v = out[j][r] + (bias ? bias[r] : 0.f) + (res ? res[r * ld + j] : 0.f);
      y[r * ld + j] = relu && v < 0.f ? 0.f : v;
    }
}

template <class I, int R>
INFER_INLINE void cols_tile(const float* a, const float* b, int64_t ldb, int64_t K, int64_t rows,
                            const float* bias, const float* res, float* y, bool relu) {
  if constexpr (R < I::kLanes) {
    typename I::RowVec acc[R];
    mk::accumulate_cols<I, R>(a, b, ldb, K, acc);
    store_cols<I, R>(acc, rows, bias, res, y, ldb, relu);
  }
}

// The activations other than ReLU on rows [0, rows) x columns [0, cols) of y (leading dimension ld),
// in the level's vectors (activation_simd.h). Row r is an output channel: a per-channel PRelu is
// LeakyRelu(slope[r]) on it (slope already offset to the block's first channel).
template <class I>
INFER_INLINE void act_block(float* y, int64_t rows, int64_t cols, int64_t ld, const Activation& act,
                            const float* slope) {
  for (int64_t r = 0; r < rows; ++r) activate_row<I>(y + r * ld, cols, channel_activation(act, slope, r));
}

// Output channel block cb over columns [c0, c1) of a column block: tiles of kNV vectors, then the
// whole vectors left, then (in the last block) the 1 to kLanes-1 columns past the whole vectors, one
// column per accumulator.
template <class I>
INFER_INLINE void gemm_block_body(const PackedDims& d, const float* a, const float* col, int64_t c0, int64_t c1,
                                  int64_t co0, const float* bias, const float* res, float* y,
                                  const Activation& act, const float* slope) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes, NV = I::kNV, MR = I::kMR;
  const int64_t rows = std::min<int64_t>(MR, d.CO - co0);
  const int64_t P = d.P, K = d.K;
  const float* b = bias ? bias + co0 : nullptr;
  const float* r = res ? res + co0 * P : nullptr;
  float* yb = y + co0 * P;
  const int64_t full_end = std::min(c1, d.full);
  const bool relu = act.kind == ActivationKind::Relu;
  int64_t c = c0;
  for (; c + NV * L <= full_end; c += NV * L) {
    V acc[MR][NV];
    mk::accumulate<I, NV>(a, col + c, P, K, acc);
    store_tile<I, NV>(acc, rows, NV * L, b, r ? r + c : nullptr, yb + c, P, relu);
  }
  if constexpr (NV > 2) {
    if (full_end - c == 2 * L) {
      V acc[MR][2];
      mk::accumulate<I, 2>(a, col + c, P, K, acc);
      store_tile<I, 2>(acc, rows, 2 * L, b, r ? r + c : nullptr, yb + c, P, relu);
      c += 2 * L;
    }
  }
  if (full_end - c == L) {
    V acc[MR][1];
    mk::accumulate<I, 1>(a, col + c, P, K, acc);
    store_tile<I, 1>(acc, rows, L, b, r ? r + c : nullptr, yb + c, P, relu);
    c += L;
  }
  if (c1 == P && d.full < P) {  // the last 1 to L-1 columns
    const float* rf = r ? r + d.full : nullptr;
    const float* cf = col + d.full;
    float* yf = yb + d.full;
    switch (P - d.full) {
#define INFER_COLS_CASE(R) \
  case R: cols_tile<I, R>(a, cf, P, K, rows, b, rf, yf, relu); break;
      INFER_COLS_CASE(1) INFER_COLS_CASE(2) INFER_COLS_CASE(3) INFER_COLS_CASE(4) INFER_COLS_CASE(5)
      INFER_COLS_CASE(6) INFER_COLS_CASE(7) INFER_COLS_CASE(8) INFER_COLS_CASE(9) INFER_COLS_CASE(10)
      INFER_COLS_CASE(11) INFER_COLS_CASE(12) INFER_COLS_CASE(13) INFER_COLS_CASE(14) INFER_COLS_CASE(15)
#undef INFER_COLS_CASE
    }
  }
  if (act.kind != ActivationKind::None && !relu)
    act_block<I>(yb + c0, rows, c1 - c0, P, act, slope ? slope + co0 : nullptr);
}
INFER_PER_ISA(void, gemm_block, gemm_block_body,
              (const PackedDims& d, const float* a, const float* col, int64_t c0, int64_t c1, int64_t co0,
               const float* bias, const float* res, float* y, const Activation& act, const float* slope),
              (d, a, col, c0, c1, co0, bias, res, y, act, slope))

// Channel blocks [cb0, cb1) over the whole tiles (kNV vectors each) of columns [c0, c_end) in
// BLIS's order (Goto and van de Geijn 2008; Van Zee and van de Geijn 2015): per column tile and block
// of kc rows of K, the tile's rows of col are packed contiguously into `tile` (L1) and every channel
// block's micro-kernel runs over it, the packed weight's matching kc x kMR block streaming from L2.
// Partial sums live in y between K blocks and each block continues them (mk::accumulate_onto: one FMA
// chain per output over k, the full-K result bit for bit); the last block applies bias, residual and
// ReLU as it stores, other activations run over the tile after it. (Full K per tile against col in place, as
// gemm_block_body does, reads 3 vectors of a different col row per k from L2: on Zen 3's 32 KiB L1
// that held ResNet-50's 1x1 layers near half of the FMA peak.)
template <class I>
INFER_INLINE void gemm_tiles_body(const PackedDims& d, const float* a, const float* col, int64_t c0, int64_t c_end,
                                  int64_t cb0, int64_t cb1, const float* bias, const float* res, float* y,
                                  const Activation& act, const float* slope) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes, NV = I::kNV, MR = I::kMR, NR = NV * L;
  const int64_t P = d.P, K = d.K, kc = d.kc;
  alignas(64) float tile[kTileBytes / sizeof(float)];
  const bool relu = act.kind == ActivationKind::Relu;
  for (int64_t c = c0; c + NR <= c_end; c += NR) {
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t kk = std::min(kc, K - k0);
      for (int64_t k = 0; k < kk; ++k)
        for (int q = 0; q < NV; ++q) {
          V v;
          load(v, col + (k0 + k) * P + c + q * L);
          store(tile + k * NR + q * L, v);
        }
      const bool first = k0 == 0, last = k0 + kk == K;
      for (int64_t cb = cb0; cb < cb1; ++cb) {
        const int64_t co0 = cb * MR, rows = std::min<int64_t>(MR, d.CO - co0);
        V acc[MR][NV];
        float* yb = y + co0 * P + c;
        if (first) {
          mk::accumulate<I, NV>(a + (cb * K + k0) * MR, tile, NR, kk, acc);
        } else {
          for (int r = 0; r < MR; ++r)
            for (int q = 0; q < NV; ++q) {
              if (r < rows) load(acc[r][q], yb + r * P + q * L);
              else acc[r][q] = V{};
            }
          mk::accumulate_onto<I, NV>(a + (cb * K + k0) * MR, tile, NR, kk, acc);
        }
        if (last) {
          store_tile<I, NV>(acc, rows, NR, bias ? bias + co0 : nullptr, res ? res + co0 * P + c : nullptr, yb, P,
                            relu);
        } else {
          for (int64_t r = 0; r < rows; ++r)
            for (int q = 0; q < NV; ++q) store(yb + r * P + q * L, acc[r][q]);
        }
      }
    }
    if (act.kind != ActivationKind::None && !relu)
      for (int64_t cb = cb0; cb < cb1; ++cb) {
        const int64_t co0 = cb * MR;
        act_block<I>(y + co0 * P + c, std::min<int64_t>(MR, d.CO - co0), NR, P, act, slope ? slope + co0 : nullptr);
      }
  }
}
INFER_PER_ISA(void, gemm_tiles, gemm_tiles_body,
              (const PackedDims& d, const float* a, const float* col, int64_t c0, int64_t c_end, int64_t cb0,
               int64_t cb1, const float* bias, const float* res, float* y, const Activation& act, const float* slope),
              (d, a, col, c0, c_end, cb0, cb1, bias, res, y, act, slope))

void packed_run(const KernelCall& call) {
  const PackedDims d = packed_dims(call.node);
  const auto io = unpack_conv_call<Prepared>(call, "packed_gemm", !d.identity);
  const float *x = io.x, *bias = io.bias, *residual = io.residual;
  float *y = io.y, *colbuf = io.workspace;
  const Activation act = io.act;
  const float* a = io.prep->a.data();
  const int64_t xs = d.g.C * d.g.H * d.g.W, ys = d.CO * d.P;
  const bool parallel = d.CO * d.K * d.P >= kParallelMin;
  const auto gemm_block = gemm_block_for(call.node.isa);
  const auto gemm_tiles = gemm_tiles_for(call.node.isa);
  const int64_t mr = d.s.mr, nr = d.s.tile_cols();
  // The column blocks: [cb * nc, min(P, (cb + 1) * nc)); the last one ends at P, partial vector included.

  for (int64_t n = 0; n < d.N; ++n) {
    const float* xn = x + n * xs;
    const float* col = d.identity ? xn : colbuf;
    const float* rn = residual ? residual + n * ys : nullptr;
    float* yn = y + n * ys;
    // One region: im2col's rows (where needed), then after a barrier the GEMM: one wake-up of the
    // sleeping team per conv, not two. The GEMM loop: column block outer, so a thread's share of
    // iterations is a run of whole column blocks where there are several (col block in its L2, the
    // small packed weight read again), else of channel blocks. Guided, not static: with
    // OMP_WAIT_POLICY=passive the other thread sleeps between regions and starts tens of
    // microseconds late; guided lets the first thread take its late share (halving the wait) while
    // keeping runs contiguous; and the master reaches the closing barrier last (omp_last.h), so it
    // does not sleep there (docs/kernels.md "OpenMP schedules").
    MasterLast last;
    SpinArrival filled;
#pragma omp parallel if (parallel)
    {
      if (!d.identity) {
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < d.K; ++r) im2col_row(d.g, xn, colbuf, r);
        filled.arrive();
#pragma omp barrier
      }
      // Per (column block, chunk of channel blocks): its whole column tiles K-blocked (gemm_tiles),
      // then per channel block the columns left (fewer than a tile) at full K (gemm_block).
#pragma omp for collapse(2) schedule(guided) nowait
      for (int64_t jb = 0; jb < d.NCB; ++jb)
        for (int64_t ch = 0; ch < d.chunks; ++ch) {
          const int64_t c0 = jb * d.nc, c1 = jb + 1 == d.NCB ? d.P : std::min(d.P, c0 + d.nc);
          const int64_t cb0 = ch * d.cbs, cb1 = std::min(d.COB, cb0 + d.cbs);
          const int64_t whole = std::min(c1, d.full) - c0, c_tiles = c0 + std::max<int64_t>(0, whole) / nr * nr;
          gemm_tiles(d, a, col, c0, c_tiles, cb0, cb1, bias, rn, yn, act, io.slope);
          if (c_tiles < c1)
            for (int64_t cb = cb0; cb < cb1; ++cb)
              gemm_block(d, a + cb * d.K * mr, col, c_tiles, c1, cb * mr, bias, rn, yn, act, io.slope);
        }
      last.arrive();
    }
  }
}

// Ungrouped, undilated (im2col's column order is the weight's), a constant weight, a non-empty output.
bool packed_applicable(const NodeDesc& node) {
  if (!conv2d_ungrouped(node) || !has_constant_weight(node) || node.input_shapes.size() < 2) return false;
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  return xs.size() == 4 && ws.size() == 4 && ys.size() == 4 && ys[2] * ys[3] > 0 && ws[0] > 0 &&
         ws[1] * ws[2] * ws[3] > 0;
}

// The default choice (KernelVariant::priority_for; im2col_gemm has 10, Winograd 15 where it is
// chosen), from the 2-core AMD EPYC VM (2026-11-25, docs/kernels.md "CPU: conv2d packed_gemm"):
//  - inside the models (weights cold: OpenBLAS repacks them on every call, ours are packed once)
//    every ResNet-50 conv it takes was 0.98-1.41x im2col_gemm (model 42.1 -> 37.9 ms), ResNet-18
//    22.0 -> 20.3 ms, MobileNetV2 15.8 -> 12.7, EfficientNet-B0 37.3 -> 33.5 (paired runs);
//  - alone, below about 2^20 multiply-adds OpenBLAS's single-threaded small-GEMM path wins by a few
//    microseconds (16 -> 64 3x3 at 7x7, 451K: 0.024 vs 0.017 ms; 96 -> 24 1x1 at 14x14: 0.017-0.024
//    vs 0.011-0.015; LeNet's 1 -> 6 5x5: 0.009 vs 0.008); from 1.6M up packed_gemm is ahead or level
//    (256 -> 128 1x1 at 7x7: 0.040 vs 0.044; 64 -> 64 3x3 at 7x7, 1.8M: 0.085 vs 0.094).
constexpr int64_t kMinMacs = int64_t(1) << 20;

int packed_priority(const NodeDesc& node) {
  if (!packed_applicable(node)) return 8;
  const PackedDims d = packed_dims(node);
  return d.N * d.CO * d.K * d.P >= kMinMacs ? 12 : 8;
}

size_t packed_workspace(const NodeDesc& node) {
  const PackedDims d = packed_dims(node);
  return d.col_floats() * sizeof(float);
}


// ---- packed_implicit: the same GEMM with the column matrix never written --------------------------
// Row k = (c, ky, kx) of the column matrix holds x[c][oy*sh - pad_top + ky][ox*sw - pad_left + kx]
// for every output (oy, ox). The input is copied once, zero-padded, into stride phases: phase
// (py, px) of channel c is the plane ph[i][j] = xpad[i*sh + py][j*sw + px] (HV x WV). Tap (ky, kx)
// then reads phase (ky % sh, kx % sw) at (oy + ky / sh, ox + kx / sw): with output pixels numbered
// along rows of WV (the "virtual" columns j = oy*WV + ox, ox < WO real, the last (KW-1)/sw of each row
// not), row k is the phase plane shifted by a constant, off[k] = plane + (ky / sh)*WV + kx / sw. The
// micro-kernel reads B through that table (mk::OffsetRows). Cost: (WV - WO)/WV columns computed and
// dropped (3/115 for ResNet's conv1, 1/29 for a 3x3 stride 2 to 28x28); saving: the copy is the input's
// size (stride 2: sh*sw = 4 phases of a quarter each), where im2col writes KH*KW/(sh*sw) times that.

struct ImplicitDims {
  ConvProblem g;
  isa::Shape s;    // the register tile of the node's ISA level
  int64_t N, CO, K, COB;
  int64_t PH, PW;  // phases per axis that a tap reads: min(stride, kernel)
  int64_t HV, WV;  // a phase plane's rows and columns; WV is also the virtual output row
  int64_t plane;   // HV * WV floats
  int64_t T;       // virtual columns, HO * WV
  int64_t full;    // T rounded down to whole vectors
  int64_t nc, NCB; // columns per column block (whole vectors), column blocks
  int64_t slack;   // zeros after the last plane: the last row's dropped columns read up to (KW-1)/sw past it
  size_t ws_floats() const { return static_cast<size_t>(g.C * PH * PW * plane + slack); }
};

ImplicitDims implicit_dims(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  ImplicitDims d;
  d.g = conv2d_problem(p, node.input_shapes[0], node.input_shapes[1], node.output_shapes[0]);
  const ConvProblem& g = d.g;
  d.s = isa::shape(node.isa);
  const int64_t lanes = d.s.lanes;
  d.N = node.input_shapes[0][0], d.CO = node.input_shapes[1][0];
  d.K = g.col_rows(), d.COB = (d.CO + d.s.mr - 1) / d.s.mr;
  d.PH = std::min(g.stride_h, g.KH), d.PW = std::min(g.stride_w, g.KW);
  d.HV = g.HO + (g.KH - 1) / g.stride_h, d.WV = g.WO + (g.KW - 1) / g.stride_w;
  d.plane = d.HV * d.WV;
  d.T = g.HO * d.WV;
  d.slack = (g.KW - 1) / g.stride_w + lanes;
  d.full = d.T / lanes * lanes;
  // A column block reads, per phase plane, its own columns plus the largest tap offset: keep that
  // within the same L2 budgets as packed_gemm (the weight-heavy rule included).
  const int64_t block_bytes = d.CO >= g.HO * g.WO ? kColBlockBytesWeightHeavy : kColBlockBytes;
  const int64_t max_off = (g.KH - 1) / g.stride_h * d.WV + (g.KW - 1) / g.stride_w;
  const int64_t budget =
      std::max<int64_t>(d.s.tile_cols(), block_bytes / (std::max<int64_t>(g.C * d.PH * d.PW, 1) * 4) - max_off);
  d.NCB = std::max<int64_t>(1, (d.T + budget - 1) / budget);
  d.nc = ((d.T + d.NCB - 1) / d.NCB + lanes - 1) / lanes * lanes;
  d.NCB = std::max<int64_t>(1, (d.T + d.nc - 1) / d.nc);
  return d;
}

struct ImplicitPrepared {
  std::vector<float> a;      // [COB][K][mr]
  std::vector<int64_t> off;  // [K]: where row k of the column matrix starts in the phase planes
};

std::shared_ptr<void> implicit_prepare(const NodeDesc& node) {
  const ImplicitDims d = implicit_dims(node);
  const ConvProblem& g = d.g;
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv2d.packed_implicit: the weight must be a constant");
  auto prep = std::make_shared<ImplicitPrepared>();
  prep->a.resize(static_cast<size_t>(d.COB * d.K * d.s.mr));
  mk::pack_a(w, d.CO, d.K, d.K, d.s.mr, prep->a.data());
  prep->off.resize(static_cast<size_t>(d.K));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t ky = 0; ky < g.KH; ++ky)
      for (int64_t kx = 0; kx < g.KW; ++kx) {
        const int64_t phase = (c * d.PH + ky % g.stride_h) * d.PW + kx % g.stride_w;
        prep->off[static_cast<size_t>((c * g.KH + ky) * g.KW + kx)] =
            phase * d.plane + ky / g.stride_h * d.WV + kx / g.stride_w;
      }
  return prep;
}

// Phase-plane row `row` (of C * PH * PW * HV) of one sample: zeros where it falls in the padding.
void phase_row(const ImplicitDims& d, const float* x, float* ph, int64_t row) {
  const ConvProblem& g = d.g;
  const int64_t i = row % d.HV, phase = row / d.HV;
  const int64_t px = phase % d.PW, py = phase / d.PW % d.PH, c = phase / (d.PW * d.PH);
  float* dst = ph + row * d.WV;
  const int64_t r = i * g.stride_h + py - g.pad_top;
  if (r < 0 || r >= g.H) {
    std::fill(dst, dst + d.WV, 0.f);
    return;
  }
  const float* src = x + (c * g.H + r) * g.W;
  const int64_t sw = g.stride_w, q0 = px - g.pad_left;  // column j reads src[q0 + j*sw]
  // real columns: 0 <= q0 + j*sw < W
  const int64_t j0 = std::clamp<int64_t>(q0 >= 0 ? 0 : (-q0 + sw - 1) / sw, 0, d.WV);
  const int64_t j1 = std::clamp<int64_t>(g.W - q0 <= 0 ? 0 : (g.W - q0 + sw - 1) / sw, j0, d.WV);
  std::fill(dst, dst + j0, 0.f);
  if (sw == 1) std::memcpy(dst + j0, src + q0 + j0, static_cast<size_t>(j1 - j0) * sizeof(float));
  else
    for (int64_t j = j0; j < j1; ++j) dst[j] = src[q0 + j * sw];
  std::fill(dst + j1, dst + d.WV, 0.f);
}

// The epilogue of a tile over virtual columns [j0, j0 + kLanes * NV): a vector whose columns are real
// pixels of one output row is stored whole (bias, residual, ReLU as store_tile); one that crosses a
// row's end goes lane by lane, the dropped columns skipped.
template <class I, int NV>
INFER_INLINE void store_virtual(typename I::Vec (&acc)[I::kMR][NV], const ImplicitDims& d, int64_t rows,
                                int64_t j0, const float* bias, const float* res, float* y, bool relu) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const int64_t P = d.g.HO * d.g.WO, WO = d.g.WO, WV = d.WV;
  for (int q = 0; q < NV; ++q) {
    const int64_t j = j0 + q * L, oy = j / WV, ox = j - oy * WV;
    if (ox + L <= WO) {
      const int64_t o = oy * WO + ox;
      for (int64_t r = 0; r < rows; ++r) {
        V v = acc[r][q];
        if (bias) v += bias[r];
        if (res) {
          V rv;
          load(rv, res + r * P + o);
          v += rv;
        }
        if (relu) v = v < 0.f ? V{} : v;
        store(y + r * P + o, v);
      }
      continue;
    }
    for (int64_t r = 0; r < rows; ++r) {
      float out[L];
      store(out, acc[r][q]);
      int64_t cy = oy, cx = ox;
      for (int l = 0; l < L; ++l) {
        if (cx < WO) {
          const int64_t o = r * P + cy * WO + cx;
          float v = out[l] + (bias ? bias[r] : 0.f) + (res ? res[o] : 0.f);
          y[o] = relu && v < 0.f ? 0.f : v;
        }
        if (++cx == WV) cx = 0, ++cy;
      }
    }
  }
}

// The last R virtual columns (accumulate_cols_rows: acc[j] holds column j's kMR rows), from column j0.
template <class I, int R>
INFER_INLINE void implicit_cols(const ImplicitDims& d, const float* a, const float* ph, const int64_t* off,
                                int64_t j0, int64_t rows, const float* bias, const float* res, float* y,
                                bool relu) {
  if constexpr (R < I::kLanes) {
    typename I::RowVec acc[R];
    mk::accumulate_cols_rows<I, R>(a, mk::OffsetRows{ph + j0, off}, d.K, acc);
    float out[R][I::kMR];
    std::memcpy(out, acc, sizeof out);
    const int64_t P = d.g.HO * d.g.WO;
    for (int j = 0; j < R; ++j) {
      const int64_t oy = (j0 + j) / d.WV, ox = (j0 + j) - oy * d.WV;
      if (ox >= d.g.WO) continue;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t o = r * P + oy * d.g.WO + ox;
        float v = out[j][r] + (bias ? bias[r] : 0.f) + (res ? res[o] : 0.f);
        y[o] = relu && v < 0.f ? 0.f : v;
      }
    }
  }
}

// Output channel block (a, co0) over virtual columns [c0, c1), as gemm_block.
template <class I>
INFER_INLINE void implicit_block_body(const ImplicitDims& d, const float* a, const float* ph, const int64_t* off,
                                      int64_t c0, int64_t c1, int64_t co0, const float* bias, const float* res,
                                      float* y, const Activation& act, const float* slope) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes, NV = I::kNV, MR = I::kMR;
  const int64_t rows = std::min<int64_t>(MR, d.CO - co0), P = d.g.HO * d.g.WO, K = d.K;
  const float* b = bias ? bias + co0 : nullptr;
  const float* r = res ? res + co0 * P : nullptr;
  float* yb = y + co0 * P;
  const int64_t full_end = std::min(c1, d.full);
  const bool relu = act.kind == ActivationKind::Relu;
  int64_t c = c0;
  for (; c + NV * L <= full_end; c += NV * L) {
    V acc[MR][NV];
    mk::accumulate_rows<I, NV>(a, mk::OffsetRows{ph + c, off}, K, acc);
    store_virtual<I, NV>(acc, d, rows, c, b, r, yb, relu);
  }
  if constexpr (NV > 2) {
    if (full_end - c == 2 * L) {
      V acc[MR][2];
      mk::accumulate_rows<I, 2>(a, mk::OffsetRows{ph + c, off}, K, acc);
      store_virtual<I, 2>(acc, d, rows, c, b, r, yb, relu);
      c += 2 * L;
    }
  }
  if (full_end - c == L) {
    V acc[MR][1];
    mk::accumulate_rows<I, 1>(a, mk::OffsetRows{ph + c, off}, K, acc);
    store_virtual<I, 1>(acc, d, rows, c, b, r, yb, relu);
  }
  if (c1 == d.T && d.full < d.T) {  // the last 1 to L-1 virtual columns
    switch (d.T - d.full) {
#define INFER_COLS_CASE(R) \
  case R: implicit_cols<I, R>(d, a, ph, off, d.full, rows, b, r, yb, relu); break;
      INFER_COLS_CASE(1) INFER_COLS_CASE(2) INFER_COLS_CASE(3) INFER_COLS_CASE(4) INFER_COLS_CASE(5)
      INFER_COLS_CASE(6) INFER_COLS_CASE(7) INFER_COLS_CASE(8) INFER_COLS_CASE(9) INFER_COLS_CASE(10)
      INFER_COLS_CASE(11) INFER_COLS_CASE(12) INFER_COLS_CASE(13) INFER_COLS_CASE(14) INFER_COLS_CASE(15)
#undef INFER_COLS_CASE
    }
  }
  if (act.kind == ActivationKind::None || relu) return;
  // other activations over the block's real pixels, one output-row segment at a time
  for (int64_t oy = c0 / d.WV; oy * d.WV < c1; ++oy) {
    const int64_t x0 = std::max<int64_t>(0, c0 - oy * d.WV), x1 = std::min(d.g.WO, c1 - oy * d.WV);
    if (x0 < x1) act_block<I>(yb + oy * d.g.WO + x0, rows, x1 - x0, P, act, slope ? slope + co0 : nullptr);
  }
}
INFER_PER_ISA(void, implicit_block, implicit_block_body,
              (const ImplicitDims& d, const float* a, const float* ph, const int64_t* off, int64_t c0, int64_t c1,
               int64_t co0, const float* bias, const float* res, float* y, const Activation& act,
               const float* slope),
              (d, a, ph, off, c0, c1, co0, bias, res, y, act, slope))

void implicit_run(const KernelCall& call) {
  const ImplicitDims d = implicit_dims(call.node);
  const auto io = unpack_conv_call<ImplicitPrepared>(call, "packed_implicit", true);
  const float *x = io.x, *bias = io.bias, *residual = io.residual;
  float *y = io.y, *ph = io.workspace;
  const Activation act = io.act;
  const float* a = io.prep->a.data();
  const int64_t* off = io.prep->off.data();
  const ConvProblem& g = d.g;
  const int64_t xs = g.C * g.H * g.W, P = g.HO * g.WO, ys = d.CO * P;
  const int64_t phase_rows = g.C * d.PH * d.PW * d.HV;
  const bool parallel = d.CO * d.K * P >= kParallelMin;
  const auto implicit_block = implicit_block_for(call.node.isa);
  const int64_t mr = d.s.mr;
  std::fill(ph + phase_rows * d.WV, ph + phase_rows * d.WV + d.slack, 0.f);

  for (int64_t n = 0; n < d.N; ++n) {
    const float* xn = x + n * xs;
    const float* rn = residual ? residual + n * ys : nullptr;
    float* yn = y + n * ys;
    // one region, two loops: the phase copy, then (after its barrier) the GEMM as packed_run's
    MasterLast last;
#pragma omp parallel if (parallel)
    {
#pragma omp for schedule(static)
      for (int64_t row = 0; row < phase_rows; ++row) phase_row(d, xn, ph, row);
#pragma omp for collapse(2) schedule(guided) nowait
      for (int64_t jb = 0; jb < d.NCB; ++jb)
        for (int64_t cb = 0; cb < d.COB; ++cb) {
          const int64_t c0 = jb * d.nc, c1 = jb + 1 == d.NCB ? d.T : std::min(d.T, c0 + d.nc);
          implicit_block(d, a + cb * d.K * mr, ph, off, c0, c1, cb * mr, bias, rn, yn, act, io.slope);
        }
      last.arrive();
    }
  }
}

// The default choice (packed_gemm has 12, Winograd 15 where chosen): above packed_gemm where the
// column matrix is several times the input (a kernel wider than 1x1) and few virtual columns are
// dropped. infer-bench op conv2d, 2 threads, 2026-11-25 07:47 UTC, this 2-core Zen 4 VM, load 1.1,
// two rounds, packed_gemm -> packed_implicit ms (dropped share in brackets):
//   ResNet's conv1 3->64 7x7 s2 to 112x112 (3/115)   1.71-1.73 -> 1.44
//   3->64 3x3 s1 at 224x224 (2/226)                  2.39-2.75 -> 2.22-2.30
//   32->64 5x5 s2 to 56x56 (2/58)                    2.20-2.30 -> 1.75-1.76
//   16->32 5x5 s1 at 56x56 (4/60)                    0.53-0.55 -> 0.50-0.52
//   64->64 3x3 s2 to 56x56 (1/57)                    1.67-1.75 -> 1.54-1.67
//   128->128 3x3 s2 to 28x28 (1/29)                  1.36-1.46 -> 1.42-1.44 (ResNet-50 layer2: stays)
//   256->256 to 14x14 (1/15), 512->512 to 7x7 (1/8)  1.41 / 1.37 -> 1.39 / 1.55 (07:44, load 0.8)
// So: dropped columns at most 1/32 of them, or 1/12 where im2col would write 6 or more times the
// input (KH*KW >= 6*sh*sw); from 2^20 multiply-adds up, as packed_gemm.
int implicit_priority(const NodeDesc& node) {
  if (!packed_applicable(node)) return 7;
  const ImplicitDims d = implicit_dims(node);
  const ConvProblem& g = d.g;
  const int64_t dropped = d.WV - g.WO, taps = g.KH * g.KW, phases = g.stride_h * g.stride_w;
  const bool few_dropped = dropped * 32 <= d.WV || (taps >= 6 * phases && dropped * 12 <= d.WV);
  return taps > 1 && few_dropped && d.N * d.CO * d.K * g.HO * g.WO >= kMinMacs ? 13 : 7;
}

size_t implicit_workspace(const NodeDesc& node) { return implicit_dims(node).ws_floats() * sizeof(float); }

}  // namespace

INFER_REGISTER_KERNELS(conv2d_packed) {
  registry.add("cpu", {
      {.op = "conv2d", .name = "packed_gemm", .priority = 12, .priority_for = packed_priority,
       .isa = KernelVariant::Isa::PerIsa, .fuses_prelu = true,
       .applicable = packed_applicable,
       .workspace_bytes = packed_workspace,
       .prepare = prepare_weights,
       .run = packed_run},
      {.op = "conv2d", .name = "packed_implicit", .priority = 7, .priority_for = implicit_priority,
       .isa = KernelVariant::Isa::PerIsa, .fuses_prelu = true,
       .applicable = packed_applicable,
       .workspace_bytes = implicit_workspace,
       .prepare = implicit_prepare,
       .run = implicit_run},
  });
}

}  // namespace infer::cpu
