// GEMM building blocks of the hand-written CUDA kernels (driven by gemm_mainloop.cuh, finished by
// gemm_epilogue.cuh): cp.async tile copies, a streaming 16-byte weight load, mma.sync m16n8k16 (and its
// int8 twin m16n8k32) with NHWC channel-vector A rows, the warp-level Mma policies (WarpMma16816, a warp's
// 32x32 wmma block, a thread's 4x4 SIMT block), split-K over a thread-block cluster (distributed shared
// memory). CUDA-C only; cp.async / mma.sync / L2 prefetch need sm_80, clusters sm_90.
#pragma once

#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/context.h"

namespace infer::cuda {

// ---- global -> shared memory --------------------------------------------------------------------

// cp.async (sm_80+): 16-byte global -> shared copies that bypass the registers; plain copies before.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#else
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}
// Waits until at most kPending of this thread's committed groups are still in flight (a pipeline
// keeps the next stage loading while it computes on this one).
template <int kPending>
__device__ __forceinline__ void cp_async_wait_pending() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// ---- global -> registers ------------------------------------------------------------------------

// A read-only 16-byte load of streamed weights; on sm_80+ it asks L2 to fetch the whole 128-byte
// line on a miss (a lane reads 16..64 bytes of one row per chunk, the neighbouring warp the rest).
__device__ __forceinline__ uint4 load_weights16(const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint4 v;
  asm volatile("ld.global.nc.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
#else
  return __ldg(reinterpret_cast<const uint4*>(p));
#endif
}

// A read-only 16-byte load of a stream read once (a matrix-vector product's weights): no L1
// allocation, and L2 asked to fetch 256 bytes around it, so fewer loads keep more bytes in flight.
// Not volatile: the compiler may issue a batch of them before their first use.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
#else
  return __ldg(reinterpret_cast<const uint4*>(p));
#endif
}

// ---- mma.sync m16n8k16 (fp16) with channel-vector A rows -------------------------------------------
// For the NHWC implicit GEMMs (conv2d.mma_small_cout_nhwc, conv_transpose2d.segregated_mma_nhwc): an
// A row is one pixel's input channels, contiguous in NHWC. Fragment ownership (PTX ISA, m16n8k16):
// lane = 4g + t; A rows g and g + 8, k = 2t, 2t + 1 and 2t + 8, 2t + 9; B the same k of column n = g;
// D rows g and g + 8, columns 2t, 2t + 1. The order of K inside a slice is free as long as A and B
// agree, so each group of 32 channels (two k16 slices) is read as one 16-byte vector per thread and
// row: thread t holds channels 8t .. 8t + 7; slice 0 takes 8t .. 8t + 3, slice 1 the next four.

// D (16x8 f32) += A (16x16 f16, row) * B (16x8 f16, col) (sm_80+; callers check the device).
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

// D = A * B + C with C's rows g and g + 8 both {c0, c1}: a per-column bias as the first step's addend,
// so a kernel needs no moves to start its sums at the bias.
__device__ __forceinline__ void mma_16816_bias(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                               float c0, float c1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%10,%11};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c0), "f"(c1));
#else
  __trap();
#endif
}

