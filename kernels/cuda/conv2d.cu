// CUDA conv2d (NCHW but gemm_1x1_nhwc; weight [C_out,C_in/groups,KH,KW], optional bias, any stride, asymmetric padding,
// fused activation) in the session precision (float or half storage, float sums); all but `direct`
// take groups 1 and dilation 1 only (conv2d_plain), `direct` any groups and dilation; direct and the
// GEMM variants also take a residual input (fuse_conv_residual: y = act(conv + bias + r), added in
// their epilogue):
// direct_small_cout (C_out <= 8: one thread per column of output pixels computing every output
// channel, weights in shared memory; where a GEMM with M = C_out is hopeless), gemm_1x1 (1x1/stride
// 1/unpadded: one strided-batched cuBLAS GEMM over the batch; gemm_1x1_nhwc, the same in NHWC: one
// GEMM over all pixels of the batch), im2col_gemm (im2col into a <= 1 GiB
// workspace + strided-batched GEMM per chunk of images), and direct (one thread per output element;
// fallback and cross-check). GEMM variants end with bias_activation, or, split over K at batch 1
// (few output tiles, K >= 4096), with the kernel that adds the slices' partial sums and the epilogue.
#include <algorithm>
#include <climits>
#include <string>
#include <variant>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/im2col.cuh"
#include "kernels/conv_shapes.h"

