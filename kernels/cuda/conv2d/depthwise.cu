// CUDA conv2d "depthwise" (groups == C_in > 1, weight [M*C_in,1,KH,KW], output channel co reads input
// channel co/M), NCHW and NHWC, float or half storage with float sums; bias, residual (add_residual),
// any fused activation and a per-channel PRelu slope in one epilogue (gemm_epilogue.cuh), instantiated
// per common activation (dispatch_fixed_epilogue) so the hot kernels pay no per-element switch. A
// direct convolution: a GEMM with K = KH*KW (9) wastes the machine. Four kernels:
// - rows NHWC (3x3 in fp16, 3x3 / 5x5 in fp32; stride 1 or 2 both ways, dilation 1, M == 1, C a
//   multiple of the 16-byte vector (8 half / 4 float; 2 float at 5x5)): thread (cv, task) owns V
//   channels x RY = 4 output rows of one output column; the channel group's weights go through shared
//   memory into registers once, and the (RY-1)*S+K input rows x K columns it needs are read once each
//   straight from global memory (16-byte loads along C, neighbours' overlap served by L1), each applied
//   to every output row it meets. Block: cvg channel vectors (the largest divisor of C/V <= 32) x
//   256/cvg tasks along W. Register blocking as in Zhang et al. 2020 ("High Performance Depthwise and
//   Pointwise Convolutions on Mobile Devices") without staging the input, which a per-block barrier
//   kept from overlapping its loads (H200, fp16 batch 64: 1.3-2.1x the tiled kernel at 3x3).
// - tiled NHWC (the rest of 3x3 / 5x5, stride 1 or 2, dilation 1, M == 1; fp16 5x5 by default): a
//   block owns an output tile of TH rows x TW columns x one channel group (32 half / 16 float channels:
//   64 bytes per pixel), stages the input tile + halo ((TH-1)*S+K rows x (TW-1)*S+K columns, zeros
//   outside the image and past C) in shared memory with coalesced 8/16-byte loads along C, and the
//   group's weights as float. Thread (cv, pg): 4 channels (vector cv) x 4 adjacent outputs along W of
//   one tile row; per kernel row it reads the (4-1)*S+K input columns once and applies each to every
//   output and tap it meets (register reuse across the KW taps, fully unrolled), float accumulation.
// - generic NHWC (anything else: other kernels, dilation, M > 1): one thread per (pixel, vector of V
//   channels), V = 2 (float) or 4 (half) when M == 1 and C allows; every tap a global load.
// - NCHW: one thread per output element, consecutive threads along ox (coalesced rows).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <variant>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

struct DwArgs {
  int64_t N, C, H, W, CO, HO, WO, KH, KW, M;  // M = C_out / C_in, the channel multiplier
  int64_t sh, sw, pt, pl, dh, dw;
};

DwArgs dw_args(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1];
  const Shape& y = node.output_shapes[0];
  return {x[0], x[1], x[2], x[3], w[0], y[2], y[3], w[2], w[3], w[0] / x[1],
          p.stride_h, p.stride_w, p.pad.top, p.pad.left, p.dilation_h, p.dilation_w};
}

// --- tiled NHWC -----------------------------------------------------------------------------------

constexpr int kVec = 4;          // channels per thread (one 8-byte half / 16-byte float vector)
constexpr int kOutW = 4;         // adjacent outputs along W per thread
constexpr int kPixelGroups = 32; // (row, column group) slots per block: TH * (TW / kOutW)
// Channels per block: 64 bytes of a pixel, so the smem tile has the same bytes in both storage types.
template <class T> constexpr int group_channels() { return 64 / int(sizeof(T)); }
// Smem bytes per staged pixel: the 64-byte group padded so that the two column groups a (half-)warp's
// vector accesses reach at once (4*S pixels apart) fall on different bank halves: 4*S*stride = 64 mod
// 128 needs 80 bytes at stride 1 and 72 at stride 2; float's 16-byte vectors allow no 72 (one 2-way
// conflict stays at float stride 2).
template <class T, int S> constexpr int pixel_stride() {
  return (S == 1 || sizeof(T) == 4 ? 80 : 72) / int(sizeof(T));
}
constexpr int kSmemLimit = 48 * 1024;  // what a launch gets without opting in (no prepare() here)

