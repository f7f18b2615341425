// CUDA conv_transpose2d `segregated_gemm`, its skinny-N path (stride 2, <= 64 columns per phase: 4x4
// and 8x8 inputs at small batch): the same four per-phase implicit GEMMs as segregated_gemm.cu, bound
// by streaming the weights, so a lane owns one output channel and streams its weight row into
// registers, the gathered B chunk is broadcast from shared memory, and K is split over a thread-block
// cluster (sm_90) whose blocks add their tiles through distributed shared memory. NCHW, float sums.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_transpose2d/segregated_gemm.cuh"
#include "kernels/cuda/gemm_mainloop.cuh"

namespace infer::cuda::tconv {
namespace {

// ---- skinny-N path: weight streaming for small-spatial layers ------------------------------------
// When every phase has <= 64 columns (batch * phase pixels: 4x4 and 8x8 inputs at small batch), the
// GEMM is a few columns against C_out x K weights (EB-GAN layer 1: 134 MB fp32), so it is bound by
// streaming the weights, and the 64x64 tile of segregated_gemm.cu wastes most of its columns. This
// kernel instead:
//   block = 256 threads = 8 warps, a tile of 32 output channels x NC columns (NC = 16/32/64 >= the
//   phase's columns) x one K slice; lane l owns channel m0 + l, warp w owns k [w*KPW, (w+1)*KPW) of
//   each K chunk (KC = 8*KPW). The weights never touch shared memory: each lane loads its row's
//   16..64 contiguous bytes per chunk with 16-byte vector loads straight into registers (the next
//   chunk's loads are issued before the current chunk is multiplied: register double buffering).
//   The chunk of B (KC x NC, gathered from x as in the tiled kernel, zeros outside) is staged in
//   shared memory as float; all lanes of a warp read the same B row, so every B read is a broadcast
//   float4 and each weight element feeds NC FMAs from registers (float accumulation; TF32 nodes
//   are computed in full fp32 here, which is more accurate than TF32).
//   The 8 warps' partial sums are added in shared memory (fixed tree order), then the `splits`
//   blocks of one tile (a cluster along z, as in segregated_gemm.cu) add theirs through distributed
//   shared memory, each rank storing a slice of the 32 channels with bias + activation, strided into y.
// One launch, no workspace, deterministic. Prepared weights are the same layout as the tiled
// kernel's (rows padded to 64, K to the k-tile): a lane's KPW-slice is entirely inside k_pad or
// entirely past it (KPW divides the k-tile), so loads need no per-element guard.

constexpr int kSkinnyThreads = 256, kSkinnyRows = 32, kSkinnyMaxCols = 64;

template <class T, int NC>
struct SkinnyCfg {
  // 64 bytes of weights per lane per chunk; less at NC = 64 (registers: 64 accumulators, and those
  // layers do 64 FMAs per weight element, so they are not bandwidth bound).
  static constexpr int kKpw = (NC < 64 ? 64 : sizeof(T) == 4 ? 32 : 16) / int(sizeof(T));
  static constexpr int kKc = 8 * kKpw;                                 // k per chunk (8 warps)
  static constexpr int kVecs = kKpw * int(sizeof(T)) / 16;             // uint4 loads per lane per chunk
  static constexpr int kWords = kVecs * 4;
  static constexpr int kBStep = kSkinnyThreads / NC;                   // B rows per pass of the block
  static constexpr int kBPer = kKc / kBStep;                           // B elements per thread per chunk
  static constexpr int kBufFloats = kKc * NC > 4 * 32 * NC ? kKc * NC : 4 * 32 * NC;
  static_assert(kSkinnyThreads % NC == 0 && kKc % kBStep == 0, "B chunk / thread mismatch");
  static_assert((sizeof(T) == 4 ? 16 : 32) % kKpw == 0, "KPW must divide the k-tile (16 fp32, 32 tf32/fp16)");
};

// load_weights16 (the streaming 16-byte load): kernels/cuda/gemm_tiles.cuh.

// Element i of the lane's weight slice, held as 32-bit words.
template <class T> __device__ __forceinline__ float slice_elem(const uint32_t* w, int i);
template <> __device__ __forceinline__ float slice_elem<float>(const uint32_t* w, int i) {
  return __uint_as_float(w[i]);
}
template <> __device__ __forceinline__ float slice_elem<__half>(const uint32_t* w, int i) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(w[i / 2] >> (16 * (i % 2)))));
}

