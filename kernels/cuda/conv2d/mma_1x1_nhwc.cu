// CUDA conv2d `mma_1x1_nhwc` (fp16, sm_80+): a 1x1 stride-1 unpadded convolution in NHWC is the GEMM
// y [M = N*H*W, C_out] = x [M, C_in] * W^T; ours on tensor cores (mma.sync m16n8k16, float sums) with
// the whole epilogue (bias, residual, activation or PRelu) inside, so the output is written once:
// gemm_1x1_nhwc (cuBLAS) writes it, then bias_activation_nhwc reads and writes it again, which on the
// wide outputs of narrow inputs (MobileNetV2's expansions) is most of their time.
// Thread map: a warp owns 32 rows (two m16 tiles) x kN <= 8 n8 column tiles (a work item) and runs
// its items' 32-channel steps through its own 3-deep cp.async pipeline (A tiles in shared memory; B
// straight from global memory / L1, one 16-byte vector per thread and n8 tile: gemm_tiles.cuh's
// fragment map), then stages the item's output in shared memory and writes it as 16-byte chunks.
// Blocks of 4 independent warps loop over the items. C_in and C_out multiples of 8.
#include <algorithm>
#include <climits>
#include <memory>
#include <vector>

#include "infer/error.h"
#include "infer/kernel.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv2d/common.h"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_tiles.cuh"

namespace infer::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 32;  // two m16 tiles
constexpr int kMaxN = 8;          // n8 tiles per warp (64 output channels)
constexpr int kStages = 3;        // A steps in flight per warp (cp.async)

using Epilogue = GemmEpilogue<__half, float>;

// The row stride (32-bit words) of a warp's staged output tile (half): at least its 4 kN words, = 4
// mod 32, so the half2 stores of rows g = 0..7, words t hit 32 distinct banks, and a multiple of 4
// words (16-byte rows for the copy-out).
__host__ __device__ constexpr int stage_words(int kN) { return kN == 1 ? 4 : 36; }

// One warp's work, as a sequence of steps: step s is A's 32-channel group gi = s % groups of its
// (s / groups)-th work item. A step's A tile (32 rows x 32 channels = 2 KB, [row][4 x 16 bytes]) is
// copied with cp.async by the whole warp, zeros past C_in (C % 8 == 0) and past the last row.
__device__ __forceinline__ void copy_step(uint4* dst, const __half* x, int row0, int rows, int C, int gi, int lane) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int q = lane + 32 * i, r = row0 + (q >> 2), c = gi * 32 + (q & 3) * 8;
    if (r < rows && c < C)
      cp_async16(dst + q, x + int64_t(r) * C + c);
    else
      dst[q] = make_uint4(0, 0, 0, 0);
  }
}