template <class T, int K, int S>
constexpr int smem_bytes(int twg, int th) {
  return K * K * group_channels<T>() * 4 +
         ((th - 1) * S + K) * ((twg * kOutW - 1) * S + K) * pixel_stride<T, S>() * int(sizeof(T));
}

// The tile of one launch: TWG column groups of kOutW outputs, TH <= kPixelGroups / TWG rows.
struct Tile {
  int twg, th;
};
// The narrowest TW = 4*TWG (TWG in 1, 2, 4) that covers the output width, so small images keep their
// threads busy on more rows; wide images get 16-column tiles of 8 rows, whose halo costs (8-1)*S+K
// input rows for 8 output rows (1.25x at 3x3 stride 1, from L2). Rows are dropped (their thread slots
// idle) where the staged tile would pass 48 KiB (5x5 stride 2 only).
template <class T, int K, int S>
Tile tile_for(int64_t WO) {
  const int twg = WO <= kOutW ? 1 : WO <= 2 * kOutW ? 2 : 4;
  int th = kPixelGroups / twg;
  while (th > 1 && smem_bytes<T, K, S>(twg, th) > kSmemLimit) --th;
  return {twg, th};
}

// Launch bounds: 1024 threads per SM (4 half / 8 float blocks), i.e. at most 64 registers (ptxas -v,
// sm_90: half 59-64 without spills; float 0-48 spilled bytes; fp32 takes the rows kernel wherever C
// and the pointers allow).
template <class T, int K, int S, int A>
__global__ void __launch_bounds__(kPixelGroups * group_channels<T>() / kVec, 32 * kVec / group_channels<T>())
    depthwise_tiled_nhwc_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                GemmEpilogue<T> ep, int C, int H, int W, int HO, int WO, int pt, int pl,
                                int twg, int th, int tiles_w, bool vec_io) {
  constexpr int CG = group_channels<T>(), CV = CG / kVec, PS = pixel_stride<T, S>();
  constexpr int kWin = (kOutW - 1) * S + K;  // input columns one thread reads per kernel row
  extern __shared__ float4 smem[];           // smem_bytes(twg, th): the weights, then the input tile
  float* s_w = reinterpret_cast<float*>(smem);
  T* s_in = reinterpret_cast<T*>(s_w + K * K * CG);

  const int tw = twg * kOutW;
  const int rows_in = (th - 1) * S + K, cols_in = (tw - 1) * S + K;
  const int oy0 = (blockIdx.x / tiles_w) * th, ox0 = (blockIdx.x % tiles_w) * tw;
  const int c0 = blockIdx.y * CG;
  const int64_t n = blockIdx.z;
  const int iy0 = oy0 * S - pt, ix0 = ox0 * S - pl;
  const int tid = threadIdx.x, threads = blockDim.x;

  // Stage the input tile: item = (pixel, channel vector), consecutive threads along C (coalesced).
  const T* xn = x + n * H * W * int64_t(C);
#pragma unroll 4
  for (int item = tid; item < rows_in * cols_in * CV; item += threads) {
    const int cv = item % CV, pix = item / CV;
    const int iy = iy0 + pix / cols_in, ix = ix0 + pix % cols_in;
    const int c = c0 + cv * kVec;
    Pack<T, kVec> v;
    if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
      const T* src = xn + (int64_t(iy) * W + ix) * C + c;
      if (vec_io && c < C) {
        v = *reinterpret_cast<const Pack<T, kVec>*>(src);
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) v.v[j] = c + j < C ? src[j] : from_float<T>(0.f);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) v.v[j] = from_float<T>(0.f);
    }
    *reinterpret_cast<Pack<T, kVec>*>(s_in + pix * PS + cv * kVec) = v;
  }
  // The group's weights, tap-major as float: s_w[tap][channel] (weight [C][1][K][K]).
  for (int item = tid; item < K * K * CG; item += threads) {
    const int cl = item % CG, tap = item / CG;
    s_w[item] = c0 + cl < C ? to_float(w[int64_t(c0 + cl) * K * K + tap]) : 0.f;
  }
  __syncthreads();

  const int cv = tid % CV, pg = tid / CV;
  const int r = pg / twg, g = pg % twg;
  const int oy = oy0 + r, ox = ox0 + g * kOutW;
  if (r >= th || oy >= HO || ox >= WO) return;

  float acc[kOutW][kVec];
