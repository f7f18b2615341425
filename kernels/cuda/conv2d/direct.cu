// CUDA conv2d, the direct variants (NCHW; weight [C_out,C_in/groups,KH,KW], optional bias, any stride,
// asymmetric padding, fused activation or per-channel PRelu) in the session precision (float or half
// storage, float sums): direct (one thread per output element, any groups, dilation and residual input:
// the fallback and cross-check) and direct_small_cout (C_out <= 8: one thread per column of output
// pixels computing every output channel, weights in shared memory; where a GEMM with M = C_out is
// hopeless).
#include <algorithm>
#include <climits>
#include <string>
#include <variant>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/gemm.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/conv2d/common.h"

namespace infer::cuda::conv {

// ---- direct -------------------------------------------------------------------------------------
// One thread per output element (n, co, oy, ox), grid-stride over N*C_out*HO*WO; the thread sums
// x * w over the C_in/groups channels of co's group x KH x KW taps (tap ky reads input row
// oy*stride - pad + ky*dilation) in float (taps outside the image skipped), adds the bias and the
// residual (add_residual), activates (and applies channel co's PRelu slope: fuse_prelu).
// Consecutive threads take consecutive ox, so input reads of a warp are nearly contiguous and the
// weight reads are a broadcast.

template <class T>
__global__ void conv2d_direct_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                     const T* __restrict__ bias, const T* __restrict__ r,
                                     const T* __restrict__ slope, T* __restrict__ y, ConvProblem g,
                                     int64_t CO, int64_t total, DeviceActivation act,
                                     int64_t groups, int64_t dh, int64_t dw) {
  // ConvProblem's C is one group's input channels; an image holds C * groups of them.
  const int64_t CG = g.C, CIN = g.C * groups, COG = CO / groups;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % g.WO;
    const int64_t oy = (i / g.WO) % g.HO;
    const int64_t co = (i / (g.WO * g.HO)) % CO;
    const int64_t n = i / (g.WO * g.HO * CO);
    const int64_t iy0 = oy * g.stride_h - g.pad_top, ix0 = ox * g.stride_w - g.pad_left;
    float acc = 0.f;
    for (int64_t ci = 0; ci < CG; ++ci) {
      const T* xp = x + (n * CIN + (co / COG) * CG + ci) * g.H * g.W;
      const T* wp = w + (co * CG + ci) * g.KH * g.KW;
      for (int64_t ky = 0; ky < g.KH; ++ky) {
        const int64_t iy = iy0 + ky * dh;
        if (iy < 0 || iy >= g.H) continue;
        for (int64_t kx = 0; kx < g.KW; ++kx) {
          const int64_t ix = ix0 + kx * dw;
          if (ix < 0 || ix >= g.W) continue;
          acc += to_float(wp[ky * g.KW + kx]) * to_float(xp[iy * g.W + ix]);
        }
      }
    }
    if (bias) acc += to_float(bias[co]);
    if (r) acc += to_float(r[i]);
    y[i] = from_float<T>(activate_channel(act, acc, slope, co));
  }
}

void run_direct(const KernelCall& call) {
  const ConvCall c = conv_call(call);
  Context& ctx = context_of(call);
  const int64_t total = c.N * c.CO * c.g.HO * c.g.WO;
  if (total == 0) return;
  const DeviceActivation act = device_activation(fused_activation(call.node.params));
  const auto& p = std::get<Conv2DParams>(call.node.params);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    conv2d_direct_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        static_cast<const T*>(c.x), static_cast<const T*>(c.w), static_cast<const T*>(c.bias),
        static_cast<const T*>(c.residual), static_cast<const T*>(c.slope), static_cast<T*>(c.y), c.g, c.CO,
        total, act, p.groups,
        p.dilation_h, p.dilation_w);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

