// CUDA conv2d variants for channels-last convolutions with few output channels (C_out <= 8: a
// generator's image output, e.g. EB-GAN's 64 -> 3 at 256x256), where cuDNN's GEMM with N = C_out
// starves the tensor cores and width folding multiplies the work by its fold factor.
// - `mma_small_cout_nhwc` (fp16): our implicit GEMM on tensor cores (mma.sync m16n8k16), no column
//   buffer: M = output pixels, N = C_out padded to 8, K = KH x KW taps x C_in in groups of 32 channels
//   (the last zero-padded). A warp owns 64 output pixels (four m16 tiles); an A row is one pixel's 32
//   channels read as 16-byte vectors (gemm_tiles.cuh's fragment helpers), B comes from the weights
//   staged once per block in shared memory as [tap][slice][n][16 k] half. Stride 1: the tile kernel
//   stages the input window of 4 output rows x 64 columns per channel group with cp.async (zeros
//   outside the image: no padding pass); other strides: the gather kernel loads A rows from global
//   memory (L1 serves the taps' overlap). Stride 1 with C_in <= 128 and KH x KW x C_out <= 32 (3x3 -> 3:
//   27) takes the rows kernel instead: N = every (tap, output channel) pair, K = C_in, so each input
//   pixel is read once into A fragments, and the taps are summed afterwards from shared memory.
// - `direct_small_cout_nhwc` (fp32 / tf32 / fp16): one thread per output pixel computes all C_out
//   channels with float FMAs, reading each input pixel's C_in channels as 16-byte vectors, weights
//   in shared memory as float [KH][KW][C_in][C_out] (warp-uniform reads: broadcasts).
// The rows kernel also applies conv2d's input epilogue when it is bias + ReLU (fuse_input_epilogue:
// the producer's bias and ReLU on each loaded input value, compiled into its own instances), the
// variant's only kernel that does.
// Both sum in float and fuse bias and activation (or a per-channel PRelu: GemmEpilogue's slopes); a
// grid of a few blocks per SM loops over the work, so the weights load once per block.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/conv2d/common.h"
#include "infer/kernel.h"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_mainloop.cuh"
#include "kernels/cuda/gemm_tiles.cuh"

namespace infer::cuda {
namespace {

constexpr int kMaxCout = 8;
constexpr size_t kSmemBytes = 48 * 1024;

struct Geo {
  int N, C, H, W, HO, WO, KH, KW, sh, sw, pt, pl;
};

template <class T, int CO, int V>
__global__ void __launch_bounds__(256)
    small_cout_nhwc_kernel(const T* __restrict__ x, const float* __restrict__ wf, T* __restrict__ y, Geo g,
                           GemmEpilogue<T, float> ep) {
  extern __shared__ float ws[];
  const int weights = g.KH * g.KW * g.C * CO;
  for (int i = threadIdx.x; i < weights; i += blockDim.x) ws[i] = wf[i];
  __syncthreads();
  const int64_t total = int64_t(g.N) * g.HO * g.WO;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < total;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int ox = static_cast<int>(p % g.WO);
    const int oy = static_cast<int>((p / g.WO) % g.HO);
    const int n = static_cast<int>(p / (int64_t(g.WO) * g.HO));
    float acc[CO];
#pragma unroll
    for (int co = 0; co < CO; ++co) acc[co] = 0.f;
    for (int ky = 0; ky < g.KH; ++ky) {
      const int iy = oy * g.sh - g.pt + ky;
      if (iy < 0 || iy >= g.H) continue;
      for (int kx = 0; kx < g.KW; ++kx) {
        const int ix = ox * g.sw - g.pl + kx;
        if (ix < 0 || ix >= g.W) continue;
        const T* xp = x + ((int64_t(n) * g.H + iy) * g.W + ix) * g.C;
        const float* wk = ws + (ky * g.KW + kx) * g.C * CO;
        for (int c = 0; c < g.C; c += V) {
          Pack<T, V> v = *reinterpret_cast<const Pack<T, V>*>(xp + c);
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const float xv = to_float(v.v[k]);
#pragma unroll
            for (int co = 0; co < CO; ++co) acc[co] += xv * wk[(c + k) * CO + co];
          }
        }
      }
    }
#pragma unroll
    for (int co = 0; co < CO; ++co)
      ep.store(y, p * CO + co, ep.channel(co), acc[co]);
  }
}

// ---- mma_small_cout_nhwc ---------------------------------------------------------------------

constexpr int kMmaWarps = 4;         // warps per block
constexpr int kMmaTiles = 4;         // m16 tiles per warp: 64 output pixels
constexpr int kMmaPixelsPerWarp = 16 * kMmaTiles;

// Fragments: gemm_tiles.cuh's mma_16816 with its 16-byte channel-vector A rows (mma_a_slices): in each
// group of 32 input channels (the last zero-padded) thread t loads channels 8t .. 8t + 7 of a pixel;
// mma_prepare() lays B out to match (mma_k_channel). (A first version loaded each channel pair with
// its own 4-byte load: 1.38 ms on EB-GAN's output layer at batch 64, H100.)
//
// One 32-channel group of one tap for a warp's four m16 tiles: r0[j] / r1[j] are the 16 bytes of rows
// g and g + 8 of tile j; w0 the tap's B words for this thread (slice 2 gi at w0[0], w0[4]; 2 gi + 1
// at w0[64], w0[68]).
using MmaWarp = WarpMma16816<kMmaTiles, 1>;  // one n8 tile: C_out <= 8
__device__ __forceinline__ void mma_group(MmaWarp& mma, const uint4 (&r0)[kMmaTiles], const uint4 (&r1)[kMmaTiles],
                                          const uint32_t* w0) {
  const uint32_t b[1][4] = {{w0[0], w0[4], w0[64], w0[68]}};
#pragma unroll
  for (int j = 0; j < kMmaTiles; ++j) mma.group(j, r0[j], r1[j], b);
}

