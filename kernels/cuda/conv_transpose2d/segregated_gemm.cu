// CUDA conv_transpose2d `segregated_gemm`, stride 2: the unified kernel-segregation method (Tida et
// al.) as four per-phase implicit GEMMs in ONE launch (what CUTLASS calls "strided dgrad"). NCHW, float
// or half storage with float accumulation: tensor cores (wmma, cp.async pipeline) in fp16 / tf32, a SIMT
// tile in strict fp32; each thread owns one output column of the tile, stored strided straight into y
// through the GEMMs' epilogue (gemm_epilogue.cuh). Layers with <= 64 columns per phase take
// segregated_gemm_skinny.cu instead.
#include <algorithm>
#include <climits>
#include <vector>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_transpose2d/segregated_gemm.cuh"
#include "kernels/cuda/gemm_mainloop.cuh"

namespace infer::cuda::tconv {

// ================================================================================================
// segregated_gemm: the four stride-2 phases as implicit GEMMs in one launch ("strided dgrad")
// ================================================================================================
// Phase ph = rh*2 + rw is the GEMM C[co][j] = sum_k A_ph[co][k] B_ph[k][j] with
//   M = C_out, N = batch * count_h * count_w (j -> sample n, phase row m, phase column mm),
//   K = C_in * taps_h * taps_w, k = (ty * taps_w + tx) * C_in + ci (tap-major, so consecutive k of
//   one tap are consecutive channels and the gather's bounds test is per tap),
//   B_ph[k][j] = x[n][ci][q0h + m - (taps_h-1) + ty][q0w + mm - (taps_w-1) + tx] (0 outside),
// and C[co][j] lands at y[n][co][first_h + 2m][first_w + 2mm]. prepare() stores A_ph as
// [C_out padded to kBM][K padded to BK] (zeros), so weight tiles load unguarded as 16-byte vectors.
// Grid: x = column tiles (of the largest phase), y = C_out tiles, z = phase * splits + split. B is gathered
// from x into shared memory on the fly (no im2col buffer). Two shared-memory stages: while tile kt
// is multiplied, tile kt+1's weights are copied by cp.async (16-byte, no registers) and its B
// elements are loaded into registers; one barrier per k-tile (gemm_mainloop.cuh). The result tile
// goes through shared memory so that every thread stores a fixed output column: the epilogue
// (gemm_epilogue.cuh) and the strided NCHW store are fused, no rearrangement pass.
// Layers with <= 64 columns per phase (4x4 / 8x8 inputs) take the skinny kernel (segregated_gemm_skinny.cu).
// Split-K in a thread-block cluster (sm_90): when the tiled grid is still too small to occupy the
// GPU (few C_out tiles, a few column tiles, long K), the `splits` blocks of one output tile
// form a cluster along z, each multiplies a slice of K, and they add their accumulator tiles through
// distributed shared memory, each block reducing and storing a slice of the rows. Still one launch,
// no workspace, no partials in global memory; the sum order is fixed (deterministic).

namespace {

// The node's phases (a pure function of the node; prepare and run agree). run() sets the split.
SegArgs seg_args(const TconvDims& d, Precision p) {
  SegArgs a{};
  const int bk = gemm_bk(p);
  a.CI = d.CI;
  a.H = d.H;
  a.W = d.W;
  a.CO = d.CO;
  a.HO = d.HO;
  a.WO = d.WO;
  const int64_t co_pad = (d.CO + kBM - 1) / kBM * kBM;
  int64_t offset = 0;
  for (int rh = 0; rh < 2; ++rh)
    for (int rw = 0; rw < 2; ++rw) {
      SegPhase& s = a.ph[rh * 2 + rw];
      const PhaseAxis ah = phase_axis(rh, 2, d.pt, d.HO), aw = phase_axis(rw, 2, d.pl, d.WO);
      s.nj = static_cast<int>(phase_taps(rh, 2, d.KH));
      s.ni = static_cast<int>(phase_taps(rw, 2, d.KW));
      const int64_t k = d.CI * s.nj * s.ni;
      s.k = static_cast<int>(k);
      s.k_pad = static_cast<int>((k + bk - 1) / bk * bk);
      s.a_offset = offset;
      offset += co_pad * s.k_pad;
      s.first_h = ah.first;
      s.first_w = aw.first;
      s.count_h = ah.count;
      s.count_w = aw.count;
      s.q0h = ah.q0;
      s.q0w = aw.q0;
      s.ncols = d.N * ah.count * aw.count;
      a.ncols_max = std::max(a.ncols_max, s.ncols);
    }
  a.splits = 1;
  return a;
}

// Split K only when the plain grid is under 2 blocks per SM: then up to ~4 blocks per SM, each
// split >= 4 k-tiles, at most a portable cluster. Needs clusters (sm_90+).
int seg_splits(const SegArgs& a, const Context& ctx, Precision p) {
  if (ctx.cc_major < 9) return 1;
  const int64_t target = 4 * int64_t(std::max(ctx.sm_count, 1));
  const int64_t blocks = 4 * ((a.ncols_max + kBN - 1) / kBN) * ((a.CO + kBM - 1) / kBM);
  int64_t ktiles_max = 0;
  for (const SegPhase& s : a.ph) ktiles_max = std::max<int64_t>(ktiles_max, s.k_pad / gemm_bk(p));
  if (blocks == 0 || 2 * blocks > target || ktiles_max < 8) return 1;
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>({(target + blocks - 1) / blocks, ktiles_max / 4, kMaxSplits})));
}

}  // namespace