namespace infer::cuda {
namespace {

// Shapes and parameter type were checked by the registry (check_kernel_call) and shape
// inference before any of these functions sees a node.

bool gemm_1x1_applicable(const NodeDesc& node) {
  if (!conv2d_ungrouped(node)) return false;
  const auto& p = std::get<Conv2DParams>(node.params);
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  return w[2] == 1 && w[3] == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad.top == 0 &&
         p.pad.left == 0 && p.pad.bottom == 0 && p.pad.right == 0 && y[2] == x[2] && y[3] == x[3];
}

// The node's geometry (x [N,C,H,W], w [CO,C,KH,KW], y [N,CO,HO,WO]).
ConvGeometry geometry(const NodeDesc& node) {
  const auto* p = &std::get<Conv2DParams>(node.params);
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  ConvGeometry g;
  g.C = xs[1];
  g.H = xs[2];
  g.W = xs[3];
  g.KH = ws[2];
  g.KW = ws[3];
  g.stride_h = p->stride_h;
  g.stride_w = p->stride_w;
  g.pad_top = p->pad.top;
  g.pad_left = p->pad.left;
  g.HO = ys[2];
  g.WO = ys[3];
  return g;
}

// The call's geometry and pointers.
struct ConvCall {
  ConvGeometry g;
  int64_t N, CO;
  const void *x, *w, *bias, *residual;  // residual: input 3 (add_residual), else null
  void* y;
};

ConvCall conv_call(const KernelCall& call) {
  ConvCall c{geometry(call.node), 0, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
  c.N = call.node.input_shapes[0][0];
  c.CO = call.node.input_shapes[1][0];
  c.x = call.inputs[0];
  c.w = call.inputs[1];
  c.bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  c.residual = std::get<Conv2DParams>(call.node.params).add_residual ? call.inputs.at(3) : nullptr;
  c.y = call.outputs[0];
  return c;
}

// ---- im2col_gemm / gemm_1x1 -----------------------------------------------------------------------

// Split-K at batch 1: a GEMM with few output tiles and a long K (VGG-16's conv5 at 14x14: M = 512,
// N = 196, K = 4608, so ~8 of cuBLAS's 128x128 tiles on 132 SMs) leaves the GPU mostly idle. Its K
// is cut into `splits` equal slices, multiplied as one strided-batched GEMM into float partial sums
// in the workspace, and one kernel adds them in slice order with bias (+ residual) and the
// activation. H100, 2026-11-25, batch 1 (infer-bench model, split cap 1 / 4 / 8 / 16): VGG-16 conv5
// 27.6 -> 22.8 us per layer in fp16, the model fp16 0.457 -> 0.442 ms, fp32 1.257 -> 1.236 ms; VGG-11
// fp16 0.287 -> 0.279 ms; AlexNet's 13x13 layers (K = 2304 / 3456) lost in fp16 (0.158 -> 0.163 ms),
// hence K >= 4096. 1 (no split) above batch 1, when the tiles already fill an eighth of the GPU, or
// where no split leaves slices of >= 256.
int split_k(const ConvGeometry& g, int64_t N, int64_t CO) {
  const int64_t K = g.col_rows(), P = g.col_cols();
  if (N != 1 || K < 4096) return 1;
  const int64_t tiles = ((CO + 127) / 128) * ((P + 127) / 128);
  if (tiles > 16) return 1;
  int s = 1;
  while (s < 16 && tiles * s * 2 <= 128 && K % (s * 2) == 0 && K / (s * 2) >= 256) s *= 2;
  return s;
}

size_t split_bytes(const ConvGeometry& g, int64_t N, int64_t CO) {
  const int s = split_k(g, N, CO);
  return s > 1 ? static_cast<size_t>(s) * static_cast<size_t>(CO * g.col_cols()) * sizeof(float) : 0;
}

size_t im2col_gemm_workspace(const NodeDesc& node) {
  const ConvGeometry g = geometry(node);
  const int64_t N = node.input_shapes[0][0], CO = node.input_shapes[1][0];
  const size_t split = split_bytes(g, N, CO);
  return split ? align256(conv_gemm_workspace_bytes(g, N, node.precision)) + split
               : conv_gemm_workspace_bytes(g, N, node.precision);
}

// y[i] = act(sum_s part[s][i] + bias[i / P] + r[i]) for i < total (= C_out * P of one image).
template <class T>
__global__ void split_k_sum_kernel(const float* __restrict__ part, int splits, int64_t total, int64_t P,
                                   const T* __restrict__ bias, const T* __restrict__ r, T* __restrict__ y,
                                   DeviceActivation act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    float v = 0.f;
    for (int s = 0; s < splits; ++s) v += part[s * total + i];
    if (bias) v += to_float(bias[i / P]);
    if (r) v += to_float(r[i]);
    y[i] = from_float<T>(activate(act, v));
  }
}

// The split-K GEMM of one image (N == 1): im2col unless the identity, then the sliced GEMM into the
// partial sums after the columns, then split_k_sum_kernel.
void run_split_k(Context& ctx, Precision p, const ConvCall& c, int splits, void* workspace, const Activation& act) {
  const ConvGeometry& g = c.g;
  const int64_t K = g.col_rows(), P = g.col_cols(), Ks = K / splits;
  const size_t col_bytes = conv_gemm_workspace_bytes(g, 1, p);
  const void* cols = c.x;
  if (!im2col_is_identity(g)) {
    im2col(ctx, p, g, c.x, g.C * g.H * g.W, workspace, 1);
    cols = workspace;
  }
  float* part = reinterpret_cast<float*>(static_cast<char*>(workspace) + align256(col_bytes));
  GemmArgs ga;
  ga.m = c.CO, ga.n = P, ga.k = Ks;
  ga.a = c.w, ga.lda = K, ga.stride_a = Ks;      // slice s: columns [s*Ks, (s+1)*Ks) of A
  ga.b = cols, ga.ldb = P, ga.stride_b = Ks * P;  // and rows [s*Ks, (s+1)*Ks) of the columns
  ga.c = part, ga.ldc = P, ga.stride_c = c.CO * P, ga.c_float = true;
  ga.batch = splits;
  gemm(ctx, p, ga);
  const int64_t total = c.CO * P;
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    split_k_sum_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        part, splits, total, P, static_cast<const T*>(c.bias), static_cast<const T*>(c.residual),
        static_cast<T*>(c.y), device_activation(act));
  });
  INFER_CUDA_CHECK_LAUNCH();
}