using MmaEpilogue = GemmEpilogue<__half, float>;

// This thread's two channels 2t, 2t + 1 (those below CO), their bias and slope loaded once.
struct MmaChannels {
  MmaEpilogue::Channel c0, c1;
};
__device__ __forceinline__ MmaChannels mma_channels(const MmaEpilogue& ep, int CO, int t) {
  MmaChannels m;
  if (2 * t < CO) m.c0 = ep.channel(2 * t);
  if (2 * t + 1 < CO) m.c1 = ep.channel(2 * t + 1);
  return m;
}

// The epilogue's store of one output pixel's channels 2t, 2t + 1 (those below CO).
__device__ __forceinline__ void mma_store(__half* y, int64_t p, int CO, int t, const float* d, const MmaEpilogue& ep,
                                          const MmaChannels& ch) {
  const int n0 = 2 * t;
  if (n0 < CO) ep.store(y, p * CO + n0, ch.c0, d[0]);
  if (n0 + 1 < CO) ep.store(y, p * CO + n0 + 1, ch.c1, d[1]);
}

// Copies the packed weights (16-byte words) into shared memory; returns them as 32-bit words.
__device__ __forceinline__ const uint32_t* mma_stage_weights(uint4* wsm, const uint4* wt, int wt_vec16) {
  for (int i = threadIdx.x; i < wt_vec16; i += blockDim.x) wsm[i] = wt[i];
  __syncthreads();
  return reinterpret_cast<const uint32_t*>(wsm);
}

// Any stride and padding: a warp owns 64 consecutive output pixels of the flattened N x HO x WO and
// loads its A rows straight from global memory (L1 serves the taps' overlap).
__global__ void __launch_bounds__(kMmaWarps * 32)
    mma_small_cout_gather_kernel(const __half* __restrict__ x, const uint4* __restrict__ wt, int wt_vec16,
                                 __half* __restrict__ y, Geo geo, int CO, MmaEpilogue ep) {
  extern __shared__ uint4 smem[];
  const uint32_t* ws = mma_stage_weights(smem, wt, wt_vec16);
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int groups = (geo.C + 31) / 32;
  const int64_t total = int64_t(geo.N) * geo.HO * geo.WO;
  const int64_t warps = int64_t(gridDim.x) * kMmaWarps;
  for (int64_t base = (int64_t(blockIdx.x) * kMmaWarps + threadIdx.x / 32) * kMmaPixelsPerWarp; base < total;
       base += warps * kMmaPixelsPerWarp) {
    // this thread's 8 rows: tile j, row g (i = 2j) or g + 8 (i = 2j + 1)
    int iy0[2 * kMmaTiles], ix0[2 * kMmaTiles];
    int64_t img[2 * kMmaTiles];
#pragma unroll
    for (int i = 0; i < 2 * kMmaTiles; ++i) {
      const int64_t p = base + (i >> 1) * 16 + g + (i & 1) * 8;
      if (p < total) {
        const int ox = static_cast<int>(p % geo.WO);
        const int64_t q = p / geo.WO;
        const int oy = static_cast<int>(q % geo.HO);
        img[i] = (q / geo.HO) * geo.H;
        iy0[i] = oy * geo.sh - geo.pt;
        ix0[i] = ox * geo.sw - geo.pl;
      } else {
        img[i] = 0;
        iy0[i] = -(1 << 29);  // never inside the image: loads zeros
        ix0[i] = 0;
      }
    }
    MmaWarp mma;
    for (int ky = 0; ky < geo.KH; ++ky) {
      for (int kx = 0; kx < geo.KW; ++kx) {
        const __half* px[2 * kMmaTiles];  // the tap's input pixel per row, null outside the image
#pragma unroll
        for (int i = 0; i < 2 * kMmaTiles; ++i) {
          const int iy = iy0[i] + ky, ix = ix0[i] + kx;
          px[i] = (iy >= 0 && iy < geo.H && ix >= 0 && ix < geo.W)
                      ? x + ((img[i] + iy) * geo.W + ix) * int64_t(geo.C)
                      : nullptr;
        }
        const uint32_t* wtap = ws + (ky * geo.KW + kx) * groups * 128 + g * 8 + t;
        for (int gi = 0; gi < groups; ++gi) {
          const int c = gi * 32 + 8 * t;  // C % 8 == 0: the thread's 8 channels are wholly in or out
          uint4 r0[kMmaTiles], r1[kMmaTiles];
#pragma unroll
          for (int j = 0; j < kMmaTiles; ++j) {
            r0[j] = px[2 * j] && c < geo.C ? __ldg(reinterpret_cast<const uint4*>(px[2 * j] + c)) : make_uint4(0, 0, 0, 0);
            r1[j] = px[2 * j + 1] && c < geo.C ? __ldg(reinterpret_cast<const uint4*>(px[2 * j + 1] + c))
                                               : make_uint4(0, 0, 0, 0);
          }
          mma_group(mma, r0, r1, wtap + gi * 128);
        }
      }
    }
    const MmaChannels ch = mma_channels(ep, CO, t);  // loaded here: no registers held through the main loop
#pragma unroll
    for (int i = 0; i < 2 * kMmaTiles; ++i) {
      const int64_t p = base + (i >> 1) * 16 + g + (i & 1) * 8;
      if (p < total) mma_store(y, p, CO, t, &mma.acc[i >> 1][0][(i & 1) * 2], ep, ch);
    }
  }
}