// D (16x8 s32) += A (16x32 u8, row) * B (32x8 s8, col). Fragments (PTX ISA, m16n8k32 with 8-bit
// operands): byte for byte those of m16n8k16 with 16-bit ones, so the channel-vector map above
// holds with 16 channels a 16-byte vector: thread t of a row holds channels 16t .. 16t + 15 of a step;
// slice 0 takes the first 8, slice 1 the next 8, and B is laid out the same way.
__device__ __forceinline__ void mma_16832(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

// The A registers of both slices of a 32-channel group from rows g (r0) and g + 8 (r1).
__device__ __forceinline__ void mma_a_slices(const uint4& r0, const uint4& r1, uint32_t (&a0)[4],
                                             uint32_t (&a1)[4]) {
  a0[0] = r0.x, a0[1] = r1.x, a0[2] = r0.y, a0[3] = r1.y;
  a1[0] = r0.z, a1[1] = r1.z, a1[2] = r0.w, a1[3] = r1.w;
}

// Stages the NHWC input window an output tile reads: rows x cols pixels from input (top, left) of one
// image [H][W][C], its channels [c0, c0 + 32) as four 16-byte pieces per pixel (dst [row][col][4]),
// zeros outside the image (the convolution's padding) and past C (C % 8 == 0). cp.async for the rest:
// the caller commits and waits. Every thread of the block takes part.
__device__ __forceinline__ void stage_nhwc_window32(uint4* dst, const __half* img, int H, int W, int C, int top,
                                                    int left, int rows, int cols, int c0) {
  const int pieces = rows * cols * 4;
  for (int i = threadIdx.x; i < pieces; i += blockDim.x) {
    const int part = i & 3, pix = i >> 2, r = pix / cols, cx = pix - r * cols;
    const int iy = top + r, ix = left + cx, c = c0 + part * 8;
    if (iy >= 0 && iy < H && ix >= 0 && ix < W && c < C)
      cp_async16(dst + i, img + (int64_t(iy) * W + ix) * C + c);
    else
      dst[i] = make_uint4(0, 0, 0, 0);
  }
}

// A warp's kM m16 tiles x kN n8 tiles of mma_16816 sums (float, D-fragment order per tile), fed one
// 32-channel group (two k16 slices) of one m16 tile at a time: the warp-level Mma policy of the NHWC
// implicit GEMMs. Per sum slice 0 is added before slice 1, as in a k-ordered loop.
template <int kM, int kN>
struct WarpMma16816 {
  float acc[kM][kN][4] = {};

  // Tile j's rows g (r0) and g + 8 (r1) as 16-byte channel vectors (mma_a_slices) times b[nt] = the
  // B words {slice 0: b0, b1, slice 1: b0, b1} of n8 tile nt.
  __device__ __forceinline__ void group(int j, const uint4& r0, const uint4& r1, const uint32_t (&b)[kN][4]) {
    uint32_t a0[4], a1[4];
    mma_a_slices(r0, r1, a0, a1);
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) {
      mma_16816(acc[j][nt], a0, b[nt][0], b[nt][1]);
      mma_16816(acc[j][nt], a1, b[nt][2], b[nt][3]);
    }
  }
};

// Host and device: the input channel that k (0..15) of slice s stands for (B is laid out with it).
__host__ __device__ inline int mma_k_channel(int s, int k) {
  const int t = (k % 8) / 2, word = k / 8, half = k % 2;
  return (s / 2) * 32 + 8 * t + 4 * (s % 2) + 2 * word + half;
}

// ---- the multiply ---------------------------------------------------------------------------------

// How a precision multiplies: fp16 on tensor cores (half operands), tf32 on tensor cores (float
// operands rounded to tf32), strict fp32 on the SIMT cores. Accumulation is float in all three.
enum class GemmMode { Half, Tf32, Simt };

inline GemmMode gemm_mode(Precision p) {
  return p == Precision::FP16 ? GemmMode::Half : p == Precision::TF32 ? GemmMode::Tf32 : GemmMode::Simt;
}

// One warp's 32 x 32 block of an output tile as 2 x 2 wmma 16x16 accumulators (float): fp16
// m16n16k16 or tf32 m16n16k8 (operands rounded with __float_to_tf32). The warp's block starts at row
// wm, column wn of the tile; A [rows][kLdA] and B [BK][kLdB] are row-major in shared memory, as T.
template <GemmMode kMode>
struct WarpTile32 {
  static_assert(kMode != GemmMode::Simt, "the SIMT tile is ThreadTile4x4");
  static constexpr int kFragK = kMode == GemmMode::Half ? 16 : 8;
  using T = std::conditional_t<kMode == GemmMode::Half, __half, float>;
  using AType = std::conditional_t<kMode == GemmMode::Half, __half, nvcuda::wmma::precision::tf32>;

  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, kFragK, float> acc[2][2];

  __device__ __forceinline__ void zero() {
    using namespace nvcuda;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  }