// ---- direct_small_cout ----------------------------------------------------------------------------
// For C_out <= 8 (e.g. an image generator's last layer, 64 -> 3): cuBLAS with M = C_out wastes almost
// all of its tile, and im2col moves C_in*KH*KW times the input, so a direct convolution wins. Block =
// 8 warps over one output tile of one image: lane = output column ox (32 per tile), and each thread
// keeps kRows consecutive output rows x CO channels of float accumulators, so every input value it
// loads (through L1) feeds up to kRows*CO FMAs (a 3x3 stride-1 kernel: 18 loads per 4 rows x 9 taps).
// The 8 warps are split into `groups` groups over C_in (warp w takes the channels c = w mod groups)
// times 8/groups row groups, so small images still fill the GPU; the groups' partial sums meet in
// shared memory at the end. Weights of a chunk of channels are staged in shared memory as float
// ([channel][tap][co]; warp-uniform reads are broadcasts); the 3x3 stride-1 case is specialised at
// compile time and keeps one channel's weights in registers. Storage T (float or half), float sums.

constexpr int kSmallCoutMax = 8;
constexpr int kScWarps = 8, kScThreads = 32 * kScWarps, kRows = 4;
constexpr size_t kScSmemBytes = 48 * 1024;  // the default dynamic shared-memory limit

struct SmallCoutArgs {
  ConvProblem g;
  int64_t tiles_x = 0, tiles_y = 0;
  int groups = 1;     // channel groups (1, 2, 4 or 8); 8/groups row groups of kRows rows each
  int chunk = 1;      // channels whose weights are staged in shared memory at once
  DeviceActivation act;
};

bool small_cout_applicable(const NodeDesc& node) {
  if (!conv2d_plain(node)) return false;
  const Shape& w = node.input_shapes[1];
  if (w[0] < 1 || w[0] > kSmallCoutMax) return false;
  // One channel's weights (as float) must fit the shared memory; the output tile grid must fit.
  return w[2] >= 1 && w[3] >= 1 && w[2] * w[3] * w[0] * 4 <= int64_t(kScSmemBytes) &&
         w[2] <= 1024 && w[3] <= 1024;
}

// High where the kernel has output pixels enough to fill the GPU by itself; a tiny image with a long
// reduction (few blocks, each looping over C_in*KH*KW) is left to im2col_gemm (priority 10).
int small_cout_priority(const NodeDesc& node) {
  if (!small_cout_applicable(node)) return 0;
  const Shape& y = node.output_shapes[0];
  return y[0] * y[2] * y[3] >= 4096 ? 30 : 5;
}