bool segregated_gemm_applicable(const NodeDesc& node) {
  if (!plain(node) || !has_constant_weight(node) || strides(node) != std::make_pair(2, 2)) return false;
  const TconvDims d = tconv_dims(node);
  const int64_t taps = ((d.KH + 1) / 2) * ((d.KW + 1) / 2);
  const int64_t co_tiles = (d.CO + kBM - 1) / kBM;
  const int64_t col_tiles = (d.N * ((d.HO + 1) / 2) * ((d.WO + 1) / 2) + kBN - 1) / kBN;
  return d.CI * taps + 64 <= INT_MAX && co_tiles <= 65535 && col_tiles <= INT_MAX;
}

std::shared_ptr<void> prepare_segregated_gemm(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  require_segregated(d, "segregated_gemm");
  const float* w = host_weight(node, "segregated_gemm");
  const SegArgs a = seg_args(d, node.precision);
  const int64_t co_pad = (d.CO + kBM - 1) / kBM * kBM;
  size_t total = 0;
  for (const SegPhase& s : a.ph) total += static_cast<size_t>(co_pad * s.k_pad);
  std::vector<float> buf(total, 0.f);
  for (int ph = 0; ph < 4; ++ph) {
    const SegPhase& s = a.ph[ph];
    const int rh = ph / 2, rw = ph % 2;
    for (int64_t co = 0; co < d.CO; ++co)
      for (int ty = 0; ty < s.nj; ++ty)
        for (int tx = 0; tx < s.ni; ++tx) {
          // flipped sub-kernel: tap ty of phase rh is ky = rh + 2 * (nj - 1 - ty)
          const int64_t ky = rh + 2 * (s.nj - 1 - ty), kx = rw + 2 * (s.ni - 1 - tx);
          float* dst = buf.data() + s.a_offset + co * s.k_pad + (int64_t(ty) * s.ni + tx) * d.CI;
          for (int64_t ci = 0; ci < d.CI; ++ci) dst[ci] = w[((ci * d.CO + co) * d.KH + ky) * d.KW + kx];
        }
  }
  auto out = std::make_shared<SegPrepared>();
  out->made_for = prepared_for(d, node.precision);
  out->bk = gemm_bk(node.precision);
  for (int ph = 0; ph < 4; ++ph) {
    out->a_offset[ph] = a.ph[ph].a_offset;
    out->k_pad[ph] = a.ph[ph].k_pad;
  }
  out->w = upload(buf.data(), buf.size(), node.precision);
  return out;
}

