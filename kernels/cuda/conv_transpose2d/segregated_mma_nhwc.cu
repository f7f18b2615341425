// CUDA conv_transpose2d `segregated_mma_nhwc`: the unified kernel-segregated stride-2 transposed
// convolution (Tida et al.) as our own channels-last implicit GEMM on tensor cores (fp16, mma.sync
// m16n8k16, float accumulation). For a 4x4 kernel, stride 2 and padding 1 (output 2H x 2W: every
// DCGAN-style generator layer) output phase (py, px) is a stride-1 2x2 correlation of the input with
// the taps ky = (py + 1) % 2 + {0, 2}, kx likewise: per phase an implicit GEMM with M = the phase's
// N x H x W output pixels, N = C_out, K = 4 taps x C_in, written in place into the phase's pixels of
// the NHWC output (no zero-inserted buffer, no column buffer, no scatter).
// A block owns one phase's 4 rows x 64 (or 32) columns of phase pixels of one image and 64 output
// channels; per 32-channel group of C_in it stages (cp.async, two stages: the next group loads while
// this one multiplies) the input window those rows read (zeros outside the image: the padding) and
// the group's B slices of the four taps; each of its 8 warps (one phase row x 32 output channels)
// runs 4 (2) m16 x 4 n8 tiles over the 4 taps, A rows read as 16-byte channel vectors (gemm_tiles.cuh's
// mma helpers). The epilogue: gemm_epilogue.cuh (bias, activation or per-channel PRelu slopes as float),
// two channels per 4-byte store.
#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_mainloop.cuh"
#include "kernels/cuda/gemm_tiles.cuh"