void run_gemm(const KernelCall& call, const char* variant) {
  const ConvCall c = conv_call(call);
  Context& ctx = context_of(call);
  const Precision p = call.node.precision;
  const ConvGeometry& g = c.g;
  if (!im2col_is_identity(g) && !call.workspace && g.col_elements() > 0 && c.N > 0)
    throw Error(std::string("cuda conv2d.") + variant + ": needs a workspace of " +
                std::to_string(conv_gemm_workspace_bytes(g, c.N, p)) + " bytes, got none");
  const int64_t P = g.HO * g.WO;
  const int splits = split_k(g, c.N, c.CO);
  if (splits > 1) {
    if (!call.workspace) throw Error(std::string("cuda conv2d.") + variant + ": split-K needs its workspace");
    run_split_k(ctx, p, c, splits, call.workspace, fused_activation(call.node.params));
    return;
  }
  conv_gemm(ctx, p, g, c.w, c.CO, c.x, g.C * g.H * g.W, c.y, c.CO * P, c.N, call.workspace,
            conv_gemm_chunk(g, c.N, p));
  bias_activation(ctx, p, c.y, c.bias, c.N, c.CO, P, fused_activation(call.node.params), c.residual);
}

void run_im2col_gemm(const KernelCall& call) { run_gemm(call, "im2col_gemm"); }

void run_gemm_1x1(const KernelCall& call) {
  if (!gemm_1x1_applicable(call.node))
    throw Error("cuda conv2d.gemm_1x1: needs a 1x1 kernel, stride 1 and no padding");
  run_gemm(call, "gemm_1x1");
}

// ---- gemm_1x1_nhwc --------------------------------------------------------------------------------
// In NHWC a 1x1 stride-1 unpadded convolution is one GEMM over every pixel of the batch, like a dense
// layer: y [N*H*W, C_out] = x [N*H*W, C_in] * W^T (the weight [C_out, C_in] as stored), M = N*H*W
// rows on the tensor cores, then bias (+ residual) + activation in bias_activation_nhwc. H100 fp16,
// MobileNetV2 batch 64 (2026-11-24): its 34 1x1 convolutions took 4.19 ms through conv2d.cudnn in
// NHWC and 1.88 ms through gemm_1x1 in NCHW (per-node profile sums).

// Where cudnn would run the node NHWC (aligned channels, batch >= 4; so the channels_last pass decides
// as before; below the NCHW variants otherwise): ahead of cudnn (50) unless the activation is ReLU,
// which cudnn fuses with the bias and a residual into its convolution while this variant's epilogue
// is a second pass over the output. Same run: ResNet-50 batch 64 fp16 (1x1 convolutions with ReLU)
// 2.71 ms with cudnn, 3.13 ms with this variant; MobileNetV2 (ReLU6 and linear 1x1 convolutions)
// 6.53 ms with cudnn, 3.34 ms with this one.
int gemm_1x1_nhwc_priority(const NodeDesc& node) {
  const int64_t a = tensor_core_multiple(node.precision);
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1];
  if (x[0] < 4 || x[1] % a != 0 || w[0] % a != 0) return 3;
  return fused_activation(node.params).kind == ActivationKind::Relu ? 45 : 55;
}

void run_gemm_1x1_nhwc(const KernelCall& call) {
  if (!gemm_1x1_applicable(call.node) || call.node.layout != Layout::NHWC)
    throw Error("cuda conv2d.gemm_1x1_nhwc: needs an NHWC 1x1 kernel, stride 1 and no padding");
  const ConvCall c = conv_call(call);
  Context& ctx = context_of(call);
  const int64_t rows = c.N * c.g.H * c.g.W;
  if (rows == 0 || c.CO == 0) return;
  gemm_x_wt(ctx, call.node.precision, c.x, c.w, c.y, rows, c.g.C, c.CO);  // the weight [C_out, C_in]
  bias_activation_nhwc(ctx, call.node.precision, c.y, c.bias, rows, c.CO,
                       fused_activation(call.node.params), c.residual);
}

// ---- direct -------------------------------------------------------------------------------------
// One thread per output element (n, co, oy, ox), grid-stride over N*C_out*HO*WO; the thread sums
// x * w over the C_in/groups channels of co's group x KH x KW taps (tap ky reads input row
// oy*stride - pad + ky*dilation) in float (taps outside the image skipped), adds the bias and the
// residual (add_residual), activates.
// Consecutive threads take consecutive ox, so input reads of a warp are nearly contiguous and the
// weight reads are a broadcast.