// Stride 1: a block owns `rows` output rows x 64 output columns of one image (one row per warp, so
// rows <= kMmaWarps) and stages the input window they read, (rows + KH - 1) x (64 + KW - 1) pixels of
// 32 channels at a time, in shared memory with cp.async (zeros outside the image: the padding); every
// tap then reads its A rows from there, 64 contiguous bytes per pixel, so each input byte is fetched
// from L2 about once per tile instead of once per tap.
__global__ void __launch_bounds__(kMmaWarps * 32)
    mma_small_cout_tile_kernel(const __half* __restrict__ x, const uint4* __restrict__ wt, int wt_vec16,
                               __half* __restrict__ y, Geo geo, int CO, MmaEpilogue ep, int rows) {
  extern __shared__ uint4 smem[];
  const uint32_t* ws = mma_stage_weights(smem, wt, wt_vec16);
  uint4* tile = smem + wt_vec16;  // [row][col][4 x 16 bytes]
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int groups = (geo.C + 31) / 32;
  const int tile_h = rows + geo.KH - 1, tile_w = kMmaPixelsPerWarp + geo.KW - 1;
  const int tiles_x = (geo.WO + kMmaPixelsPerWarp - 1) / kMmaPixelsPerWarp, tiles_y = (geo.HO + rows - 1) / rows;
  const int64_t tiles = int64_t(geo.N) * tiles_y * tiles_x;
  for (int64_t tl = blockIdx.x; tl < tiles; tl += gridDim.x) {
    const int tx = static_cast<int>(tl % tiles_x);
    const int64_t q = tl / tiles_x;
    const int ty = static_cast<int>(q % tiles_y), n = static_cast<int>(q / tiles_y);
    const int oy = ty * rows + warp, ox0 = tx * kMmaPixelsPerWarp;
    const bool active = warp < rows && oy < geo.HO;  // warps past `rows` only help with the loads
    const int iy0 = ty * rows - geo.pt, ix0 = ox0 - geo.pl;  // the window's top-left input pixel
    const __half* img = x + int64_t(n) * geo.H * geo.W * geo.C;
    MmaWarp mma;
    // one stage (gemm_mainloop.cuh): per 32-channel group, stage its window, then every tap multiplies
    auto window = tile_iterator(
        [&](int gi, int) { stage_nhwc_window32(tile, img, geo.H, geo.W, geo.C, iy0, ix0, tile_h, tile_w, gi * 32); });
    gemm_mainloop<1>(window, 0, groups, [&](int gi, int) {
      if (active) {
        for (int ky = 0; ky < geo.KH; ++ky) {
          const uint4* trow = tile + (warp + ky) * tile_w * 4 + t;
          for (int kx = 0; kx < geo.KW; ++kx) {
            uint4 r0[kMmaTiles], r1[kMmaTiles];
#pragma unroll
            for (int j = 0; j < kMmaTiles; ++j) {
              r0[j] = trow[(j * 16 + g + kx) * 4];
              r1[j] = trow[(j * 16 + g + 8 + kx) * 4];
            }
            mma_group(mma, r0, r1, ws + ((ky * geo.KW + kx) * groups + gi) * 128 + g * 8 + t);
          }
        }
      }
    });
    if (active) {
      const int64_t row = (int64_t(n) * geo.HO + oy) * geo.WO;
      const MmaChannels ch = mma_channels(ep, CO, t);
#pragma unroll
      for (int i = 0; i < 2 * kMmaTiles; ++i) {
        const int ox = ox0 + (i >> 1) * 16 + g + (i & 1) * 8;
        if (ox < geo.WO) mma_store(y, row + ox, CO, t, &mma.acc[i >> 1][0][(i & 1) * 2], ep, ch);
      }
    }
  }
}

// Stride 1, C_in <= 128, KH x KW x C_out <= 32 (EB-GAN's 64 -> 3 3x3 output layer: 27): the "rows"
// kernel. The GEMM's N holds every (tap, output channel) pair instead of K holding the taps, so each
// input pixel's channels are read once, from global memory straight into A fragments, rather than
// once per tap from a staged window: Z[pixel][(ky KW + kx) CO + co] = sum_c x[pixel][c] w[co][c][ky][kx]
// (K = C_in in G groups of 32 channels, N = KH KW CO padded to NT n8 tiles), then
// y[oy][ox][co] = sum_{ky,kx} Z[oy + ky][ox + kx][(ky KW + kx) CO + co], the shift-add of a col2im, in
// shared memory. A block owns a strip of 64 output columns x `rows` output rows of one image and walks
// down it: warp w computes window columns 16w .. 16w + 15 (one m16 tile; 5 warps: 80 >= 64 + KW - 1
// columns) of one window row per step, with B in registers for the whole strip and the next row's A
// loaded during this row's MMAs; the Z rows live in a ring of KH + 1 rows, and after the step's one
// barrier the block finishes output row r - KH + 1 from the ring (a thread per output element, the
// same elements of every row: their Z offsets computed once per strip).
constexpr int kRowsWarps = 5;
constexpr int kRowsCols = 16 * kRowsWarps;  // window columns per strip
constexpr int kRowsOut = 64;                // output columns per strip
constexpr int kRowsMaxGroups = 4;           // C_in <= 128: B and two rows of A stay in registers
constexpr int kRowsMaxN = 32;               // KH x KW x C_out <= 32: at most four n8 tiles
constexpr size_t kRowsMaxSmem = 96 * 1024;
constexpr int kRowsElems = (kRowsOut * kMaxCout + kRowsWarps * 32 - 1) / (kRowsWarps * 32);  // per thread and row