#pragma unroll
  for (int o = 0; o < kOutW; ++o)
#pragma unroll
    for (int j = 0; j < kVec; ++j) acc[o][j] = 0.f;

#pragma unroll
  for (int ky = 0; ky < K; ++ky) {
    float4 wk[K];
#pragma unroll
    for (int kx = 0; kx < K; ++kx) wk[kx] = *reinterpret_cast<const float4*>(s_w + (ky * K + kx) * CG + cv * kVec);
    const T* row = s_in + ((r * S + ky) * cols_in + g * kOutW * S) * PS + cv * kVec;
#pragma unroll
    for (int i = 0; i < kWin; ++i) {
      const Pack<T, kVec> pv = *reinterpret_cast<const Pack<T, kVec>*>(row + i * PS);
      float v[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = to_float(pv.v[j]);
      // input column i is tap kx = i - o*S of output o
#pragma unroll
      for (int o = 0; o < kOutW; ++o) {
        const int kx = i - o * S;
        if (kx >= 0 && kx < K) {
          acc[o][0] = fmaf(wk[kx].x, v[0], acc[o][0]);
          acc[o][1] = fmaf(wk[kx].y, v[1], acc[o][1]);
          acc[o][2] = fmaf(wk[kx].z, v[2], acc[o][2]);
          acc[o][3] = fmaf(wk[kx].w, v[3], acc[o][3]);
        }
      }
    }
  }

  const int c = c0 + cv * kVec;
  if (c >= C) return;
  typename GemmEpilogue<T>::Channel ch[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) ch[j] = c + j < C ? ep.channel(c + j) : typename GemmEpilogue<T>::Channel{};
  const int64_t row_base = (n * HO + oy) * int64_t(WO);
#pragma unroll
  for (int o = 0; o < kOutW; ++o) {
    if (ox + o >= WO) break;
    const int64_t i = (row_base + ox + o) * C + c;
    if (vec_io) {
      Pack<T, kVec> out;
#pragma unroll
      for (int j = 0; j < kVec; ++j) out.v[j] = from_float<T>(ep.template apply<A>(acc[o][j], ch[j], i + j));
      *reinterpret_cast<Pack<T, kVec>*>(y + i) = out;
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        if (c + j < C) y[i + j] = from_float<T>(ep.template apply<A>(acc[o][j], ch[j], i + j));
    }
  }
}

// True when the tiled kernel takes the node: NHWC, KH == KW in {3, 5}, one stride of 1 or 2, no
// dilation, M == 1, sizes in int range (per-image offsets and the batch in grid.z).
bool tiled_shape(const NodeDesc& node) {
  if (node.layout != Layout::NHWC) return false;
  const DwArgs a = dw_args(node);
  return a.KH == a.KW && (a.KH == 3 || a.KH == 5) && a.sh == a.sw && (a.sh == 1 || a.sh == 2) &&
         a.dh == 1 && a.dw == 1 && a.M == 1 && a.N <= 65535 && a.H * a.W * a.C < (int64_t(1) << 31) &&
         a.HO * a.WO * a.C < (int64_t(1) << 31) && a.pt > -(1 << 20) && a.pt < (1 << 20) &&
         a.pl > -(1 << 20) && a.pl < (1 << 20);
}

template <class T, int K, int S>
void launch_tiled(const DwArgs& a, const T* x, const T* w, T* y, const GemmEpilogue<T>& ep, cudaStream_t s) {
  constexpr int CG = group_channels<T>();
  const Tile t = tile_for<T, K, S>(a.WO);
  const int tw = t.twg * kOutW;
  const int64_t tiles_w = (a.WO + tw - 1) / tw, tiles_h = (a.HO + t.th - 1) / t.th;
  const dim3 grid(static_cast<unsigned>(tiles_w * tiles_h), static_cast<unsigned>((a.C + CG - 1) / CG),
                  static_cast<unsigned>(a.N));
  // 8-byte (half) / 16-byte (float) accesses along C where every pixel's channels start aligned.
  const bool vec = a.C % kVec == 0 &&
                   reinterpret_cast<uintptr_t>(x) % (sizeof(T) * kVec) == 0 &&
                   reinterpret_cast<uintptr_t>(y) % (sizeof(T) * kVec) == 0 &&
                   reinterpret_cast<uintptr_t>(ep.residual) % (sizeof(T) * kVec) == 0;
  dispatch_fixed_epilogue(ep, [&](auto act) {
    depthwise_tiled_nhwc_kernel<T, K, S, decltype(act)::value>
        <<<grid, kPixelGroups * CG / kVec, smem_bytes<T, K, S>(t.twg, t.th), s>>>(
            x, w, y, ep, int(a.C), int(a.H), int(a.W), int(a.HO), int(a.WO), int(a.pt), int(a.pl), t.twg, t.th,
            int(tiles_w), vec);
  });
}