namespace {

// BN: the column tile, 64, or 128 for fp16 layers with many columns (kWideBN): a 64 x 128 tile
// with twice the threads (8 warps, each still 32 x 32), so each weight tile feeds twice the columns.
constexpr int kWideBN = 128;
constexpr int64_t kWideMinCols = 8192;  // columns per phase from which fp16 uses the wide tile

template <GemmMode kMode, int BN>
constexpr int seg_threads() { return GemmCfg<kMode>::kThreads * BN / 64; }

template <GemmMode kMode, int BN>
struct SegSmem {
  using Cfg = GemmCfg<kMode>;
  using T = typename Cfg::T;
  static constexpr int kLdA = Cfg::kBK + Cfg::kPadA;  // row pitches keep 16-byte (wmma: 32-byte) alignment
  static constexpr int kLdB = BN + Cfg::kPadB;
  static constexpr int kLdC = BN + 4;
  static constexpr int kABytes = kBM * kLdA * int(sizeof(T));
  static constexpr int kBBytes = Cfg::kBK * kLdB * int(sizeof(T));
  static constexpr int kCBytes = kBM * kLdC * int(sizeof(float));
  static constexpr int kStageBytes = kABytes + kBBytes;  // two stages: the k-tile ring
  static constexpr int kBytes = 2 * kStageBytes > kCBytes ? 2 * kStageBytes : kCBytes;
};

template <GemmMode kMode, int BN>
__global__ void __launch_bounds__(seg_threads<kMode, BN>())
    segregated_gemm_kernel(const typename GemmCfg<kMode>::T* __restrict__ x,
                           const typename GemmCfg<kMode>::T* __restrict__ wp,
                           typename GemmCfg<kMode>::T* __restrict__ y, SegArgs a,
                           GemmEpilogue<typename GemmCfg<kMode>::T> ep) {
  using Cfg = GemmCfg<kMode>;
  using T = typename Cfg::T;
  using S = SegSmem<kMode, BN>;
  constexpr int BK = Cfg::kBK, NT = seg_threads<kMode, BN>();
  static_assert(BN == 64 || (BN == kWideBN && kMode != GemmMode::Simt), "the SIMT tile is 64 x 64");
  constexpr int kVec = 16 / int(sizeof(T));               // elements per 16-byte vector
  constexpr int kAVecs = kBM * BK / kVec / NT;            // A vectors per thread per k-tile
  constexpr int kBRowStep = NT / BN;                      // B rows covered by one pass of the block
  constexpr int kBPer = BK / kBRowStep;                   // B elements per thread per k-tile
  static_assert(kAVecs >= 1 && kBM * BK == kAVecs * kVec * NT, "A tile / thread mismatch");
  static_assert(NT % BN == 0 && BK % kBRowStep == 0, "B tile / thread mismatch");

  __shared__ __align__(128) unsigned char smem[S::kBytes];
  // Stage st: A tile [kBM][kLdA] at st * kStageBytes, B tile [BK][kLdB] after it.
  auto As_of = [&](int st) { return reinterpret_cast<T*>(smem + st * S::kStageBytes); };
  auto Bs_of = [&](int st) { return reinterpret_cast<T*>(smem + st * S::kStageBytes + S::kABytes); };
  float* Cs = reinterpret_cast<float*>(smem);              // [kBM][kLdC], after the main loop

  const int phase = blockIdx.z / a.splits, split = blockIdx.z % a.splits;  // split = cluster rank
  const SegPhase P = a.ph[phase];
  const int64_t col0 = int64_t(blockIdx.x) * BN;
  if (col0 >= P.ncols) return;  // fewer columns than the largest phase: uniform over the cluster
  const int m0 = blockIdx.y * kBM;
  const int tid = threadIdx.x;

  const int ktiles = P.k_pad / BK;
  const int per_split = (ktiles + a.splits - 1) / a.splits;
  const int kt_begin = min(ktiles, split * per_split), kt_end = min(ktiles, kt_begin + per_split);

  // This thread's B column (fixed for the whole block): sample n, phase row m, phase column mm.
  const int b_col = tid % BN, b_row0 = tid / BN;
  const int64_t jcol = col0 + b_col;
  const bool col_ok = jcol < P.ncols;
  const PhaseColumn<T> col = phase_column(x, a, P, jcol, col_ok);
  const T* ap = wp + P.a_offset + int64_t(m0) * P.k_pad;

  T b_reg[kBPer];
  // The k-tile iterator (gemm_mainloop.cuh, two stages): A, the prepared weights (never out of bounds),
  // as cp.async 16-byte copies; B, the implicit im2col gather with bounds, into registers one tile
  // ahead, stored into its stage when the loop reaches it.
  auto tiles = tile_iterator(
      [&](int kt, int st) {
        T* As = As_of(st);
#pragma unroll
        for (int i = 0; i < kAVecs; ++i) {
          const int v = tid + i * NT, row = v / (BK / kVec), cv = v % (BK / kVec);
          cp_async16(As + row * S::kLdA + cv * kVec, ap + int64_t(row) * P.k_pad + kt * BK + cv * kVec);
        }
      },
      [&](int kt) { gather_b<T, kBPer, kBRowStep>(b_reg, col, P, a, col_ok, kt * BK + b_row0); },
      [&](int, int st) {
        T* Bs = Bs_of(st);
#pragma unroll
        for (int i = 0; i < kBPer; ++i) Bs[(b_row0 + i * kBRowStep) * S::kLdB + b_col] = b_reg[i];
      });

  if constexpr (kMode == GemmMode::Simt) {
    // 16 x 16 threads, each a 4 x 4 register tile (gemm_tiles.cuh).
    const int tx = tid % 16, ty = tid / 16;
    ThreadTile4x4 tile;
    gemm_mainloop<2>(tiles, kt_begin, kt_end,
                     [&](int, int st) { tile.mma<BK, S::kLdA, S::kLdB>(As_of(st), Bs_of(st), tx, ty); });
    __syncthreads();
    tile.store<S::kLdC>(Cs, tx, ty);
  } else {
    // Warps in a 2 x (BN/32) grid, each a 32 x 32 block of 2 x 2 wmma 16x16 accumulators (gemm_tiles.cuh).
    const int warp = tid / 32, wm = (warp / (BN / 32)) * 32, wn = (warp % (BN / 32)) * 32;
    WarpTile32<kMode> tile;
    tile.zero();
    gemm_mainloop<2>(tiles, kt_begin, kt_end,
                     [&](int, int st) { tile.template mma<BK, S::kLdA, S::kLdB>(As_of(st), Bs_of(st), wm, wn); });
    __syncthreads();
    tile.template store<S::kLdC>(Cs, wm, wn);
  }
  __syncthreads();

  // Epilogue: thread -> fixed column b_col, rows b_row0 + kBRowStep*i. Column j = (n, m, mm) is
  // output pixel (first_h + 2m, first_w + 2mm) of sample n. With a split, block `split` of the cluster
  // reduces rows [rows.begin, rows.end) over every block's Cs (distributed shared memory).
  const ClusterRows rows = cluster_split_rows(kBM, a.splits, split);
  if (col_ok) {
    const int64_t plane = a.HO * a.WO;
    const int64_t y0 = col.n * a.CO * plane + (P.first_h + 2 * col.m) * a.WO + P.first_w + 2 * col.mm;
    for (int r = rows.begin + b_row0; r < rows.end; r += kBRowStep) {
      const int64_t co = m0 + r;
      if (co >= a.CO) break;
      ep.store(y, y0 + co * plane, ep.channel(co), cluster_split_sum(Cs, r * S::kLdC + b_col, a.splits));
    }
  }
  cluster_split_end(a.splits);
}

template <GemmMode kMode, int BN = kBN>
void launch_segregated_gemm(Context& ctx, const TconvCall& c, const SegPrepared& prep, const SegArgs& a) {
  using T = typename GemmCfg<kMode>::T;
  const dim3 grid(static_cast<unsigned>((a.ncols_max + BN - 1) / BN),
                  static_cast<unsigned>((a.CO + kBM - 1) / kBM), static_cast<unsigned>(4 * a.splits));
  launch_cluster_z(segregated_gemm_kernel<kMode, BN>, grid, dim3(seg_threads<kMode, BN>()), a.splits,
                   ctx.stream, static_cast<const T*>(c.x), static_cast<const T*>(prep.w->data()),
                   static_cast<T*>(c.y), a, gemm_epilogue<T>(c.bias, c.d.act, nullptr, c.slope));
}

}  // namespace