// Floats per Z pixel: NT x 8 columns, padded so that a half-warp's float2 stores of the D fragments
// (rows g, 8 apart in pixels, columns 2t) fall in distinct banks (stride = 8 or 24 mod 32).
__host__ __device__ constexpr int rows_z_stride(int nt) { return nt % 2 ? nt * 8 : nt * 8 + 8; }
// The Z ring, then the input epilogue's biases as half (kRowsMaxGroups x 32; unused without one)
size_t rows_smem(const Geo& g, int nt) {
  return size_t(g.KH + 1) * kRowsCols * rows_z_stride(nt) * sizeof(float) + 32 * kRowsMaxGroups * sizeof(__half);
}

template <int G, int NT, bool IE>
__global__ void __launch_bounds__(kRowsWarps * 32, IE && G <= 2 ? 4 : 1)
    mma_small_cout_rows_kernel(const __half* __restrict__ x, const uint32_t* __restrict__ wt, __half* __restrict__ y,
                               Geo geo, int CO, MmaEpilogue ep, int rows, const float* __restrict__ in_bias) {
  constexpr int S = rows_z_stride(NT);
  extern __shared__ float zs[];  // [KH + 1][kRowsCols][S]
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int strips_x = (geo.WO + kRowsOut - 1) / kRowsOut, strips_y = (geo.HO + rows - 1) / rows;
  const int sx = static_cast<int>(blockIdx.x % strips_x);
  const int q = static_cast<int>(blockIdx.x / strips_x);
  const int sy = q % strips_y, n = q / strips_y;
  // B: group gi's two k16 slices of n8 tile nt, laid out [gi][nt][slice][n 8][k 16] by prepare()
  uint32_t b[G][NT][4];
#pragma unroll
  for (int gi = 0; gi < G; ++gi)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint32_t* w0 = wt + (gi * NT + nt) * 128 + g * 8 + t;
      b[gi][nt][0] = w0[0], b[gi][nt][1] = w0[4], b[gi][nt][2] = w0[64], b[gi][nt][3] = w0[68];
    }
  const int oy0 = sy * rows, ox0 = sx * kRowsOut;
  const int out_rows = min(rows, geo.HO - oy0), win_rows = out_rows + geo.KH - 1;
  const int out_cols = min(kRowsOut, geo.WO - ox0);
  const int iy_top = oy0 - geo.pt;
  const int wc0 = 16 * warp + g, wc1 = wc0 + 8;  // this lane's two window columns (A rows g, g + 8)
  const int ix0 = ox0 - geo.pl + wc0, ix1 = ix0 + 8;
  const bool in0 = ix0 >= 0 && ix0 < geo.W, in1 = ix1 >= 0 && ix1 < geo.W;
  const __half* img = x + int64_t(n) * geo.H * geo.W * geo.C;
  // The input epilogue (IE: Conv2DParams::input_epilogue, bias + ReLU): each loaded half2 v of channels
  // (c, c + 1) becomes max(v + b, 0) in half arithmetic, one __hadd2 and one __hmax2 (an activation
  // chosen per value at run time took the kernel from 0.31 to 1.04 ms on EB-GAN); the padding stays
  // zero. The biases sit as half after the Z ring (zeros past C_in), read as 16-byte vectors where used:
  // held in registers they took the kernel to 124 registers and 3 blocks per SM.
  __half* sbias = reinterpret_cast<__half*>(zs + size_t(geo.KH + 1) * kRowsCols * S);
  if constexpr (IE) {
    for (int c = threadIdx.x; c < 32 * G; c += blockDim.x) sbias[c] = __float2half_rn(c < geo.C ? in_bias[c] : 0.f);
    __syncthreads();
  }
  // window row wr's A rows: channels 32 gi + 8t .. + 7 of the lane's two pixels, zeros outside the image
  // (the padding) and past C_in (C_in % 8 == 0: a lane's 8 channels are wholly in or out)
  auto load = [&](int wr, uint4 (&r0)[G], uint4 (&r1)[G]) {
    const int iy = iy_top + wr;
    const bool row_in = iy >= 0 && iy < geo.H;
    const __half* prow = img + int64_t(row_in ? iy : 0) * geo.W * geo.C + 8 * t;
#pragma unroll
    for (int gi = 0; gi < G; ++gi) {
      const bool c_in = 32 * gi + 8 * t < geo.C;
      r0[gi] = row_in && in0 && c_in ? __ldg(reinterpret_cast<const uint4*>(prow + int64_t(ix0) * geo.C + 32 * gi))
                                     : make_uint4(0, 0, 0, 0);
      r1[gi] = row_in && in1 && c_in ? __ldg(reinterpret_cast<const uint4*>(prow + int64_t(ix1) * geo.C + 32 * gi))
                                     : make_uint4(0, 0, 0, 0);
    }
  };
  // applied when the registers are consumed (not at the load: the next row's loads stay in flight)
  auto finish_load = [&](uint4 (&r0)[G], uint4 (&r1)[G], int wr) {
    if constexpr (IE) {
      const int iy = iy_top + wr;
      if (iy < 0 || iy >= geo.H) return;
      const __half2 zero = __float2half2_rn(0.f);
#pragma unroll
      for (int gi = 0; gi < G; ++gi) {
        const uint4 bv = *reinterpret_cast<const uint4*>(sbias + 32 * gi + 8 * t);
        const __half2* b = reinterpret_cast<const __half2*>(&bv);
        __half2* h0 = reinterpret_cast<__half2*>(&r0[gi]);
        __half2* h1 = reinterpret_cast<__half2*>(&r1[gi]);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          // channels past C_in have a zero bias and hold zeros: max(0 + 0, 0) keeps them zero
          if (in0) h0[k] = __hmax2(__hadd2(h0[k], b[k]), zero);
          if (in1) h1[k] = __hmax2(__hadd2(h1[k], b[k]), zero);
        }
      }
    }
  };
  // this thread's output elements of a row, e = threadIdx.x + q x blockDim (pixel i = e / CO, channel
  // co): their Z offsets i S + co (co < S), fixed for the strip
  const int elems = out_cols * CO;
  int zoff[kRowsElems];