template <class T>
void run_tiled(const DwArgs& a, const T* x, const T* w, T* y, const GemmEpilogue<T>& ep, cudaStream_t s) {
  if (a.KH == 3)
    a.sh == 1 ? launch_tiled<T, 3, 1>(a, x, w, y, ep, s) : launch_tiled<T, 3, 2>(a, x, w, y, ep, s);
  else
    a.sh == 1 ? launch_tiled<T, 5, 1>(a, x, w, y, ep, s) : launch_tiled<T, 5, 2>(a, x, w, y, ep, s);
}

// --- rows NHWC ------------------------------------------------------------------------------------

constexpr int kRowsOut = 4;        // RY: output rows per thread
constexpr int kRowsThreads = 256;  // threads per block: cvg channel vectors x 256/cvg tasks
constexpr int kRowsMaxCvg = 32;    // channel vectors per block at most

// The rows kernel's channels per thread: one 16-byte vector, 8 bytes for fp32 5x5 (its 25 x 4 weights
// would not fit the registers beside the sums: 24-200 bytes spilled at 4 floats, none at 2).
template <class T, int K> constexpr int rows_vec() { return sizeof(T) == 4 && K == 5 ? 2 : 16 / int(sizeof(T)); }

// A V-element vector of x at p (aligned to it) through the read-only path.
template <class T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  static_assert(sizeof(Pack<T, V>) == 16 || sizeof(Pack<T, V>) == 8, "16- or 8-byte vectors");
  Pack<T, V> r;
  if constexpr (sizeof(Pack<T, V>) == 16) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    memcpy(&r, &u, 16);
  } else {
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
    memcpy(&r, &u, 8);
  }
  return r;
}

// 2 blocks of 256 threads per SM at least: at most 128 registers (ptxas -v, sm_90: float 118-128 and no
// spills; 3x3 half 128 with 4-40 bytes spilled, L1-resident, and the fastest of the shapes timed).
template <class T, int K, int S, int A>
__global__ void __launch_bounds__(kRowsThreads, 2)
    depthwise_rows_nhwc_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                               GemmEpilogue<T> ep, int C, int H, int W, int HO, int WO, int pt, int pl,
                               int tiles_y, int tasks) {
  constexpr int V = rows_vec<T, K>(), RY = kRowsOut, ROWS = (RY - 1) * S + K;
  extern __shared__ float4 smem[];
  float* s_w = reinterpret_cast<float*>(smem);  // [K*K][cvg*V] the group's weights as float
  const int cvg = blockDim.x, cgv = cvg * V;
  const int c0 = blockIdx.y * cgv;
  const int tid = threadIdx.y * cvg + threadIdx.x, threads = cvg * blockDim.y;
  for (int item = tid; item < K * K * cgv; item += threads) {
    const int cl = item % cgv, tap = item / cgv;
    s_w[item] = to_float(w[int64_t(c0 + cl) * K * K + tap]);
  }
  __syncthreads();
  const int task = blockIdx.x * blockDim.y + threadIdx.y;  // tasks < 2^31 (rows_shape)
  if (task >= tasks) return;
  // task = (n * tiles_y + row block) * WO + ox: consecutive tasks along W, so a warp's loads of one
  // tap cover neighbouring pixels' channel vectors
  const int ox = task % WO, t2 = task / WO;
  const int oy0 = (t2 % tiles_y) * RY, n = t2 / tiles_y;
  const int c = c0 + threadIdx.x * V;

  float wr[K * K][V];
#pragma unroll
  for (int t = 0; t < K * K; ++t)
#pragma unroll
    for (int j = 0; j < V; ++j) wr[t][j] = s_w[t * cgv + threadIdx.x * V + j];
  float acc[RY][V];
#pragma unroll
  for (int o = 0; o < RY; ++o)
#pragma unroll
    for (int j = 0; j < V; ++j) acc[o][j] = 0.f;

  const int iy0 = oy0 * S - pt, ix0 = ox * S - pl;
  const T* xn = x + int64_t(n) * H * W * C + c;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int iy = iy0 + r;
    const bool row_in = iy >= 0 && iy < H;
    Pack<T, V> in[K];
#pragma unroll
    for (int kx = 0; kx < K; ++kx) {
      const int ix = ix0 + kx;
      if (row_in && ix >= 0 && ix < W) {
        in[kx] = load_pack<T, V>(xn + (int64_t(iy) * W + ix) * C);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) in[kx].v[j] = from_float<T>(0.f);
      }
    }
    // input row r is kernel row ky = r - o*S of output row o