// wt: the weights packed as [group][n8 tile][lane][8 halves] (lane 4g + t: output channel 8 nt + g,
// input channels 32 group + 8t .. + 7, zeros past C_in), so a warp's B vector is one 512-byte read
// (L1 serves the block's other warps). Work item w = (32-row tile w / col_blocks, column block w %
// col_blocks); warps take items in turn (grid-stride) and run their steps through a kStages-deep
// cp.async pipeline of their own (no block barriers), so the next item's A is in flight while this
// one's epilogue runs. Epilogue: sums + bias staged as half in the warp's tile (what cuBLAS's output
// held on the old path), then each lane writes 8 channels (16 bytes) at a time, a warp 32
// consecutive chunks of the output rows, adding the residual (16-byte loads) and the activation.
template <int kN, int A>
__global__ void __launch_bounds__(kWarps * 32)
    mma_1x1_nhwc_kernel(const __half* __restrict__ x, const uint4* __restrict__ wt, __half* __restrict__ y,
                        int rows, int C, int CO, Epilogue ep) {
  constexpr int SW = stage_words(kN);
  __shared__ uint4 a_stage[kWarps][kStages][128];
  __shared__ uint32_t out_stage[kWarps][kRowsPerWarp * SW];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  uint4(&as)[kStages][128] = a_stage[warp];
  uint32_t* os = out_stage[warp];
  const int col_tiles = CO / 8, col_blocks = (col_tiles + kN - 1) / kN, groups = (C + 31) / 32;
  const int items = ((rows + kRowsPerWarp - 1) / kRowsPerWarp) * col_blocks;
  const int first = blockIdx.x * kWarps + warp, stride = gridDim.x * kWarps;
  if (first >= items) return;  // no block barriers below
  const int steps = ((items - 1 - first) / stride + 1) * groups;
  auto row0_of = [&](int s) { return (first + s / groups * stride) / col_blocks * kRowsPerWarp; };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) copy_step(as[s], x, row0_of(s), rows, C, s % groups, lane);
    cp_async_commit();
  }
  WarpMma16816<2, kN> mma;
  for (int s = 0, stage = 0; s < steps; ++s) {
    cp_async_wait_pending<kStages - 2>();
    __syncwarp();  // step s's tile is visible; every lane is done with step s - 1's stage
    {
      const int f = s + kStages - 1, fs = stage == 0 ? kStages - 1 : stage - 1;
      if (f < steps) copy_step(as[fs], x, row0_of(f), rows, C, f % groups, lane);
      cp_async_commit();
    }
    const int gi = s % groups, item = first + s / groups * stride;
    const int nt0 = item % col_blocks * kN;
    uint32_t b[kN][4];
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) {
      const uint4 v = nt0 + nt < col_tiles ? __ldg(wt + (int64_t(gi) * col_tiles + nt0 + nt) * 32 + lane)
                                           : make_uint4(0, 0, 0, 0);
      b[nt][0] = v.x, b[nt][1] = v.y, b[nt][2] = v.z, b[nt][3] = v.w;
    }
    const uint4* a = as[stage];
    mma.group(0, a[g * 4 + t], a[(g + 8) * 4 + t], b);
    mma.group(1, a[(g + 16) * 4 + t], a[(g + 24) * 4 + t], b);
    stage = stage + 1 == kStages ? 0 : stage + 1;
    if (gi + 1 < groups) continue;

    // the item's epilogue. D fragment: rows g, g + 8 of m16 tile j, columns 2t, 2t + 1 of n8 tile nt
    const int row0 = item / col_blocks * kRowsPerWarp;
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) {
      const int col = (nt0 + nt) * 8 + 2 * t;
      const float b0 = nt0 + nt < col_tiles ? ep.channel(col).bias : 0.f;
      const float b1 = nt0 + nt < col_tiles ? ep.channel(col + 1).bias : 0.f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float* d = mma.acc[i >> 1][nt] + (i & 1) * 2;
        const __half2 h = __floats2half2_rn(d[0] + b0, d[1] + b1);
        os[((i >> 1) * 16 + g + (i & 1) * 8) * SW + nt * 4 + t] = *reinterpret_cast<const uint32_t*>(&h);
        d[0] = d[1] = 0.f;  // the next item's sums start at zero
      }
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const int e = lane + 32 * k, r = e / kN, nt = e % kN, row = row0 + r;
      if (row >= rows || nt0 + nt >= col_tiles) continue;
      const int64_t o = int64_t(row) * CO + (nt0 + nt) * 8;
      const uint4 sv = *reinterpret_cast<const uint4*>(os + r * SW + nt * 4);
      const __half2* sh = reinterpret_cast<const __half2*>(&sv);
      float v[8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __half22float2(sh[j]);
        v[2 * j] = f.x, v[2 * j + 1] = f.y;
      }
      if constexpr (A >= 0) {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = activate_fixed<A>(ep.act, v[j]);
      } else {
        if (ep.residual) {
          const uint4 rv = __ldg(reinterpret_cast<const uint4*>(ep.residual + o));
          const __half2* rh = reinterpret_cast<const __half2*>(&rv);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float2 f = __half22float2(rh[j]);
            v[2 * j] += f.x, v[2 * j + 1] += f.y;
          }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = activate_channel(ep.act, v[j], ep.slope, (nt0 + nt) * 8 + j);
      }
      uint4 out;
      __half2* oh = reinterpret_cast<__half2*>(&out);
#pragma unroll
      for (int j = 0; j < 4; ++j) oh[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
      *reinterpret_cast<uint4*>(y + o) = out;
    }
    __syncwarp();  // the staged tile is read before the next item overwrites it
  }
  cp_async_wait_all();
}