#pragma unroll
  for (int q = 0; q < kRowsElems; ++q) {
    const int e = q * kRowsWarps * 32 + threadIdx.x, i = e / CO;
    zoff[q] = i * S + (e - i * CO);
  }
  const int ring = geo.KH + 1;
  uint4 r0[G], r1[G];
  load(0, r0, r1);
  for (int wr = 0; wr < win_rows; ++wr) {
    uint4 n0[G], n1[G];
    if (wr + 1 < win_rows) load(wr + 1, n0, n1);
    finish_load(r0, r1, wr);
    WarpMma16816<1, NT> mma;
#pragma unroll
    for (int gi = 0; gi < G; ++gi) mma.group(0, r0[gi], r1[gi], b[gi]);
    float* zrow = zs + (wr % ring) * kRowsCols * S + 2 * t;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      *reinterpret_cast<float2*>(zrow + wc0 * S + nt * 8) = make_float2(mma.acc[0][nt][0], mma.acc[0][nt][1]);
      *reinterpret_cast<float2*>(zrow + wc1 * S + nt * 8) = make_float2(mma.acc[0][nt][2], mma.acc[0][nt][3]);
    }
    // Z row wr is visible; the ring slot the next step overwrites (row wr - KH) was last read by the
    // previous step's output row, which every thread finished before this barrier
    __syncthreads();
    if (const int j = wr - (geo.KH - 1); j >= 0) {
      const int64_t out = ((int64_t(n) * geo.HO + oy0 + j) * geo.WO + ox0) * CO;
      const int slot0 = j % ring;
#pragma unroll
      for (int q = 0; q < kRowsElems; ++q) {
        if (q * kRowsWarps * 32 + int(threadIdx.x) >= elems) break;
        float s = 0.f;
        for (int ky = 0, slot = slot0; ky < geo.KH; ++ky, slot = slot + 1 == ring ? 0 : slot + 1) {
          const float* z = zs + slot * kRowsCols * S + zoff[q] + ky * geo.KW * CO;
          for (int kx = 0; kx < geo.KW; ++kx) s += z[kx * (S + CO)];
        }
        ep.store(y, out + q * kRowsWarps * 32 + threadIdx.x, ep.channel(zoff[q] % S), s);
      }
    }
#pragma unroll
    for (int gi = 0; gi < G; ++gi) r0[gi] = n0[gi], r1[gi] = n1[gi];
  }
}

struct Checked {
  bool ok = false;
  Geo g{};
  int CO = 0;
};

Checked check(const NodeDesc& node) {
  Checked r;
  if (!conv::nhwc_constant_conv(node)) return r;
  const auto* p = &std::get<Conv2DParams>(node.params);
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  if (w[0] > kMaxCout) return r;
  if (p->groups != 1 || p->dilation_h != 1 || p->dilation_w != 1 || p->stride_h <= 0 ||
      p->stride_w <= 0)
    return r;
  if (static_cast<size_t>(w[1] * w[2] * w[3] * w[0]) * sizeof(float) > kSmemBytes) return r;
  if ((x[2] + p->pad.top + p->pad.bottom - w[2]) / p->stride_h + 1 != y[2] ||
      (x[3] + p->pad.left + p->pad.right - w[3]) / p->stride_w + 1 != y[3])
    return r;
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  r.g = Geo{i32(x[0]), i32(x[1]), i32(x[2]), i32(x[3]), i32(y[2]), i32(y[3]), i32(w[2]), i32(w[3]),
            p->stride_h, p->stride_w, p->pad.top, p->pad.left};
  r.CO = i32(w[0]);
  r.ok = true;
  return r;
}

bool applicable(const NodeDesc& node) { return conv2d_plain(node) && check(node).ok; }

// Measured on the H100 (2026-11-24, EB-GAN's last layer, 64x64x256x256 -> 3 channels, batch 64
// fp16): 2.42 ms against 0.83 ms width-folded on cuDNN, so it is below cudnn_folded (60) and the
// NCHW direct_small_cout (30): a fallback for shapes nothing else in NHWC takes, and an --autotune
// candidate. (Likely limits: one pixel per thread re-reads its window's channels with no reuse in
// registers, and the float FMAs per pixel, 576 x C_out here, run without tensor cores.)
int priority(const NodeDesc& node) { return check(node).ok ? 3 : 0; }