template <class T, int NC>
__global__ void __launch_bounds__(kSkinnyThreads, 2)
    segregated_skinny_kernel(const T* __restrict__ x, const T* __restrict__ wp, T* __restrict__ y, SegArgs a,
                             GemmEpilogue<T> ep) {
  using Cfg = SkinnyCfg<T, NC>;
  constexpr int KPW = Cfg::kKpw, KC = Cfg::kKc, NV = Cfg::kVecs, NW = Cfg::kWords;
  constexpr int BSTEP = Cfg::kBStep, BPER = Cfg::kBPer, R = kSkinnyRows;
  __shared__ __align__(16) float buf[Cfg::kBufFloats];  // B chunk [KC][NC]; then the warp reduction
  __shared__ __align__(16) float Cs[NC * R];            // block result, column-major [NC][32]

  const int phase = blockIdx.z / a.splits, split = blockIdx.z % a.splits;  // split = cluster rank
  const SegPhase P = a.ph[phase];
  const int m0 = blockIdx.x * R;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  const int chunks = (P.k_pad + KC - 1) / KC;
  const int per_split = (chunks + a.splits - 1) / a.splits;
  const int c_begin = min(chunks, split * per_split), c_end = min(chunks, c_begin + per_split);

  // A: row m0 + lane (rows are padded to 64, so always inside the prepared array).
  const T* arow = wp + P.a_offset + int64_t(m0 + lane) * P.k_pad + warp * KPW;
  // B: thread -> column b_col, chunk rows b_row0 + BSTEP*i.
  const int b_col = tid % NC, b_row0 = tid / NC;
  const bool col_ok = b_col < P.ncols;
  const PhaseColumn<T> col = phase_column(x, a, P, b_col, col_ok);

  uint32_t a_w[NW], a_cur[NW];
  T b_reg[BPER];
  // The chunk iterator (gemm_mainloop.cuh, one stage, nothing by cp.async): fetch streams the lane's
  // weight slice and gathers the B chunk into registers one chunk ahead; store puts B into shared
  // memory (as float) and hands the weights to the multiply.
  const auto fetch = [&](int ch) {
    if (ch * KC + warp * KPW < P.k_pad) {
      const uint4* src = reinterpret_cast<const uint4*>(arow + int64_t(ch) * KC);
#pragma unroll
      for (int v = 0; v < NV; ++v) {
        const uint4 q = load_weights16(src + v);
        a_w[4 * v] = q.x;
        a_w[4 * v + 1] = q.y;
        a_w[4 * v + 2] = q.z;
        a_w[4 * v + 3] = q.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < NW; ++i) a_w[i] = 0u;
    }
    gather_b<T, BPER, BSTEP>(b_reg, col, P, a, col_ok, ch * KC + b_row0);
  };
  const auto store = [&](int, int) {
#pragma unroll
    for (int i = 0; i < BPER; ++i) buf[(b_row0 + i * BSTEP) * NC + b_col] = to_float(b_reg[i]);
#pragma unroll
    for (int i = 0; i < NW; ++i) a_cur[i] = a_w[i];
  };
  auto chunks_it = tile_iterator(NoOp{}, fetch, store);

  float acc[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) acc[c] = 0.f;
  gemm_mainloop<1>(chunks_it, c_begin, c_end, [&](int, int) {
    const float* bw = buf + warp * KPW * NC;
#pragma unroll
    for (int kk = 0; kk < KPW; ++kk) {
      const float av = slice_elem<T>(a_cur, kk);
      const float4* brow = reinterpret_cast<const float4*>(bw + kk * NC);
#pragma unroll
      for (int c4 = 0; c4 < NC / 4; ++c4) {
        const float4 b = brow[c4];  // same address across the warp: a broadcast
        acc[4 * c4] = fmaf(av, b.x, acc[4 * c4]);
        acc[4 * c4 + 1] = fmaf(av, b.y, acc[4 * c4 + 1]);
        acc[4 * c4 + 2] = fmaf(av, b.z, acc[4 * c4 + 2]);
        acc[4 * c4 + 3] = fmaf(av, b.w, acc[4 * c4 + 3]);
      }
    }
  });

  // The 8 warps' partial sums, added in a fixed tree order (deterministic): buf as [warp][NC][32].
  __syncthreads();
#pragma unroll
  for (int half = 4; half >= 1; half /= 2) {
    if (warp >= half && warp < 2 * half) {
#pragma unroll
      for (int c = 0; c < NC; ++c) buf[((warp - half) * NC + c) * R + lane] = acc[c];
    }
    __syncthreads();
    if (warp < half) {
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[c] += buf[(warp * NC + c) * R + lane];
    }
    __syncthreads();
  }
  if (warp == 0) {
#pragma unroll
    for (int c = 0; c < NC; ++c) Cs[c * R + lane] = acc[c];
  }
  __syncthreads();

  const ClusterRows slice = cluster_split_rows(R, a.splits, split);  // gemm_tiles.cuh
  const int row_begin = slice.begin, rows = slice.end - slice.begin;
  const int64_t plane = a.HO * a.WO, hw = P.count_h * P.count_w;
  for (int e = tid; e < rows * NC; e += kSkinnyThreads) {
    const int r = row_begin + e % rows, c = e / rows;  // consecutive threads: consecutive channels
    const int64_t co = m0 + r;
    if (co >= a.CO || c >= P.ncols) continue;
    const int64_t cn = c / hw, crem = c - cn * hw, cm = crem / P.count_w, cmm = crem - cm * P.count_w;
    ep.store(y, (cn * a.CO + co) * plane + (P.first_h + 2 * cm) * a.WO + P.first_w + 2 * cmm, ep.channel(co),
             cluster_split_sum(Cs, c * R + r, a.splits));
  }
  cluster_split_end(a.splits);
}

}  // namespace