#pragma unroll
    for (int kx = 0; kx < K; ++kx) {
      float f[V];
#pragma unroll
      for (int j = 0; j < V; ++j) f[j] = to_float(in[kx].v[j]);
#pragma unroll
      for (int o = 0; o < RY; ++o) {
        const int ky = r - o * S;
        if (ky >= 0 && ky < K) {
#pragma unroll
          for (int j = 0; j < V; ++j) acc[o][j] = fmaf(wr[ky * K + kx][j], f[j], acc[o][j]);
        }
      }
    }
  }

  typename GemmEpilogue<T>::Channel ch[V];
#pragma unroll
  for (int j = 0; j < V; ++j) ch[j] = ep.channel(c + j);
#pragma unroll
  for (int o = 0; o < RY; ++o) {
    const int oy = oy0 + o;
    if (oy >= HO) break;
    const int64_t i = ((int64_t(n) * HO + oy) * WO + ox) * C + c;
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(ep.template apply<A>(acc[o][j], ch[j], i + j));
    *reinterpret_cast<Pack<T, V>*>(y + i) = out;
  }
}

// The channel vectors per block: the largest divisor of C/V up to kRowsMaxCvg (whole vectors only, so
// no thread idles on a partial group).
int rows_cvg(int64_t vectors) {
  int cvg = 1;
  for (int d = 1; d <= std::min<int64_t>(vectors, kRowsMaxCvg); ++d)
    if (vectors % d == 0) cvg = d;
  return cvg;
}

// rows_vec for a node's storage type and kernel size (3 or 5), on the host.
int rows_vec_of(const NodeDesc& node) {
  const bool k5 = node.input_shapes[1][2] == 5;
  if (node.precision == Precision::FP16) return k5 ? rows_vec<__half, 5>() : rows_vec<__half, 3>();
  return k5 ? rows_vec<float, 5>() : rows_vec<float, 3>();
}

// True when the rows kernel takes the node (after tiled_shape's checks): fp32 / tf32 at 3x3 and 5x5,
// fp16 at 3x3 (its 5x5 stays tiled: 8 channels x 25 taps of weights spill, and the tiled kernel was
// the faster one there), C a multiple of V, the grid in range.
bool rows_shape(const NodeDesc& node) {
  const DwArgs a = dw_args(node);
  if (node.precision == Precision::FP16 && a.KH != 3) return false;
  const int64_t v = rows_vec_of(node);
  if (a.C % v != 0) return false;
  const int cvg = rows_cvg(a.C / v);
  const int64_t tasks = a.N * ((a.HO + kRowsOut - 1) / kRowsOut) * a.WO;
  return a.C / v / cvg <= 65535 && tasks + kRowsThreads < (int64_t(1) << 31);
}

// The rows kernel's vectors of x, y and the residual start aligned (V elements per pixel's channel
// vector; the arena aligns whole tensors, a view into one might not).
bool rows_aligned(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  const size_t bytes = size_t(rows_vec_of(call.node)) * element_size(call.node.precision);
  const void* residual = p.add_residual ? call.inputs.at(3) : nullptr;
  for (const void* ptr : {static_cast<const void*>(call.inputs[0]), static_cast<const void*>(call.outputs[0]), residual})
    if (reinterpret_cast<uintptr_t>(ptr) % bytes != 0) return false;
  return true;
}