struct State {
  std::unique_ptr<DeviceArray> weights;  // float [KH][KW][C_in][C_out]
  std::unique_ptr<DeviceArray> bias;     // float [C_out], or null
  std::unique_ptr<DeviceArray> slope;    // float [C_out] per-channel PRelu slopes (fuse_prelu), or null
};

std::shared_ptr<void> prepare(const NodeDesc& node) {
  const Checked c = check(node);
  if (!c.ok) throw Error("cuda conv2d.direct_small_cout_nhwc: needs NHWC, C_out <= 8 and constant weights");
  const Geo& g = c.g;
  const float* w = node.constants[1];
  std::vector<float> t(static_cast<size_t>(g.KH * g.KW * g.C * c.CO));
  for (int co = 0; co < c.CO; ++co)
    for (int ci = 0; ci < g.C; ++ci)
      for (int ky = 0; ky < g.KH; ++ky)
        for (int kx = 0; kx < g.KW; ++kx)
          t[static_cast<size_t>(((ky * g.KW + kx) * g.C + ci) * c.CO + co)] =
              w[((int64_t(co) * g.C + ci) * g.KH + ky) * g.KW + kx];
  auto st = std::make_shared<State>();
  st->weights = upload(t.data(), t.size(), Precision::FP32);
  st->bias = float_bias(node, c.CO, "conv2d.direct_small_cout_nhwc");
  st->slope = float_slope(node, c.CO, "conv2d.direct_small_cout_nhwc");
  return st;
}

template <class T, int CO>
void launch(const Checked& c, const T* x, const State& st, T* y, const Activation& act, Context& ctx) {
  const int64_t pixels = int64_t(c.g.N) * c.g.HO * c.g.WO;
  const unsigned blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((pixels + 255) / 256, int64_t(ctx.sm_count > 0 ? ctx.sm_count : 132) * 8)));
  const size_t smem = static_cast<size_t>(c.g.KH * c.g.KW * c.g.C * CO) * sizeof(float);
  const float* wf = st.weights->as<float>();
  const auto ep = gemm_epilogue<T, float>(data_or_null(st.bias), act, nullptr, data_or_null(st.slope));
  constexpr int kVec = 16 / sizeof(T);
  if (c.g.C % kVec == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0)
    small_cout_nhwc_kernel<T, CO, kVec><<<blocks, 256, smem, ctx.stream>>>(x, wf, y, c.g, ep);
  else
    small_cout_nhwc_kernel<T, CO, 1><<<blocks, 256, smem, ctx.stream>>>(x, wf, y, c.g, ep);
}

void run(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  if (!call.prepared) throw Error("cuda conv2d.direct_small_cout_nhwc: not prepared");
  const Checked c = check(call.node);
  if (!c.ok) throw Error("cuda conv2d.direct_small_cout_nhwc: needs NHWC, C_out <= 8 and constant weights");
  const State& st = *static_cast<const State*>(call.prepared);
  Context& ctx = context_of(call);
  const Activation& act = p.activation;
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const T* x = reinterpret_cast<const T*>(call.inputs[0]);
    T* y = reinterpret_cast<T*>(call.outputs[0]);
    switch (c.CO) {
      case 1: launch<T, 1>(c, x, st, y, act, ctx); break;
      case 2: launch<T, 2>(c, x, st, y, act, ctx); break;
      case 3: launch<T, 3>(c, x, st, y, act, ctx); break;
      case 4: launch<T, 4>(c, x, st, y, act, ctx); break;
      case 5: launch<T, 5>(c, x, st, y, act, ctx); break;
      case 6: launch<T, 6>(c, x, st, y, act, ctx); break;
      case 7: launch<T, 7>(c, x, st, y, act, ctx); break;
      default: launch<T, 8>(c, x, st, y, act, ctx); break;
    }
  });
  INFER_CUDA_CHECK_LAUNCH();
}

// ---- mma_small_cout_nhwc: host side --------------------------------------------------------------

// B is stored per 32-channel group as two 16-channel slices (the last group zero-padded).
int mma_slices(const Geo& g) { return 2 * ((g.C + 31) / 32); }
size_t mma_weight_bytes(const Geo& g) { return size_t(g.KH) * g.KW * mma_slices(g) * 128 * sizeof(__half); }

// Output rows per block of the shared-memory tile kernel (stride 1): 4, else as many as fit beside
// the weights in 48 KiB; 0: the gather kernel instead (other strides, or no room).
int mma_tile_rows(const Geo& g) {
  if (g.sh != 1 || g.sw != 1) return 0;
  for (int rows = kMmaWarps; rows >= 1; rows /= 2)
    if (mma_weight_bytes(g) + size_t(rows + g.KH - 1) * (kMmaPixelsPerWarp + g.KW - 1) * 64 <= kSmemBytes) return rows;
  return 0;
}

// The rows kernel's instance for a node: G groups of 32 input channels, NT n8 tiles of (tap, output
// channel) columns; G = 0 where it does not apply (other strides, C_in > 128, KH x KW x C_out > 32,
// KW > 17, a ring of Z rows over 96 KiB, a grid past 2^31 blocks).
struct RowsShape {
  int G = 0, NT = 0;
};
RowsShape rows_shape(const Geo& g, int CO) {
  const int nt = (g.KH * g.KW * CO + 7) / 8;
  const int64_t strips_x = (g.WO + kRowsOut - 1) / kRowsOut;
  if (g.sh != 1 || g.sw != 1 || g.KW > kRowsCols - kRowsOut + 1 || g.C > 32 * kRowsMaxGroups ||
      g.KH * g.KW * CO > kRowsMaxN || rows_smem(g, nt) > kRowsMaxSmem || int64_t(g.N) * g.HO * strips_x > INT32_MAX)
    return {};
  return {(g.C + 31) / 32, nt};
}