void run_segregated_gemm(const KernelCall& call) {
  const TconvCall c = segregated_call(call, "segregated_gemm");
  const TconvDims& d = c.d;
  const Precision p = call.node.precision;
  const auto* prep = static_cast<const SegPrepared*>(call.prepared);
  SegArgs a = seg_args(d, p);
  bool ok = prep && prep->made_for == prepared_for(d, p) && prep->bk == gemm_bk(p);
  for (int ph = 0; ok && ph < 4; ++ph)
    ok = prep->a_offset[ph] == a.ph[ph].a_offset && prep->k_pad[ph] == a.ph[ph].k_pad;
  if (!ok) throw Error("cuda conv_transpose2d.segregated_gemm: not prepared for this node");
  if (a.ncols_max == 0 || d.CO == 0) return;
  Context& ctx = context_of(call);
  if (const int nc = skinny_cols(a)) {  // small-spatial layer: stream the weights
    if (p == Precision::FP16) launch_skinny<__half>(ctx, c, *prep, a, nc);
    else launch_skinny<float>(ctx, c, *prep, a, nc);
    return;
  }
  a.splits = seg_splits(a, ctx, p);
  switch (gemm_mode(p)) {
    case GemmMode::Half:
      if (a.splits == 1 && a.ncols_max >= kWideMinCols)  // many columns: the 64 x 128 tile
        launch_segregated_gemm<GemmMode::Half, kWideBN>(ctx, c, *prep, a);
      else
        launch_segregated_gemm<GemmMode::Half>(ctx, c, *prep, a);
      break;
    case GemmMode::Tf32: launch_segregated_gemm<GemmMode::Tf32>(ctx, c, *prep, a); break;
    case GemmMode::Simt: launch_segregated_gemm<GemmMode::Simt>(ctx, c, *prep, a); break;
  }
}

}  // namespace infer::cuda::tconv