// The node as this variant takes it: fp16 NHWC 1x1 / stride 1 / unpadded, C_in and C_out multiples of
// 8 (16-byte channel vectors and stores), a constant weight, an optional constant bias, a residual
// (add_residual) or per-channel PRelu slopes as the 4th input, the work items countable in int.
struct Checked {
  bool ok = false;
  int rows = 0, C = 0, CO = 0;
};
Checked check(const NodeDesc& node) {
  Checked r;
  if (!conv::gemm_1x1_applicable(node) || node.layout != Layout::NHWC || node.precision != Precision::FP16 ||
      node.output_shapes.size() != 1 || !has_constant_weight(node))
    return r;
  const auto& p = std::get<Conv2DParams>(node.params);
  const bool prelu = fused_activation(node.params).kind == ActivationKind::PRelu;
  const size_t n = node.input_shapes.size();
  if (n < 2 || (p.add_residual || prelu ? n != 4 : n > 3)) return r;  // a 4th input: residual or slopes
  if (n >= 3 && (node.constants.size() < 3 || !node.constants[2])) return r;
  if (prelu && (node.constants.size() < 4 || !node.constants[3])) return r;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1];
  const int64_t rows = x[0] * x[2] * x[3];
  // work items (32 rows x a column block) and their grid-stride successors in int
  if (rows <= 0 || x[1] % 8 != 0 || w[0] % 8 != 0 || x[1] > INT_MAX / 2 || w[0] > INT_MAX / 2 ||
      (rows / kRowsPerWarp + 1) * (w[0] / 8) > INT_MAX / 4)
    return r;
  r.rows = static_cast<int>(rows);
  r.C = static_cast<int>(x[1]);
  r.CO = static_cast<int>(w[0]);
  r.ok = true;
  return r;
}

bool applicable(const NodeDesc& node) { return check(node).ok && current_device_info().cc_major >= 8; }

// n8 tiles per warp: the column tiles split into as few blocks of <= kMaxN as possible, evenly.
int tiles_per_warp(int CO) {
  const int tiles = CO / 8, blocks = (tiles + kMaxN - 1) / kMaxN;
  return (tiles + blocks - 1) / blocks;
}

// Ahead of gemm_1x1_nhwc (55) and cuDNN (50) from batch 4 on the layers it was measured to win: few
// input channels (C_in <= 32; or <= 96 into <= 32 outputs without a residual), where the output
// dwarfs the input and the old path's second pass over it costs most. One H200, fp16 batch 64, per
// node (infer --profile, 2026-11-29), ms, this variant vs cuBLAS + bias_activation_nhwc: MobileNetV2 /
// EfficientNet-B0 16 -> 96 at 112x112 0.081 vs 0.148 (ReLU6), 0.144 vs 0.169 (SiLU); 24 -> 144 at
// 56x56 0.036 vs 0.066; 32 -> 192 at 28x28 0.018 vs 0.024; 96 -> 24 at 56x56 0.024 vs 0.027. It loses
// where K is long for its M (a warp walks all of K alone): 40 -> 240 (SiLU) 0.036 vs 0.033, 64 -> 384
// at 14x14 0.017 vs 0.015, 80 -> 480 0.031 vs 0.021, 144 -> 24 + residual at 56x56 0.050 vs 0.036,
// 1152 -> 192 + residual at 7x7 0.127 vs 0.011; there it is an --autotune candidate. A plain ReLU
// stays with cuDNN, which fuses it, and SiLU with cuBLAS + the pass: the per-node profile put it ahead
// on EfficientNet-B0's SiLU layers, but the graph-replayed model got slower with them (whole model,
// fp16 batch 64: 2.736 ms with none of its 1x1 layers here, 2.768 with five, two of them SiLU).
int priority(const NodeDesc& node) {
  const Checked c = check(node);
  if (!c.ok) return 0;
  const bool residual = std::get<Conv2DParams>(node.params).add_residual;
  const ActivationKind act = fused_activation(node.params).kind;
  if (node.input_shapes[0][0] < 4 || act == ActivationKind::Relu || act == ActivationKind::Silu) return 2;
  return c.C <= 32 || (c.C <= 96 && c.CO <= 32 && !residual) ? 58 : 2;
}

struct State {
  std::unique_ptr<DeviceArray> weights;  // half, packed as the kernel reads them
  std::unique_ptr<DeviceArray> bias;     // float [C_out], or null
  std::unique_ptr<DeviceArray> slope;    // float [C_out] per-channel PRelu slopes (fuse_prelu), or null
};