// fp16 with C_in a multiple of 8 (each A register holds a channel pair; the pair never straddles
// C_in) and the staged weights within 48 KiB of shared memory (3x3 kernels up to C_in = 336).
Checked mma_check(const NodeDesc& node) {
  Checked c = check(node);
  c.ok = c.ok && node.precision == Precision::FP16 && c.g.C % 8 == 0 && mma_weight_bytes(c.g) <= kSmemBytes;
  // an input epilogue (fuse_input_epilogue) only in the rows kernel, and only bias + ReLU (compiled in)
  if (c.ok && has_input_epilogue(node.params))
    c.ok = rows_shape(c.g, c.CO).G > 0 &&
           std::get<Conv2DParams>(node.params).input_activation.kind == ActivationKind::Relu;
  return c;
}

bool mma_applicable(const NodeDesc& node) {
  return conv2d_plain(node) && mma_check(node).ok && current_device_info().cc_major >= 8;
}

// Ahead of cudnn_folded (60) and cuDNN (50) from batch 4: H100, EB-GAN's 64 -> 3 output layer at
// batch 64 fp16 (profile, 2026-11-25): 0.523 ms, cudnn_folded 0.833 ms, cudnn 0.74 ms. Below batch 4
// the NCHW direct_small_cout keeps the layer (5 here, as cudnn_folded): with this variant at batch 1
// the channels_last pass put the layer in NHWC behind two conversions and EB-GAN fp16 went from
// 0.190 to 0.201 ms.
int mma_priority(const NodeDesc& node) {
  const Checked c = mma_check(node);
  if (!c.ok) return 0;
  return c.g.N >= 4 ? 65 : 5;
}

using RowsKernel = void (*)(const __half*, const uint32_t*, __half*, Geo, int, MmaEpilogue, int, const float*);
template <int G, bool IE>
RowsKernel rows_kernel_for(int nt) {
  switch (nt) {
    case 1: return mma_small_cout_rows_kernel<G, 1, IE>;
    case 2: return mma_small_cout_rows_kernel<G, 2, IE>;
    case 3: return mma_small_cout_rows_kernel<G, 3, IE>;
    default: return mma_small_cout_rows_kernel<G, 4, IE>;
  }
}
template <bool IE>
RowsKernel rows_kernel_ie(const RowsShape& r) {
  switch (r.G) {
    case 1: return rows_kernel_for<1, IE>(r.NT);
    case 2: return rows_kernel_for<2, IE>(r.NT);
    case 3: return rows_kernel_for<3, IE>(r.NT);
    default: return rows_kernel_for<4, IE>(r.NT);
  }
}
// ie: the node has an input epilogue (bias + ReLU)
RowsKernel rows_kernel(const RowsShape& r, bool ie) { return ie ? rows_kernel_ie<true>(r) : rows_kernel_ie<false>(r); }

// Output rows per strip: 32 (the window's KH - 1 extra rows amortized), halved while the grid would
// give fewer than 4 blocks per SM.
int rows_per_strip(const Geo& g, int sms) {
  const int64_t strips_x = (g.WO + kRowsOut - 1) / kRowsOut;
  int rows = 32;
  while (rows > 2 && int64_t(g.N) * ((g.HO + rows - 1) / rows) * strips_x < 4 * int64_t(sms)) rows /= 2;
  return rows;
}

struct MmaState {
  // tile / gather kernels: half [tap][slice][n = 8][k = 16]; rows kernel: half [group][n8 tile][slice 2]
  // [n = 8][k = 16] with column n = (ky KW + kx) C_out + co; zeros past C_out and C_in
  std::unique_ptr<DeviceArray> weights;
  RowsShape rows;  // the rows kernel's instance, or G = 0
  std::unique_ptr<DeviceArray> in_bias;  // float [C_in]: the input epilogue's bias, or null
  std::unique_ptr<DeviceArray> bias;     // float [C_out], or null
  std::unique_ptr<DeviceArray> slope;    // float [C_out] per-channel PRelu slopes (fuse_prelu), or null
};