// K, S > 0: square kernel and stride known at compile time; 0: the geometry's (any) values.
template <class T, int CO, int K, int S>
__global__ void __launch_bounds__(kScThreads)
    small_cout_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                      const T* __restrict__ slope, T* __restrict__ y, SmallCoutArgs a) {
  extern __shared__ float smem[];
  const ConvProblem& g = a.g;
  const int KH = K > 0 ? K : static_cast<int>(g.KH), KW = K > 0 ? K : static_cast<int>(g.KW);
  const int sh = S > 0 ? S : static_cast<int>(g.stride_h), sw = S > 0 ? S : static_cast<int>(g.stride_w);
  const int taps = KH * KW;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int group = warp % a.groups, row_group = warp / a.groups;
  const int tile_rows = (kScWarps / a.groups) * kRows;
  int64_t b = blockIdx.x;
  const int64_t tx = b % a.tiles_x;
  b /= a.tiles_x;
  const int64_t ty = b % a.tiles_y, n = b / a.tiles_y;
  const int64_t ox = tx * 32 + lane, oy0 = ty * tile_rows + row_group * kRows;
  const int64_t ix0 = ox * sw - g.pad_left, iy0 = oy0 * sh - g.pad_top;
  const int64_t HW = g.H * g.W;
  const T* xn = x + n * g.C * HW;

  float acc[CO][kRows];
#pragma unroll
  for (int co = 0; co < CO; ++co)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[co][r] = 0.f;

  for (int64_t c0 = 0; c0 < g.C; c0 += a.chunk) {
    const int cn = static_cast<int>(min(int64_t(a.chunk), g.C - c0));
    __syncthreads();  // the previous chunk's weights are no longer read
    for (int i = threadIdx.x; i < cn * taps * CO; i += kScThreads) {
      const int co = i % CO, rest = i / CO, t = rest % taps, cc = rest / taps;
      smem[i] = to_float(w[(co * g.C + c0 + cc) * taps + t]);
    }
    __syncthreads();
    for (int cc = group; cc < cn; cc += a.groups) {
      const T* xp = xn + (c0 + cc) * HW;
      const float* ws = smem + cc * taps * CO;
      if constexpr (K > 0 && S > 0) {
        float wr[K * K * CO];
#pragma unroll
        for (int i = 0; i < K * K * CO; ++i) wr[i] = ws[i];
        // Input row rr of the thread's window serves output row r through kernel row rr - r*S.
#pragma unroll
        for (int rr = 0; rr < (kRows - 1) * S + K; ++rr) {
          const int64_t iy = iy0 + rr;
          const bool row_in = iy >= 0 && iy < g.H;
#pragma unroll
          for (int kx = 0; kx < K; ++kx) {
            const int64_t ix = ix0 + kx;
            const float v = row_in && ix >= 0 && ix < g.W ? to_float(xp[iy * g.W + ix]) : 0.f;
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              const int ky = rr - r * S;
              if (ky >= 0 && ky < K)
#pragma unroll
                for (int co = 0; co < CO; ++co) acc[co][r] += wr[(ky * K + kx) * CO + co] * v;
            }
          }
        }
      } else {
        const int rows_in = (kRows - 1) * sh + KH;
        for (int rr = 0; rr < rows_in; ++rr) {
          const int64_t iy = iy0 + rr;
          const bool row_in = iy >= 0 && iy < g.H;
          for (int kx = 0; kx < KW; ++kx) {
            const int64_t ix = ix0 + kx;
            const float v = row_in && ix >= 0 && ix < g.W ? to_float(xp[iy * g.W + ix]) : 0.f;
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              const int ky = rr - r * sh;
              if (ky >= 0 && ky < KH) {
                const float* wt = ws + (ky * KW + kx) * CO;
#pragma unroll
                for (int co = 0; co < CO; ++co) acc[co][r] += wt[co] * v;
              }
            }
          }
        }
      }
    }
  }

  const int64_t CHW = CO * g.HO * g.WO, P = g.HO * g.WO;
  if (a.groups == 1) {  // uniform: no partial sums to combine
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t oy = oy0 + r;
      if (oy >= g.HO || ox >= g.WO) continue;
#pragma unroll
      for (int co = 0; co < CO; ++co) {
        const float v = acc[co][r] + (bias ? to_float(bias[co]) : 0.f);
        y[n * CHW + co * P + oy * g.WO + ox] = from_float<T>(activate_channel(a.act, v, slope, co));
      }
    }
    return;
  }
  // Partial sums [group][co][tile row][lane] (reusing the weights' shared memory), then every thread
  // of the block finishes outputs of the tile, lanes along ox so the stores coalesce.
  __syncthreads();
  float* red = smem;
  const int outs = CO * tile_rows * 32;
#pragma unroll
  for (int co = 0; co < CO; ++co)
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      red[group * outs + (co * tile_rows + row_group * kRows + r) * 32 + lane] = acc[co][r];
  __syncthreads();
  for (int i = threadIdx.x; i < outs; i += kScThreads) {
    float v = 0.f;
    for (int gi = 0; gi < a.groups; ++gi) v += red[gi * outs + i];
    const int l = i % 32, row = (i / 32) % tile_rows, co = i / (32 * tile_rows);
    const int64_t oy = ty * tile_rows + row, oxx = tx * 32 + l;
    if (oy >= g.HO || oxx >= g.WO) continue;
    if (bias) v += to_float(bias[co]);
    y[n * CHW + co * P + oy * g.WO + oxx] = from_float<T>(activate_channel(a.act, v, slope, co));
  }
}