template <class T, int K, int S>
void launch_rows(const DwArgs& a, const T* x, const T* w, T* y, const GemmEpilogue<T>& ep, cudaStream_t s) {
  constexpr int V = rows_vec<T, K>();
  const int cvg = rows_cvg(a.C / V), per_block = std::max(1, kRowsThreads / cvg);
  const int64_t tiles_y = (a.HO + kRowsOut - 1) / kRowsOut, tasks = a.N * tiles_y * a.WO;
  const dim3 block(static_cast<unsigned>(cvg), static_cast<unsigned>(per_block));
  const dim3 grid(static_cast<unsigned>((tasks + per_block - 1) / per_block), static_cast<unsigned>(a.C / V / cvg));
  const size_t smem = size_t(K) * K * cvg * V * sizeof(float);
  dispatch_fixed_epilogue(ep, [&](auto act) {
    depthwise_rows_nhwc_kernel<T, K, S, decltype(act)::value><<<grid, block, smem, s>>>(
        x, w, y, ep, int(a.C), int(a.H), int(a.W), int(a.HO), int(a.WO), int(a.pt), int(a.pl), int(tiles_y),
        int(tasks));
  });
}

// The rows kernel for what rows_shape admits (fp16 only at 3x3: the 5x5 half instances are not built).
template <class T>
void run_rows(const DwArgs& a, const T* x, const T* w, T* y, const GemmEpilogue<T>& ep, cudaStream_t s) {
  if (a.KH == 3) {
    a.sh == 1 ? launch_rows<T, 3, 1>(a, x, w, y, ep, s) : launch_rows<T, 3, 2>(a, x, w, y, ep, s);
  } else if constexpr (sizeof(T) == 4) {
    a.sh == 1 ? launch_rows<T, 5, 1>(a, x, w, y, ep, s) : launch_rows<T, 5, 2>(a, x, w, y, ep, s);
  } else {
    throw Error("cuda conv2d.depthwise: no fp16 5x5 rows kernel");  // rows_shape rules it out
  }
}

// --- generic NHWC and NCHW ------------------------------------------------------------------------

template <class T>
__global__ void depthwise_nchw_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                      GemmEpilogue<T> ep, DwArgs a, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % a.WO;
    const int64_t oy = (i / a.WO) % a.HO;
    const int64_t plane = i / (a.WO * a.HO);  // n * CO + co
    const int64_t co = plane % a.CO, n = plane / a.CO;
    const T* xp = x + (n * a.C + co / a.M) * a.H * a.W;
    const T* wp = w + co * a.KH * a.KW;
    const int64_t iy0 = oy * a.sh - a.pt, ix0 = ox * a.sw - a.pl;
    float acc = 0.f;
    for (int64_t ky = 0; ky < a.KH; ++ky) {
      const int64_t iy = iy0 + ky * a.dh;
      if (iy < 0 || iy >= a.H) continue;
      for (int64_t kx = 0; kx < a.KW; ++kx) {
        const int64_t ix = ix0 + kx * a.dw;
        if (ix < 0 || ix >= a.W) continue;
        acc += to_float(wp[ky * a.KW + kx]) * to_float(xp[iy * a.W + ix]);
      }
    }
    ep.store(y, i, ep.channel(co), acc);
  }
}

// V output channels per thread; V > 1 only with M == 1 (input channel = output channel) and C % V == 0.
template <class T, int V>
__global__ void depthwise_nhwc_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                      GemmEpilogue<T> ep, DwArgs a, int64_t total) {
  const int64_t vecs = a.CO / V;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t co = (i % vecs) * V;
    const int64_t pix = i / vecs;  // (n * HO + oy) * WO + ox
    const int64_t ox = pix % a.WO, oy = (pix / a.WO) % a.HO, n = pix / (a.WO * a.HO);
    const int64_t ci = co / a.M;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = 0.f;
    const int64_t iy0 = oy * a.sh - a.pt, ix0 = ox * a.sw - a.pl;
    for (int64_t ky = 0; ky < a.KH; ++ky) {
      const int64_t iy = iy0 + ky * a.dh;
      if (iy < 0 || iy >= a.H) continue;
      for (int64_t kx = 0; kx < a.KW; ++kx) {
        const int64_t ix = ix0 + kx * a.dw;
        if (ix < 0 || ix >= a.W) continue;
        const int64_t tap = ky * a.KW + kx;
        const Pack<T, V> v =
            *reinterpret_cast<const Pack<T, V>*>(x + ((n * a.H + iy) * a.W + ix) * a.C + ci);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] += to_float(w[(co + j) * a.KH * a.KW + tap]) * to_float(v.v[j]);
      }
    }
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(ep(acc[j], ep.channel(co + j), pix * a.CO + co + j));
    *reinterpret_cast<Pack<T, V>*>(y + pix * a.CO + co) = out;
  }
}