namespace infer::cuda {
namespace {

constexpr int kRows = 4;        // phase rows per block (two warps each)
constexpr int kCoBlock = 64;    // output channels per block (two warps of four n8 tiles)
constexpr int kThreads = 256;   // 8 warps
constexpr int kWPieces = 4 * 2 * kCoBlock * 16 * 2 / 16;  // B of one group: taps x slices x channels x k halves

// Phase columns per block: 64 (four m16 tiles per warp), or 32 for maps at most 32 wide.
template <int kCols>
struct Tile {
  static constexpr int kM = kCols / 16;                 // m16 tiles per warp
  static constexpr int kWinW = kCols + 1;               // the input window of a 2x2 sub-kernel
  static constexpr int kWinPieces = (kRows + 1) * kWinW * 4;  // 16-byte pieces: 4 per pixel of 32 channels
  static constexpr int kStage = kWPieces + kWinPieces;  // one pipeline stage, in 16-byte pieces
  static constexpr size_t kSmemBytes = size_t(2) * kStage * 16;
};

struct Geo {
  int N, C, H, W, CO;  // input N x C x H x W, output N x CO x 2H x 2W
};

// Two pipeline stages in dynamic shared memory (gemm_mainloop.cuh): while the warps multiply group gi
// from one stage, cp.async fills the other with group gi + 1 (its B slices and input window).
template <int kCols>
__global__ void __launch_bounds__(kThreads, 2)
    segregated_mma_kernel(const __half* __restrict__ x, const uint4* __restrict__ wt, __half* __restrict__ y,
                          Geo geo, GemmEpilogue<__half, float> ep) {
  using TL = Tile<kCols>;
  extern __shared__ uint4 smem[];  // stage s: [B: tap][slice][64 ch][16 k] then [window: row][col][4 x 16 B]
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row = warp >> 1, chalf = warp & 1;
  const int groups = (geo.C + 31) / 32, cblocks = geo.CO / kCoBlock;
  const int tiles_x = (geo.W + kCols - 1) / kCols, tiles_y = (geo.H + kRows - 1) / kRows;
  // block -> (image, tile row, tile column, phase, channel block), channel block fastest: the blocks
  // that read the same input window run together
  int64_t b = blockIdx.x;
  const int cb = static_cast<int>(b % cblocks);
  b /= cblocks;
  const int phase = static_cast<int>(b % 4);
  b /= 4;
  const int tx = static_cast<int>(b % tiles_x);
  b /= tiles_x;
  const int ty = static_cast<int>(b % tiles_y);
  const int n = static_cast<int>(b / tiles_y);
  const int py = phase >> 1, px = phase & 1;
  const int r0 = ty * kRows, c0 = tx * kCols;
  const int top = r0 - 1 + py, left = c0 - 1 + px;  // the window's first input row and column
  const __half* img = x + int64_t(n) * geo.H * geo.W * geo.C;
  // this phase's B: [group][tap][slice][CO][16], the block's channels a 64 x 16 run per (tap, slice)
  const uint4* wphase = wt + int64_t(phase) * groups * 4 * 2 * geo.CO * 2;
  // the group iterator (gemm_mainloop.cuh, two stages): group gi's B slices and input window
  const auto load = [&](int gi, int st) {
    uint4* stage = smem + st * TL::kStage;
    const uint4* wg = wphase + int64_t(gi) * 4 * 2 * geo.CO * 2;
    for (int i = threadIdx.x; i < kWPieces; i += kThreads) {
      const int ts = i / (kCoBlock * 2), rest = i - ts * (kCoBlock * 2);  // (tap, slice), 2 pieces per channel
      cp_async16(stage + i, wg + (int64_t(ts) * geo.CO + cb * kCoBlock) * 2 + rest);
    }
    stage_nhwc_window32(stage + kWPieces, img, geo.H, geo.W, geo.C, top, left, kRows + 1, TL::kWinW, gi * 32);
  };
  auto groups_it = tile_iterator(load);
  WarpMma16816<TL::kM, 4> mma;  // the warp's kM m16 tiles x 4 n8 tiles
  gemm_mainloop<2>(groups_it, 0, groups, [&](int, int st) {
    const uint4* stage = smem + st * TL::kStage;
    const uint32_t* ws = reinterpret_cast<const uint32_t*>(stage);
    const uint4* win = stage + kWPieces;
#pragma unroll
    for (int tap = 0; tap < 4; ++tap) {
      const int a = tap >> 1, bb = tap & 1;
      // tap a reads window row `row + 1 - a`, tap b window column `col + 1 - b`
      const uint4* wrow = win + ((row + 1 - a) * TL::kWinW + 1 - bb) * 4 + t;
      // the tap's B for the warp's four n8 tiles in registers, then one m16 tile's A at a time (holding
      // every tile's A as well spilled at 64 columns)
      const uint32_t* wtap = ws + (tap * 2 * kCoBlock + chalf * 32 + g) * 8 + t;  // slice 0, n-tile 0
      uint32_t bw[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const uint32_t* w0 = wtap + nt * 8 * 8;
        bw[nt][0] = w0[0], bw[nt][1] = w0[4], bw[nt][2] = w0[kCoBlock * 8], bw[nt][3] = w0[kCoBlock * 8 + 4];
      }
#pragma unroll
      for (int j = 0; j < TL::kM; ++j) mma.group(j, wrow[(j * 16 + g) * 4], wrow[(j * 16 + g + 8) * 4], bw);
    }
  });
  const int pr = r0 + row;
  if (pr >= geo.H) return;
  const int oy = 2 * pr + py, WO = 2 * geo.W;
  const int64_t yrow = (int64_t(n) * 2 * geo.H + oy) * WO * geo.CO;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int ch = cb * kCoBlock + chalf * 32 + nt * 8 + 2 * t;
    const auto ch0 = ep.channel(ch), ch1 = ep.channel(ch + 1);
#pragma unroll
    for (int j = 0; j < TL::kM; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int pc = c0 + j * 16 + g + 8 * h;
        if (pc >= geo.W) continue;
        ep.store_pair(y, yrow + int64_t(2 * pc + px) * geo.CO + ch, ch0, ch1, mma.acc[j][nt][2 * h],
                      mma.acc[j][nt][2 * h + 1]);
      }
  }
}

template <int kCols>
int64_t block_count(const Geo& g) {
  return int64_t(g.N) * 4 * ((g.H + kRows - 1) / kRows) * ((g.W + kCols - 1) / kCols) * (g.CO / kCoBlock);
}

template <int kCols>
void launch(const Geo& g, const __half* x, const uint4* wt, __half* y, const GemmEpilogue<__half, float>& ep,
            cudaStream_t stream) {
  segregated_mma_kernel<kCols><<<static_cast<unsigned>(block_count<kCols>(g)), kThreads,
                                  Tile<kCols>::kSmemBytes, stream>>>(x, wt, y, g, ep);
}

// The two stages need more than the 48 KiB of dynamic shared memory a launch gets by default: raised
// in prepare(), outside any CUDA-graph capture.
void allow_smem() {
  INFER_CUDA_CHECK(cudaFuncSetAttribute(segregated_mma_kernel<32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(Tile<32>::kSmemBytes)));
  INFER_CUDA_CHECK(cudaFuncSetAttribute(segregated_mma_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(Tile<64>::kSmemBytes)));
}

struct Checked {
  bool ok = false;
  Geo g{};
  Activation act;
};

// fp16 NHWC, groups and dilation 1, a constant weight, stride 2 with a 4x4 kernel and padding 1 on
// every side (output 2H x 2W), C_in a multiple of 8 (channel vectors never straddle C_in), C_out a
// multiple of 64 (whole channel blocks), a device with mma.sync (sm_80+).
Checked check(const NodeDesc& node) {
  Checked c;
  if (!conv_transpose2d_plain(node) || node.layout != Layout::NHWC || node.precision != Precision::FP16 ||
      !has_constant_weight(node))
    return c;
  for (size_t i = 2; i < node.input_shapes.size(); ++i)  // the bias and PRelu slopes, prepared as float
    if (node.constants.size() <= i || !node.constants[i]) return c;
  const ConvTranspose2DDims d = conv_transpose2d_dims(node, "cuda");
  if (d.sh != 2 || d.sw != 2 || d.KH != 4 || d.KW != 4 || d.pt != 1 || d.pb != 1 || d.pl != 1 || d.pr != 1 ||
      d.HO != 2 * d.H || d.WO != 2 * d.W || d.CI % 8 != 0 || d.CO % kCoBlock != 0)
    return c;
  for (int64_t v : {d.N, d.CI, d.H, d.W, d.CO})
    if (v <= 0 || v >= (int64_t(1) << 30)) return c;
  c.g = Geo{int(d.N), int(d.CI), int(d.H), int(d.W), int(d.CO)};
  if (block_count<32>(c.g) > INT_MAX) return c;
  c.act = d.act;
  c.ok = true;
  return c;
}

bool applicable(const NodeDesc& node) { return check(node).ok && current_device_info().cc_major >= 8; }

// Measured against cuDNN's dgrad (H100, EB-GAN fp16, per-layer profile, 2026-11-25): at batch 8 it
// wins on the layers with C_in >= 128 (64x64 output from 256 channels: 0.061 vs 0.087 ms; 128x128 from
// 128: 0.088 vs 0.109 ms) and loses on 256x256 from 64 channels (0.214 vs 0.157 ms); at batch 64 it
// loses on all three (0.38 / 0.56 / 1.62 ms vs 0.17 / 0.29 / 0.83 ms: every block re-stages its B
// slices, 16 KiB per channel group, and the 64-column tile runs at the register limit). So it is the
// default (55, ahead of cudnn's 50) at batch 8 to 16 (where cudnn takes NHWC too; below, the NCHW
// kernels win) with C_in >= 128 and maps at least 32 wide, and
// an --autotune candidate (3) elsewhere.
int priority(const NodeDesc& node) {
  const Checked c = check(node);
  if (!c.ok) return 0;
  return c.g.N >= 8 && c.g.N <= 16 && c.g.C >= 128 && c.g.W >= 32 ? 55 : 3;
}

struct State {
  std::unique_ptr<DeviceArray> weights;  // half [phase][group][tap][slice][CO][16 k]
  std::unique_ptr<DeviceArray> bias;     // float [CO], or null
  std::unique_ptr<DeviceArray> slope;    // float [CO] per-channel PRelu slopes (fuse_prelu), or null
};

std::shared_ptr<void> prepare(const NodeDesc& node) {
  const Checked c = check(node);
  if (!c.ok)
    throw Error("cuda conv_transpose2d.segregated_mma_nhwc: needs NHWC fp16, stride 2, a 4x4 kernel, "
                "padding 1, C_in % 8 == 0 and C_out % 64 == 0");
  const Geo& g = c.g;
  const int groups = (g.C + 31) / 32;
  const float* w = node.constants[1];  // [C_in][C_out][4][4]
  std::vector<float> t(size_t(4) * groups * 4 * 2 * g.CO * 16, 0.f);
  for (int phase = 0; phase < 4; ++phase)
    for (int gi = 0; gi < groups; ++gi)
      for (int tap = 0; tap < 4; ++tap) {
        const int ky = (phase / 2 + 1) % 2 + 2 * (tap / 2), kx = (phase % 2 + 1) % 2 + 2 * (tap % 2);
        for (int s = 0; s < 2; ++s)
          for (int co = 0; co < g.CO; ++co)
            for (int k = 0; k < 16; ++k) {
              const int ci = gi * 32 + mma_k_channel(s, k);
              if (ci >= g.C) continue;
              t[((((size_t(phase) * groups + gi) * 4 + tap) * 2 + s) * g.CO + co) * 16 + k] =
                  w[((int64_t(ci) * g.CO + co) * 4 + ky) * 4 + kx];
            }
      }
  allow_smem();
  auto st = std::make_shared<State>();
  st->weights = upload(t.data(), t.size(), Precision::FP16);
  st->bias = float_bias(node, g.CO, "conv_transpose2d.segregated_mma_nhwc");
  st->slope = float_slope(node, g.CO, "conv_transpose2d.segregated_mma_nhwc");
  return st;
}

void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda conv_transpose2d.segregated_mma_nhwc: not prepared");
  const Checked c = check(call.node);
  if (!c.ok) throw Error("cuda conv_transpose2d.segregated_mma_nhwc: the node does not fit the variant");
  if (reinterpret_cast<uintptr_t>(call.inputs[0]) % 16 != 0 || reinterpret_cast<uintptr_t>(call.outputs[0]) % 4 != 0)
    throw Error("cuda conv_transpose2d.segregated_mma_nhwc: input or output not aligned");
  const State& st = *static_cast<const State*>(call.prepared);
  Context& ctx = context_of(call);
  const Geo& g = c.g;
  const auto* x = reinterpret_cast<const __half*>(call.inputs[0]);
  const uint4* wt = st.weights->as<uint4>();
  auto* y = reinterpret_cast<__half*>(call.outputs[0]);
  const auto ep = gemm_epilogue<__half, float>(data_or_null(st.bias), c.act, nullptr, data_or_null(st.slope));
  if (g.W <= 32)
    launch<32>(g, x, wt, y, ep, ctx.stream);
  else
    launch<64>(g, x, wt, y, ep, ctx.stream);
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(conv_transpose2d_segregated_mma) {
  registry.add("cuda", {
      {.op = "conv_transpose2d", .name = "segregated_mma_nhwc", .priority = 55, .priority_for = priority,
       .layouts = {Layout::NHWC}, .fuses_prelu = true, .applicable = applicable, .prepare = prepare, .run = run},
  });
}

}  // namespace infer::cuda