std::shared_ptr<void> mma_prepare(const NodeDesc& node) {
  const Checked c = mma_check(node);
  if (!c.ok) throw Error("cuda conv2d.mma_small_cout_nhwc: needs NHWC fp16, C_out <= 8, C_in % 8 == 0");
  const Geo& g = c.g;
  const int slices = mma_slices(g);
  const float* w = node.constants[1];
  std::vector<float> t(mma_weight_bytes(g) / sizeof(__half), 0.f);
  for (int ky = 0; ky < g.KH; ++ky)
    for (int kx = 0; kx < g.KW; ++kx)
      for (int s = 0; s < slices; ++s)
        for (int n = 0; n < c.CO; ++n)
          for (int k = 0; k < 16; ++k) {
            const int ci = mma_k_channel(s, k);
            if (ci < g.C)
              t[static_cast<size_t>((((ky * g.KW + kx) * slices + s) * 8 + n) * 16 + k)] =
                  w[((int64_t(n) * g.C + ci) * g.KH + ky) * g.KW + kx];
          }
  auto st = std::make_shared<MmaState>();
  st->rows = rows_shape(g, c.CO);
  if (const RowsShape& r = st->rows; r.G > 0) {
    t.assign(size_t(r.G) * r.NT * 2 * 8 * 16, 0.f);
    for (int gi = 0; gi < r.G; ++gi)
      for (int col = 0; col < g.KH * g.KW * c.CO; ++col) {
        const int tap = col / c.CO, co = col % c.CO, ky = tap / g.KW, kx = tap % g.KW;
        for (int s = 0; s < 2; ++s)
          for (int k = 0; k < 16; ++k) {
            const int ci = mma_k_channel(2 * gi + s, k);
            if (ci < g.C)
              t[static_cast<size_t>((((gi * r.NT + col / 8) * 2 + s) * 8 + col % 8) * 16 + k)] =
                  w[((int64_t(co) * g.C + ci) * g.KH + ky) * g.KW + kx];
          }
      }
    // above 48 KiB of shared memory a kernel must opt in (once per instance, here: not inside a capture)
    if (const size_t smem = rows_smem(g, r.NT); smem > 48 * 1024)
      INFER_CUDA_CHECK(cudaFuncSetAttribute(rows_kernel(r, has_input_epilogue(node.params)),
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem)));
  }
  st->weights = upload(t.data(), t.size(), Precision::FP16);
  if (has_input_epilogue(node.params))
    st->in_bias = float_operand(node, 3, g.C, "input epilogue's bias", "conv2d.mma_small_cout_nhwc");
  st->bias = float_bias(node, c.CO, "conv2d.mma_small_cout_nhwc");
  st->slope = float_slope(node, c.CO, "conv2d.mma_small_cout_nhwc");
  return st;
}

void mma_run(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  if (!call.prepared) throw Error("cuda conv2d.mma_small_cout_nhwc: not prepared");
  const Checked c = mma_check(call.node);
  if (!c.ok) throw Error("cuda conv2d.mma_small_cout_nhwc: needs NHWC fp16, C_out <= 8, C_in % 8 == 0");
  if (reinterpret_cast<uintptr_t>(call.inputs[0]) % 16 != 0)
    throw Error("cuda conv2d.mma_small_cout_nhwc: the input is not 16-byte aligned");
  const MmaState& st = *static_cast<const MmaState*>(call.prepared);
  Context& ctx = context_of(call);
  const int64_t blocks_max = int64_t(ctx.sm_count > 0 ? ctx.sm_count : 132) * 8;
  const size_t wbytes = mma_weight_bytes(c.g);
  const __half* x = reinterpret_cast<const __half*>(call.inputs[0]);
  const uint4* wt = st.weights->as<uint4>();
  __half* y = reinterpret_cast<__half*>(call.outputs[0]);
  const auto ep =
      gemm_epilogue<__half, float>(data_or_null(st.bias), p.activation, nullptr, data_or_null(st.slope));
  if (const RowsShape& r = st.rows; r.G > 0) {
    const int rows = rows_per_strip(c.g, ctx.sm_count > 0 ? ctx.sm_count : 132);
    const int64_t strips = int64_t(c.g.N) * ((c.g.HO + rows - 1) / rows) * ((c.g.WO + kRowsOut - 1) / kRowsOut);
    rows_kernel(r, st.in_bias != nullptr)<<<static_cast<unsigned>(strips), kRowsWarps * 32, rows_smem(c.g, r.NT),
                                           ctx.stream>>>(x, st.weights->as<uint32_t>(), y, c.g, c.CO, ep, rows,
                                                         static_cast<const float*>(data_or_null(st.in_bias)));
  } else if (const int rows = mma_tile_rows(c.g); rows > 0) {
    const int64_t tiles = int64_t(c.g.N) * ((c.g.HO + rows - 1) / rows) *
                          ((c.g.WO + kMmaPixelsPerWarp - 1) / kMmaPixelsPerWarp);
    const size_t smem = wbytes + size_t(rows + c.g.KH - 1) * (kMmaPixelsPerWarp + c.g.KW - 1) * 64;
    mma_small_cout_tile_kernel<<<static_cast<unsigned>(std::min(tiles, blocks_max)), kMmaWarps * 32, smem,
                                 ctx.stream>>>(x, wt, static_cast<int>(wbytes / 16), y, c.g, c.CO, ep, rows);
  } else {
    const int64_t pixels = int64_t(c.g.N) * c.g.HO * c.g.WO;
    const int64_t per_block = int64_t(kMmaWarps) * kMmaPixelsPerWarp;
    mma_small_cout_gather_kernel<<<static_cast<unsigned>(std::max<int64_t>(
                                       1, std::min((pixels + per_block - 1) / per_block, blocks_max))),
                                   kMmaWarps * 32, wbytes, ctx.stream>>>(x, wt, static_cast<int>(wbytes / 16), y,
                                                                         c.g, c.CO, ep);
  }
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(conv2d_small_cout_nhwc) {
  registry.add("cuda", {
      {.op = "conv2d", .name = "direct_small_cout_nhwc", .priority = 3, .priority_for = priority,
       .layouts = {Layout::NHWC}, .fuses_prelu = true, .applicable = applicable, .prepare = prepare, .run = run},
      {.op = "conv2d", .name = "mma_small_cout_nhwc", .priority = 65, .priority_for = mma_priority,
       .layouts = {Layout::NHWC}, .fuses_prelu = true, .fuses_input_epilogue = true,
       .applicable = mma_applicable, .prepare = mma_prepare, .run = mma_run},
  });
}

}  // namespace infer::cuda