// Columns per phase that the skinny path takes (0: use the tiled kernel).
int skinny_cols(const SegArgs& a) {
  return a.ncols_max <= 16 ? 16 : a.ncols_max <= 32 ? 32 : a.ncols_max <= kSkinnyMaxCols ? 64 : 0;
}

namespace {

// K chunks per split: enough blocks for ~4 per SM (bytes in flight), each split >= 2 chunks, a
// power of two up to the portable cluster size. Needs clusters (sm_90+).
int skinny_splits(const SegArgs& a, const Context& ctx, int kc) {
  if (ctx.cc_major < 9) return 1;
  const int64_t blocks = 4 * ((a.CO + kBM - 1) / kBM) * (kBM / kSkinnyRows);
  const int64_t target = 4 * int64_t(std::max(ctx.sm_count, 1));
  int64_t chunks_max = 0;
  for (const SegPhase& s : a.ph) chunks_max = std::max<int64_t>(chunks_max, (s.k_pad + kc - 1) / kc);
  int splits = 1;
  while (splits < kMaxSplits && blocks * splits < target && chunks_max >= 4 * splits) splits *= 2;
  return splits;
}

template <class T, int NC>
void launch_skinny(Context& ctx, const TconvCall& c, const SegPrepared& prep, SegArgs a) {
  a.splits = skinny_splits(a, ctx, SkinnyCfg<T, NC>::kKc);
  const dim3 grid(static_cast<unsigned>((a.CO + kBM - 1) / kBM * (kBM / kSkinnyRows)), 1u,
                  static_cast<unsigned>(4 * a.splits));
  launch_cluster_z(segregated_skinny_kernel<T, NC>, grid, dim3(kSkinnyThreads), a.splits, ctx.stream,
                   static_cast<const T*>(c.x), static_cast<const T*>(prep.w->data()), static_cast<T*>(c.y), a,
                   gemm_epilogue<T>(c.bias, c.d.act, nullptr, c.slope));
}

}  // namespace

template <class T>
void launch_skinny(Context& ctx, const TconvCall& c, const SegPrepared& prep, const SegArgs& a, int nc) {
  if (nc == 16) launch_skinny<T, 16>(ctx, c, prep, a);
  else if (nc == 32) launch_skinny<T, 32>(ctx, c, prep, a);
  else launch_skinny<T, 64>(ctx, c, prep, a);
}

template void launch_skinny<float>(Context&, const TconvCall&, const SegPrepared&, const SegArgs&, int);
template void launch_skinny<__half>(Context&, const TconvCall&, const SegPrepared&, const SegArgs&, int);

}  // namespace infer::cuda::tconv