void run_depthwise(const KernelCall& call) {
  const DwArgs a = dw_args(call.node);
  Context& ctx = context_of(call);
  const auto& p = std::get<Conv2DParams>(call.node.params);
  // The pointers are typed float in KernelCall; under fp16 they hold half (the session precision).
  // Bias is input 2 whenever there is a residual or a PRelu slope (the fusion passes add a zero one).
  const void* xv = call.inputs[0];
  const void* wv = call.inputs[1];
  const void* bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  const void* residual = p.add_residual ? call.inputs.at(3) : nullptr;
  void* yv = call.outputs[0];
  const int64_t outputs = a.N * a.CO * a.HO * a.WO;
  if (outputs == 0) return;
  const bool tiled = tiled_shape(call.node);
  const bool rows = tiled && rows_shape(call.node) && rows_aligned(call);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(xv);
    const T* w = static_cast<const T*>(wv);
    T* y = static_cast<T*>(yv);
    const GemmEpilogue<T> ep = gemm_epilogue<T>(bias, fused_activation(call.node.params), residual, prelu_slope(call));
    if (call.node.layout != Layout::NHWC) {
      depthwise_nchw_kernel<T><<<grid_for(outputs), 256, 0, ctx.stream>>>(x, w, y, ep, a, outputs);
      return;
    }
    if (rows) {
      run_rows<T>(a, x, w, y, ep, ctx.stream);
      return;
    }
    if (tiled) {
      run_tiled<T>(a, x, w, y, ep, ctx.stream);
      return;
    }
    const int v = a.M == 1 ? pack_width(sizeof(T), a.C, {x, y, residual}) : 1;
    const int64_t total = outputs / v;
    if (v == 4)
      depthwise_nhwc_kernel<T, 4><<<grid_for(total), 256, 0, ctx.stream>>>(x, w, y, ep, a, total);
    else if (v == 2)
      depthwise_nhwc_kernel<T, 2><<<grid_for(total), 256, 0, ctx.stream>>>(x, w, y, ep, a, total);
    else
      depthwise_nhwc_kernel<T, 1><<<grid_for(total), 256, 0, ctx.stream>>>(x, w, y, ep, a, total);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

// A depthwise node (conv2d_depthwise's shape) with or without a residual input: the epilogue adds it.
bool depthwise_applicable(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  return p.groups > 1 && node.input_shapes.size() >= 2 && node.input_shapes[0].size() == 4 &&
         node.input_shapes[1].size() == 4 && node.output_shapes.size() == 1 &&
         node.output_shapes[0].size() == 4 && p.groups == node.input_shapes[0][1] &&
         node.input_shapes[1][1] == 1;
}

// The default for every depthwise node the tiled / rows kernels take and in NCHW (20, above cuDNN's 2
// for depthwise nodes: cudnn.cc, which ranks itself first only on fp16 5x5 in NHWC from batch 8); the
// generic NHWC kernel ranks 1, below cuDNN, which beat it on all 13 MobileNetV2 layers (H200,
// fp16 batch 64 autotune, issue 31), so there cuDNN runs where it is built.
int depthwise_priority(const NodeDesc& node) {
  return node.layout != Layout::NHWC || tiled_shape(node) ? 20 : 1;
}

}  // namespace

INFER_REGISTER_KERNELS(conv2d_depthwise) {
  registry.add("cuda", {
      {.op = "conv2d", .name = "depthwise", .priority = 20, .priority_for = depthwise_priority,
       .layouts = {Layout::NCHW, Layout::NHWC}, .fuses_prelu = true, .applicable = depthwise_applicable,
       .run = run_depthwise},
  });
}

}  // namespace infer::cuda