std::shared_ptr<void> prepare(const NodeDesc& node) {
  const Checked c = check(node);
  if (!c.ok) throw Error("cuda conv2d.mma_1x1_nhwc: needs an NHWC fp16 1x1 convolution, C_in and C_out % 8 == 0");
  const int groups = (c.C + 31) / 32, col_tiles = c.CO / 8;
  const float* w = node.constants[1];  // [C_out][C_in]
  std::vector<float> packed(size_t(groups) * col_tiles * 32 * 8, 0.f);
  for (int gi = 0; gi < groups; ++gi)
    for (int nt = 0; nt < col_tiles; ++nt)
      for (int lane = 0; lane < 32; ++lane)
        for (int k = 0; k < 8; ++k) {
          const int co = nt * 8 + lane / 4, ci = gi * 32 + 8 * (lane % 4) + k;
          if (ci < c.C) packed[((size_t(gi) * col_tiles + nt) * 32 + lane) * 8 + k] = w[int64_t(co) * c.C + ci];
        }
  auto st = std::make_shared<State>();
  st->weights = upload(packed.data(), packed.size(), Precision::FP16);
  st->bias = float_bias(node, c.CO, "conv2d.mma_1x1_nhwc");
  st->slope = float_slope(node, c.CO, "conv2d.mma_1x1_nhwc");
  return st;
}

template <int kN>
void launch(const Checked& c, const __half* x, const uint4* wt, __half* y, const Epilogue& ep, Context& ctx) {
  const int64_t items = int64_t((c.rows + kRowsPerWarp - 1) / kRowsPerWarp) * ((c.CO / 8 + kN - 1) / kN);
  const int64_t sms = ctx.sm_count > 0 ? ctx.sm_count : 132;
  const int64_t blocks = std::min<int64_t>((items + kWarps - 1) / kWarps, sms * 16);
  dispatch_fixed_epilogue(ep, [&](auto a) {
    mma_1x1_nhwc_kernel<kN, decltype(a)::value><<<static_cast<unsigned>(blocks), kWarps * 32, 0, ctx.stream>>>(
        x, wt, y, c.rows, c.C, c.CO, ep);
  });
}

void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda conv2d.mma_1x1_nhwc: not prepared");
  const Checked c = check(call.node);
  if (!c.ok) throw Error("cuda conv2d.mma_1x1_nhwc: needs an NHWC fp16 1x1 convolution, C_in and C_out % 8 == 0");
  const conv::ConvCall cc = conv::conv_call(call);
  const auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  if ((addr(cc.x) | addr(cc.y) | addr(cc.residual)) % 16)
    throw Error("cuda conv2d.mma_1x1_nhwc: the input, output or residual is not 16-byte aligned");
  const State& st = *static_cast<const State*>(call.prepared);
  const auto ep = gemm_epilogue<__half, float>(
      data_or_null(st.bias), std::get<Conv2DParams>(call.node.params).activation, cc.residual, data_or_null(st.slope));
  const __half* x = static_cast<const __half*>(cc.x);
  const uint4* wt = st.weights->as<uint4>();
  __half* y = static_cast<__half*>(cc.y);
  Context& ctx = context_of(call);
  switch (tiles_per_warp(c.CO)) {
    case 1: launch<1>(c, x, wt, y, ep, ctx); break;
    case 2: launch<2>(c, x, wt, y, ep, ctx); break;
    case 3: launch<3>(c, x, wt, y, ep, ctx); break;
    case 4: launch<4>(c, x, wt, y, ep, ctx); break;
    case 5: launch<5>(c, x, wt, y, ep, ctx); break;
    case 6: launch<6>(c, x, wt, y, ep, ctx); break;
    case 7: launch<7>(c, x, wt, y, ep, ctx); break;
    default: launch<8>(c, x, wt, y, ep, ctx); break;
  }
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(conv2d_mma_1x1_nhwc) {
  registry.add("cuda", {
      {.op = "conv2d", .name = "mma_1x1_nhwc", .priority = 58, .priority_for = priority, .layouts = {Layout::NHWC},
       .fuses_prelu = true, .applicable = applicable, .prepare = prepare, .run = run},
  });
}

}  // namespace infer::cuda