  // acc += A[wm, wm+32)[0, BK) * B[0, BK)[wn, wn+32).
  template <int BK, int kLdA, int kLdB>
  __device__ __forceinline__ void mma(const T* As, const T* Bs, int wm, int wn) {
    using namespace nvcuda;
#pragma unroll
    for (int kk = 0; kk < BK; kk += kFragK) {
      wmma::fragment<wmma::matrix_a, 16, 16, kFragK, AType, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, kFragK, AType, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        wmma::load_matrix_sync(fa[i], As + (wm + 16 * i) * kLdA + kk, kLdA);
        wmma::load_matrix_sync(fb[i], Bs + kk * kLdB + wn + 16 * i, kLdB);
        if constexpr (kMode == GemmMode::Tf32) {
#pragma unroll
          for (int e = 0; e < fa[i].num_elements; ++e) fa[i].x[e] = wmma::__float_to_tf32(fa[i].x[e]);
#pragma unroll
          for (int e = 0; e < fb[i].num_elements; ++e) fb[i].x[e] = wmma::__float_to_tf32(fb[i].x[e]);
        }
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
  }

  // The block into Cs [rows][kLdC] (float, row-major) at (wm, wn).
  template <int kLdC>
  __device__ __forceinline__ void store(float* Cs, int wm, int wn) const {
    using namespace nvcuda;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::store_matrix_sync(Cs + (wm + 16 * i) * kLdC + wn + 16 * j, acc[i][j], kLdC,
                                wmma::mem_row_major);
  }
};

// One thread's 4 x 4 register block of a 64 x 64 SIMT tile computed by 16 x 16 threads: rows
// ty + 16i, columns tx + 16j (conflict-free shared reads: a warp reads 2 A words and 16 consecutive B
// words per k). Strict fp32: one fmaf per product, in k order.
struct ThreadTile4x4 {
  float acc[4][4] = {};

  // acc += A[rows][0, BK) * B[0, BK)[columns], A [64][kLdA] and B [BK][kLdB] row-major in shared memory.
  template <int BK, int kLdA, int kLdB, class T>
  __device__ __forceinline__ void mma(const T* As, const T* Bs, int tx, int ty) {
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = As[(ty + 16 * i) * kLdA + k];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = Bs[k * kLdB + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
  }

  // The block into Cs [64][kLdC] (float, row-major).
  template <int kLdC>
  __device__ __forceinline__ void store(float* Cs, int tx, int ty) const {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) Cs[(ty + 16 * i) * kLdC + tx + 16 * j] = acc[i][j];
  }
};

// ---- split-K in a thread-block cluster (sm_90) -------------------------------------------------
// The `splits` blocks of one output tile form a cluster along z, each multiplies a slice of K into its
// own shared-memory tile Cs, and they add the tiles through distributed shared memory: still one
// launch, no workspace, no partials in global memory, a fixed sum order (deterministic). In a kernel:
//   const ClusterRows rows = cluster_split_rows(kRows, splits, rank);  // barrier: every Cs complete
//   for r in [rows.begin, rows.end): v = cluster_split_sum(Cs, index of (r, column), splits); store
//   cluster_split_end(splits);  // no block leaves while others read its Cs
// With splits == 1 (and before sm_90) they are the plain single-block epilogue.

struct ClusterRows {
  int begin, end;
};

// The rows [begin, end) of a `rows`-row tile that cluster rank `rank` reduces and stores.
__device__ __forceinline__ ClusterRows cluster_split_rows(int rows, int splits, int rank) {
  ClusterRows r{0, rows};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  if (splits > 1) {
    cg::this_cluster().sync();  // every block's Cs is complete
    const int per = (rows + splits - 1) / splits;
    r.begin = min(rows, rank * per);
    r.end = min(rows, r.begin + per);
  }
#endif
  return r;
}

// Element i of the tile: the sum of every rank's Cs[i] in rank order, or this block's Cs[i].
__device__ __forceinline__ float cluster_split_sum(float* Cs, int i, int splits) {
  float v = 0.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  if (splits > 1) {
    for (int q = 0; q < splits; ++q) v += cg::this_cluster().map_shared_rank(Cs, q)[i];
  } else
#endif
  {
    v = Cs[i];
  }
  return v;
}

__device__ __forceinline__ void cluster_split_end(int splits) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (splits > 1) cooperative_groups::this_cluster().sync();  // no block leaves while others read its Cs
#endif
}

// Launches kernel on `stream` with `grid` x `block` (no dynamic shared memory) as clusters of `splits`
// blocks along z, or as a plain launch when splits == 1; throws infer::Error if the launch fails.
template <class... Params, class... Args>
void launch_cluster_z(void (*kernel)(Params...), dim3 grid, dim3 block, int splits, cudaStream_t stream,
                      Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(splits);
  cfg.attrs = attr;
  cfg.numAttrs = splits > 1 ? 1 : 0;  // a plain launch without a split
  INFER_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace infer::cuda