template <class T, int CO>
void launch_small_cout(const ConvCall& c, const SmallCoutArgs& a, unsigned blocks, size_t smem,
                       cudaStream_t stream) {
  const T* x = static_cast<const T*>(c.x);
  const T* w = static_cast<const T*>(c.w);
  const T* bias = static_cast<const T*>(c.bias);
  const T* slope = static_cast<const T*>(c.slope);
  T* y = static_cast<T*>(c.y);
  if (a.g.KH == 3 && a.g.KW == 3 && a.g.stride_h == 1 && a.g.stride_w == 1)
    small_cout_kernel<T, CO, 3, 1><<<blocks, kScThreads, smem, stream>>>(x, w, bias, slope, y, a);
  else
    small_cout_kernel<T, CO, 0, 0><<<blocks, kScThreads, smem, stream>>>(x, w, bias, slope, y, a);
}

void run_small_cout(const KernelCall& call) {
  const ConvCall c = conv_call(call);
  Context& ctx = context_of(call);
  if (!small_cout_applicable(call.node))
    throw Error("cuda conv2d.direct_small_cout: needs C_out <= 8 and a kernel whose weights fit in "
                "shared memory");
  const ConvProblem& g = c.g;
  if (c.N == 0 || c.CO == 0 || g.HO == 0 || g.WO == 0) return;
  SmallCoutArgs a;
  a.g = g;
  a.act = device_activation(fused_activation(call.node.params));
  const int64_t taps = g.KH * g.KW;
  const size_t channel_bytes = static_cast<size_t>(taps * c.CO) * sizeof(float);
  a.tiles_x = (g.WO + 31) / 32;
  const auto blocks_for = [&](int groups) {
    const int64_t rows = (kScWarps / groups) * kRows;
    return c.N * a.tiles_x * ((g.HO + rows - 1) / rows);
  };
  // Split C_in over more warp groups while the grid is short of ~4 blocks per SM.
  const int64_t target = 4 * int64_t(ctx.sm_count > 0 ? ctx.sm_count : 132);
  while (a.groups < kScWarps && 2 * a.groups <= g.C && blocks_for(a.groups) < target &&
         2 * a.groups * channel_bytes <= kScSmemBytes)
    a.groups *= 2;
  const int64_t rows = (kScWarps / a.groups) * kRows;
  a.tiles_y = (g.HO + rows - 1) / rows;
  // Channels staged per round: as many as fit, a multiple of the groups when it does not cover C_in.
  int64_t chunk = std::min<int64_t>(std::max<int64_t>(g.C, 1), kScSmemBytes / channel_bytes);
  if (chunk < g.C && chunk >= a.groups) chunk -= chunk % a.groups;
  a.chunk = static_cast<int>(std::max<int64_t>(chunk, 1));
  const size_t weight_bytes = static_cast<size_t>(a.chunk) * channel_bytes;
  const size_t red_bytes =
      a.groups > 1 ? static_cast<size_t>(a.groups * c.CO * rows * 32) * sizeof(float) : 0;
  const size_t smem = std::max(weight_bytes, red_bytes);
  const int64_t blocks = c.N * a.tiles_x * a.tiles_y;
  if (blocks > INT_MAX) throw Error("cuda conv2d.direct_small_cout: output too large for one grid");
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const unsigned nb = static_cast<unsigned>(blocks);
    switch (c.CO) {
      case 1: launch_small_cout<T, 1>(c, a, nb, smem, ctx.stream); break;
      case 2: launch_small_cout<T, 2>(c, a, nb, smem, ctx.stream); break;
      case 3: launch_small_cout<T, 3>(c, a, nb, smem, ctx.stream); break;
      case 4: launch_small_cout<T, 4>(c, a, nb, smem, ctx.stream); break;
      case 5: launch_small_cout<T, 5>(c, a, nb, smem, ctx.stream); break;
      case 6: launch_small_cout<T, 6>(c, a, nb, smem, ctx.stream); break;
      case 7: launch_small_cout<T, 7>(c, a, nb, smem, ctx.stream); break;
      default: launch_small_cout<T, 8>(c, a, nb, smem, ctx.stream); break;
    }
  });
  INFER_CUDA_CHECK_LAUNCH();
}


}  // namespace infer::cuda::conv