template <class T>
__global__ void conv2d_direct_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                     const T* __restrict__ bias, const T* __restrict__ r,
                                     T* __restrict__ y, ConvGeometry g,
                                     int64_t CO, int64_t total, DeviceActivation act,
                                     int64_t groups, int64_t dh, int64_t dw) {
  const int64_t CG = g.C / groups, COG = CO / groups;  // input / output channels per group
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % g.WO;
    const int64_t oy = (i / g.WO) % g.HO;
    const int64_t co = (i / (g.WO * g.HO)) % CO;
    const int64_t n = i / (g.WO * g.HO * CO);
    const int64_t iy0 = oy * g.stride_h - g.pad_top, ix0 = ox * g.stride_w - g.pad_left;
    float acc = 0.f;
    for (int64_t ci = 0; ci < CG; ++ci) {
      const T* xp = x + (n * g.C + (co / COG) * CG + ci) * g.H * g.W;
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
    y[i] = from_float<T>(activate(act, acc));
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
        static_cast<const T*>(c.residual), static_cast<T*>(c.y), c.g, c.CO, total, act, p.groups,
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
  ConvGeometry g;
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
                      T* __restrict__ y, SmallCoutArgs a) {
  extern __shared__ float smem[];
  const ConvGeometry& g = a.g;
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
        y[n * CHW + co * P + oy * g.WO + ox] = from_float<T>(activate(a.act, v));
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
    y[n * CHW + co * P + oy * g.WO + oxx] = from_float<T>(activate(a.act, v));
  }
}

template <class T, int CO>
void launch_small_cout(const ConvCall& c, const SmallCoutArgs& a, unsigned blocks, size_t smem,
                       cudaStream_t stream) {
  const T* x = static_cast<const T*>(c.x);
  const T* w = static_cast<const T*>(c.w);
  const T* bias = static_cast<const T*>(c.bias);
  T* y = static_cast<T*>(c.y);
  if (a.g.KH == 3 && a.g.KW == 3 && a.g.stride_h == 1 && a.g.stride_w == 1)
    small_cout_kernel<T, CO, 3, 1><<<blocks, kScThreads, smem, stream>>>(x, w, bias, y, a);
  else
    small_cout_kernel<T, CO, 0, 0><<<blocks, kScThreads, smem, stream>>>(x, w, bias, y, a);
}

void run_small_cout(const KernelCall& call) {
  const ConvCall c = conv_call(call);
  Context& ctx = context_of(call);
  if (!small_cout_applicable(call.node))
    throw Error("cuda conv2d.direct_small_cout: needs C_out <= 8 and a kernel whose weights fit in "
                "shared memory");
  const ConvGeometry& g = c.g;
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

}  // namespace

void register_conv2d(KernelRegistry& registry) {
  registry.add("cuda", {
      // priority is the static order; the heuristic uses priority_for
      {.op = "conv2d", .name = "direct_small_cout", .priority = 30,
       .priority_for = small_cout_priority, .applicable = small_cout_applicable,
       .run = run_small_cout},
      {.op = "conv2d", .name = "gemm_1x1", .priority = 20, .applicable = gemm_1x1_applicable,
       .workspace_bytes = im2col_gemm_workspace, .run = run_gemm_1x1},  // split-K's partial sums
      {.op = "conv2d", .name = "gemm_1x1_nhwc", .priority = 55, .priority_for = gemm_1x1_nhwc_priority,
       .layouts = {Layout::NHWC}, .applicable = gemm_1x1_applicable, .run = run_gemm_1x1_nhwc},
      {.op = "conv2d", .name = "im2col_gemm", .priority = 10, .applicable = conv2d_ungrouped,
       .workspace_bytes = im2col_gemm_workspace, .run = run_im2col_gemm},
      {.op = "conv2d", .name = "direct", .priority = 1, .run = run_direct},  // any conv2d node
  });
}

}  // namespace infer::cuda
