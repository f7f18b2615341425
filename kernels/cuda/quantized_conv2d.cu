// CUDA quantized_conv2d `mma_nhwc` / `mma_nhwc_wide`: a QDQ model's convolution as an implicit GEMM
// (CUTLASS's Conv2dFprop scheme, in plain CUDA-C) on int8 tensor cores, uint8 activations x int8 weights
// with int32 sums, and the reference's float epilogue (scales, bias, residual, activation, then float /
// half or quantize_linear to 8 bits). NHWC, groups 1, C_in % 16 == 0, C_out % 8 == 0, KH*KW*C_in <=
// 65535 (int32 sums exact), sm_80+. Thread map: see qconv_nhwc_kernel.
#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/kernel.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm_mainloop.cuh"
#include "kernels/cuda/gemm_tiles.cuh"
#include "kernels/cuda/quantize.cuh"

namespace infer::cuda {
namespace {

constexpr int kBM = 128;          // output pixels of a block tile
constexpr int kStages = 4;        // K steps in flight (cp.async)
constexpr int kStepChannels = 64; // input channels (bytes) of one K step: two k32 slices
constexpr int64_t kMaxK = 65535;  // 255 * 128 * K < 2^31: the int32 sums cannot overflow

struct Geometry {
  int H = 0, W = 0, C = 0;  // input NHWC (per image)
  int HO = 0, WO = 0, CO = 0;
  int KW = 0, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  int rows = 0;    // N * HO * WO output pixels
  int groups = 0;  // 64-channel groups per tap
  int steps = 0;   // K steps: taps * groups
};

// The per-channel epilogue: corr[c] = zp * sum of channel c's weights (the zero point taken off the
// sums), mult[c] = x_scale * w_scale[c], then + bias[c] (+ residual), the activation; 8-bit output:
// quantize_linear(v, y_scale, y_zero) in [y_lo, y_hi].
struct QEpilogue {
  const int* corr = nullptr;
  const float* mult = nullptr;
  const float* bias = nullptr;
  const void* residual = nullptr;  // the session's storage type, y's layout; null without
  DeviceActivation act;
  float y_scale = 1.f, y_zero = 0.f, y_lo = 0.f, y_hi = 255.f;
};

// v[e] = activate(a, v[e]) with the kind's switch outside the loop for the common ones (the switch per
// element costs an epilogue of few multiply-adds its instruction budget).
template <int V>
__device__ __forceinline__ void activate_all(const DeviceActivation& a, float (&v)[V]) {
  switch (a.kind) {
    case ActivationKind::None: return;
    case ActivationKind::Relu:
#pragma unroll
      for (int e = 0; e < V; ++e) v[e] = activate_fixed<int(ActivationKind::Relu)>(a, v[e]);
      return;
    case ActivationKind::Clip:
#pragma unroll
      for (int e = 0; e < V; ++e) v[e] = activate_fixed<int(ActivationKind::Clip)>(a, v[e]);
      return;
    default:
#pragma unroll
      for (int e = 0; e < V; ++e) v[e] = activate(a, v[e]);
  }
}

// A block tile of kBM pixels x BN output channels, warps of WM pixels x BN / 2 channels (kBM / WM x 2
// warps): shared memory for the pipeline's stages (A: kBM rows x 4 16-byte chunks, B: BN rows x 4
// chunks) and, after the K loop, the float tile of the epilogue.
template <int BN, int WM>
struct TileShape {
  static constexpr int kThreads = kBM / WM * 2 * 32;
  static constexpr int kM = WM / 16;  // m16 tiles per warp
  static constexpr int kN = BN / 16;  // n8 tiles per warp
  static constexpr int a_per_thread = kBM * 4 / kThreads;  // A chunks a thread copies
  static constexpr int a_chunks = kBM * 4, b_chunks = BN * 4;
  static constexpr int stage_chunks = a_chunks + b_chunks;
  static constexpr int out_ld = BN + 4;  // floats per staged row (padded against bank conflicts)
  static constexpr size_t smem =
      std::max<size_t>(size_t(kStages) * stage_chunks * 16, size_t(kBM) * out_ld * sizeof(float));
};

// y [M = N*HO*WO, C_out] = im2col(x) [M, KH*KW*C_in] * W^T with mma.sync m16n8k32 u8 x s8, then
// float(acc - zp * sum(w[c])) * (x_scale * w_scale[c]) + bias[c], the residual, the activation, the store.
// Thread map: a block of kBM / WM x 2 warps owns 128 output pixels x BN (32 / 64 / 128) output channels,
// warp w pixels WM (w % (kBM / WM)) .. and channels BN / 2 (w / (kBM / WM)) ..; a K step is one filter
// tap x 64 input channels, its A tile (128 pixels x 64 bytes, gathered from the NHWC input, zero-point
// bytes where the tap falls in the padding, so (q - zp) is 0 there exactly) and B tile (BN x 64 bytes of
// packed weights) copied by cp.async through gemm_mainloop.cuh's 4-stage pipeline and read with
// gemm_tiles.cuh's channel-vector fragment map (conflict-free 16-byte shared loads). The epilogue stages
// the float tile in the same shared memory and writes 16-byte (8-byte for bytes) chunks, a row's on
// consecutive threads, the residual read the same way. A float / half input was quantized into the
// workspace first (quantize.cuh's rounding); an 8-bit i8 input is read as u8 with its sign bit flipped
// (q + 128, zero point + 128: the same differences).
// T: the session's float storage (residual, float output); kOut8: y is 8-bit; kFlip: x holds i8 bytes.
// Grid: (pixel tiles, channel tiles). Weights wt: [step][C_out][4 chunks of 16 bytes] (channels gi * 64
// + 16 chunk .. + 15 of the step's tap), so a block's B tile is BN * 64 contiguous bytes.
template <int BN, int WM, class T, bool kOut8, bool kFlip>
__global__ void __launch_bounds__(TileShape<BN, WM>::kThreads, 2)  // two blocks an SM: <= 128 registers at 256 threads
    qconv_nhwc_kernel(const uint8_t* __restrict__ x, const uint4* __restrict__ wt, void* __restrict__ y, Geometry g,
                      uint32_t pad_word, QEpilogue ep) {
  using Tile = TileShape<BN, WM>;
  constexpr int kM = Tile::kM, kN = Tile::kN, kThreads = Tile::kThreads, kA = Tile::a_per_thread;
  extern __shared__ uint4 smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, t = lane & 3;
  const int wm = (warp % (kBM / WM)) * WM, wn = (warp / (kBM / WM)) * (BN / 2);
  const int row0 = blockIdx.x * kBM, col0 = blockIdx.y * BN;

  // The A rows this thread copies (tid / 4 + i * kThreads / 4, chunk tid % 4): the image's offset (-1
  // past the last pixel) and the tap-(0, 0) input position.
  int64_t base[kA];
  int iy0[kA], ix0[kA];
  {
    const int plane = g.HO * g.WO;
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const int r = row0 + (tid >> 2) + kThreads / 4 * i;
      const int n = r / plane, rem = r - n * plane, oy = rem / g.WO, ox = rem - oy * g.WO;
      base[i] = r < g.rows ? int64_t(n) * g.H * g.W * g.C : -1;
      iy0[i] = oy * g.sh - g.pt;
      ix0[i] = ox * g.sw - g.pl;
    }
  }
  const uint4 pad = make_uint4(pad_word, pad_word, pad_word, pad_word), zero = make_uint4(0, 0, 0, 0);
  // gemm_mainloop copies the steps in order, each once: the step's tap and channel group advance here
  // instead of being divided out of k.
  int gi = 0, ky = 0, kx = 0;
  auto copy = [&](int k, int stage) {
    uint4* as = smem + stage * Tile::stage_chunks;
    uint4* bs = as + Tile::a_chunks;
    const int c = gi * kStepChannels + (tid & 3) * 16;
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const int q = tid + kThreads * i;  // row tid / 4 + i * kThreads / 4, chunk tid % 4
      const int iy = iy0[i] + ky * g.dh, ix = ix0[i] + kx * g.dw;
      if (base[i] < 0 || c >= g.C)
        as[q] = zero;  // past the last pixel (discarded) or past C_in (zero weights)
      else if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W)
        as[q] = pad;   // the convolution's padding: the zero point
      else
        cp_async16(as + q, x + base[i] + (int64_t(iy) * g.W + ix) * g.C + c);
    }
#pragma unroll
    for (int q = tid; q < Tile::b_chunks; q += kThreads) {
      const int co = col0 + (q >> 2);
      if (co < g.CO)
        cp_async16(bs + q, wt + (int64_t(k) * g.CO + co) * 4 + (q & 3));
      else
        bs[q] = zero;
    }
    if (++gi == g.groups) {
      gi = 0;
      if (++kx == g.KW) kx = 0, ++ky;
    }
  };
  int acc[kM][kN][4] = {};
  auto mma = [&](int, int stage) {
    const uint4* as = smem + stage * Tile::stage_chunks;
    const uint4* bs = as + Tile::a_chunks;
    uint32_t b[kN][4];
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) {
      const uint4 v = bs[(wn + nt * 8 + gq) * 4 + t];
      b[nt][0] = v.x, b[nt][1] = v.y, b[nt][2] = v.z, b[nt][3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < kM; ++j) {
      uint4 r0 = as[(wm + 16 * j + gq) * 4 + t], r1 = as[(wm + 16 * j + gq + 8) * 4 + t];
      if constexpr (kFlip) {
        r0.x ^= 0x80808080u, r0.y ^= 0x80808080u, r0.z ^= 0x80808080u, r0.w ^= 0x80808080u;
        r1.x ^= 0x80808080u, r1.y ^= 0x80808080u, r1.z ^= 0x80808080u, r1.w ^= 0x80808080u;
      }
      const uint32_t a0[4] = {r0.x, r1.x, r0.y, r1.y}, a1[4] = {r0.z, r1.z, r0.w, r1.w};
#pragma unroll
      for (int nt = 0; nt < kN; ++nt) {
        mma_16832(acc[j][nt], a0, b[nt][0], b[nt][1]);
        mma_16832(acc[j][nt], a1, b[nt][2], b[nt][3]);
      }
    }
  };
  auto it = tile_iterator(copy);
  gemm_mainloop<kStages>(it, 0, g.steps, mma);
  cp_async_wait_all();
  __syncthreads();  // every warp is done with the stages: the shared memory becomes the output tile

  // Epilogue, 1: the sums' float values (zero point off, scales, bias) into the tile. D fragment: rows
  // gq, gq + 8 of m16 tile j, columns 2t, 2t + 1 of n8 tile nt.
  float* os = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int nt = 0; nt < kN; ++nt) {
    const int cl = wn + nt * 8 + 2 * t, col = col0 + cl;
    if (col >= g.CO) continue;  // C_out % 8 == 0: a whole n8 tile is in or out
    const int c0 = __ldg(ep.corr + col), c1 = __ldg(ep.corr + col + 1);
    const float m0 = __ldg(ep.mult + col), m1 = __ldg(ep.mult + col + 1);
    const float b0 = __ldg(ep.bias + col), b1 = __ldg(ep.bias + col + 1);
#pragma unroll
    for (int i = 0; i < 2 * kM; ++i) {
      const int* d = acc[i >> 1][nt] + (i & 1) * 2;
      const int rl = wm + (i >> 1) * 16 + gq + (i & 1) * 8;
      *reinterpret_cast<float2*>(os + rl * Tile::out_ld + cl) =
          make_float2(__fadd_rn(__fmul_rn(float(d[0] - c0), m0), b0), __fadd_rn(__fmul_rn(float(d[1] - c1), m1), b1));
    }
  }
  __syncthreads();

  // 2: V consecutive channels a thread (16-byte stores of float / half, 8-byte ones of bytes), a row's
  // chunks on consecutive threads: the residual, the activation, the store. (Loading a thread's
  // residual chunks all first, to have them in flight together, measured slower: H200, int8 ResNet-50
  // fp16 batch 64 3.56 -> 3.67 ms, batch 1 1.09 -> 1.21.)
  constexpr int V = kOut8 ? 8 : 16 / int(sizeof(T));
  constexpr int kChunksPerRow = BN / V;
  const float y_rcp = __frcp_rn(ep.y_scale);
  for (int q = tid; q < kBM * kChunksPerRow; q += kThreads) {
    const int rl = q / kChunksPerRow, cl = (q - rl * kChunksPerRow) * V;
    const int row = row0 + rl, col = col0 + cl;
    if (row >= g.rows || col >= g.CO) continue;
    float v[V];
#pragma unroll
    for (int e = 0; e < V; e += 4) {
      const float4 f = *reinterpret_cast<const float4*>(os + rl * Tile::out_ld + cl + e);
      v[e] = f.x, v[e + 1] = f.y, v[e + 2] = f.z, v[e + 3] = f.w;
    }
    const int64_t o = int64_t(row) * g.CO + col;
    if (ep.residual) {
      const T* r = static_cast<const T*>(ep.residual) + o;
#pragma unroll
      for (int e = 0; e < V; e += 16 / int(sizeof(T))) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(r + e));
        const T* rv = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int u = 0; u < 16 / int(sizeof(T)); ++u) v[e + u] += to_float(rv[u]);
      }
    }
    activate_all(ep.act, v);
    if constexpr (kOut8) {
      uint2 out;
      uint32_t w[2] = {0, 0};
#pragma unroll
      for (int e = 0; e < V; ++e)
        w[e >> 2] |= uint32_t(quantize_byte(v[e], ep.y_scale, y_rcp, ep.y_zero, ep.y_lo, ep.y_hi)) << (8 * (e & 3));
      out.x = w[0], out.y = w[1];
      *reinterpret_cast<uint2*>(static_cast<uint8_t*>(y) + o) = out;
    } else {
      uint4 out;
      T* ov = reinterpret_cast<T*>(&out);
#pragma unroll
      for (int e = 0; e < V; ++e) ov[e] = from_float<T>(v[e]);
      *reinterpret_cast<uint4*>(static_cast<T*>(y) + o) = out;
    }
  }
}

// x (float or half, NHWC, n % 4 == 0 elements) quantized into u8 bytes: quantize_linear(x, scale, zero)
// of x_dtype, plus 128 for i8 (the kernel's u8 form of it), four elements a thread.
template <class T>
__global__ void quantize_input_kernel(const T* __restrict__ x, uint32_t* __restrict__ q, int64_t quads, float scale,
                                      float zero, float lo, float hi, int shift) {
  const float rcp = __frcp_rn(scale);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < quads; i += int64_t(gridDim.x) * blockDim.x) {
    float v[4];
    if constexpr (sizeof(T) == 2) {
      const uint2 raw = *reinterpret_cast<const uint2*>(x + 4 * i);
      const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
      v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
    } else {
      const float4 f = *reinterpret_cast<const float4*>(x + 4 * i);
      v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    }
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      word |= uint32_t(int(quantize_float(v[j], scale, rcp, zero, lo, hi)) + shift) << (8 * j);
    q[i] = word;
  }
}

// The node as this variant takes it (see the file comment), its geometry in int.
struct Checked {
  bool ok = false;
  Geometry g;
  int64_t K = 0;
};
Checked check(const NodeDesc& node) {
  Checked r;
  const auto* qp = std::get_if<QuantizedConv2DParams>(&node.params);
  if (!qp || node.layout != Layout::NHWC || node.output_shapes.size() != 1 || node.input_shapes.size() < 4) return r;
  const Conv2DParams& p = qp->conv;
  if (p.groups != 1 || p.activation.kind == ActivationKind::PRelu) return r;
  if (node.constants.size() < 4 || !node.constants[1] || !node.constants[2] || !node.constants[3]) return r;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return r;
  for (const Shape* s : {&x, &w, &y})
    for (int64_t d : *s)
      if (d <= 0 || d >= (int64_t(1) << 30)) return r;
  if (x[1] % 16 != 0 || w[0] % 8 != 0 || w[1] != x[1]) return r;
  r.K = w[1] * w[2] * w[3];
  if (r.K > kMaxK) return r;
  const int64_t rows = y[0] * y[2] * y[3], groups = (x[1] + kStepChannels - 1) / kStepChannels;
  const int64_t steps = w[2] * w[3] * groups;
  // pixels (+ a tile), steps and every input offset within an image in int; channel tiles in grid.y
  if (rows >= INT_MAX - kBM || steps >= INT_MAX || x[1] * x[2] * x[3] >= INT_MAX || w[0] / 32 >= 65535) return r;
  Geometry& g = r.g;
  g.H = int(x[2]), g.W = int(x[3]), g.C = int(x[1]);
  g.HO = int(y[2]), g.WO = int(y[3]), g.CO = int(w[0]);
  g.KW = int(w[3]);
  g.sh = p.stride_h, g.sw = p.stride_w, g.dh = p.dilation_h, g.dw = p.dilation_w;
  g.pt = p.pad.top, g.pl = p.pad.left;
  g.rows = int(rows), g.groups = int(groups), g.steps = int(steps);
  r.ok = true;
  return r;
}

bool applicable(const NodeDesc& node) { return check(node).ok && current_device_info().cc_major >= 8; }

// The input quantized into the workspace (one byte an element) unless it is 8-bit already.
size_t workspace_bytes(const NodeDesc& node) {
  const auto& p = std::get<QuantizedConv2DParams>(node.params);
  return p.x_quantized ? 0 : static_cast<size_t>(shape_numel(node.input_shapes[0]));
}

// Output channels of a block tile: 128 where C_out reaches it, else 64 or 32 (fewer idle columns).
int block_width(int CO) { return CO >= 128 ? 128 : CO > 32 ? 64 : 32; }

struct State;
using Launcher = void (*)(const State&, const uint8_t*, void*, uint32_t, const QEpilogue&, Context&);

struct State {
  Checked c;
  Launcher launch = nullptr;             // the kernel instance for this node (block width, types)
  std::unique_ptr<DeviceArray> weights;  // int8, [step][n8 tile][lane][16]
  std::unique_ptr<DeviceArray> corr;     // int32 [C_out]
  std::unique_ptr<DeviceArray> mult;     // float [C_out]
  std::unique_ptr<DeviceArray> bias;     // float [C_out]
  int zero_u8 = 0;                       // x's zero point in the kernel's u8 form
};

template <int BN, int WM, class T, bool kOut8, bool kFlip>
void launch(const State& st, const uint8_t* x, void* y, uint32_t pad_word, const QEpilogue& ep, Context& ctx) {
  using Tile = TileShape<BN, WM>;
  const Geometry& g = st.c.g;
  const dim3 grid(static_cast<unsigned>((g.rows + kBM - 1) / kBM), static_cast<unsigned>((g.CO + BN - 1) / BN));
  qconv_nhwc_kernel<BN, WM, T, kOut8, kFlip><<<grid, Tile::kThreads, Tile::smem, ctx.stream>>>(
      x, st.weights->as<uint4>(), y, g, pad_word, ep);
}

// The instance for a node, its shared memory allowed past 48 KB once (here in prepare(): never inside a
// capture).
template <int BN, int WM, class T, bool kOut8, bool kFlip>
Launcher instance() {
  INFER_CUDA_CHECK(cudaFuncSetAttribute(qconv_nhwc_kernel<BN, WM, T, kOut8, kFlip>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, int(TileShape<BN, WM>::smem)));
  return launch<BN, WM, T, kOut8, kFlip>;
}
// Tiles: 128 x 128 with 64 x 64 warp tiles (`wide`) or 32 x 64 ones; 128 x 64 and 128 x 32 with 32-row
// warp tiles where C_out is narrower.
template <class T, bool kOut8, bool kFlip>
Launcher instance_for(int CO, bool wide) {
  switch (block_width(CO)) {
    case 32: return instance<32, 32, T, kOut8, kFlip>();
    case 64: return instance<64, 32, T, kOut8, kFlip>();
    default: return wide ? instance<128, 64, T, kOut8, kFlip>() : instance<128, 32, T, kOut8, kFlip>();
  }
}
Launcher pick_instance(const NodeDesc& node, int CO, bool wide) {
  const auto& p = std::get<QuantizedConv2DParams>(node.params);
  const bool out8 = p.y_dtype != DType::F32, flip = p.x_quantized && p.x_dtype == DType::I8;
  Launcher l = nullptr;
  dispatch(node.precision, [&](auto tag) {
    using T = decltype(tag);
    l = out8 ? (flip ? instance_for<T, true, true>(CO, wide) : instance_for<T, true, false>(CO, wide))
             : (flip ? instance_for<T, false, true>(CO, wide) : instance_for<T, false, false>(CO, wide));
  });
  return l;
}

std::shared_ptr<void> prepare(const NodeDesc& node, bool wide) {
  const Checked c = check(node);
  if (!c.ok)
    throw Error("cuda quantized_conv2d.mma_nhwc: needs an NHWC ungrouped convolution, C_in % 16 == 0, C_out % 8 == 0, "
                "KH*KW*C_in <= 65535");
  const auto& p = std::get<QuantizedConv2DParams>(node.params);
  const Geometry& g = c.g;
  const int KH = int(node.input_shapes[1][2]), taps = KH * g.KW;
  const float* w = node.constants[1];  // [C_out][C_in][KH][KW], int8 values
  auto st = std::make_shared<State>();
  st->c = c;
  st->zero_u8 = p.x_zero_point + (p.x_dtype == DType::I8 ? 128 : 0);
  std::vector<int8_t> packed(size_t(g.steps) * g.CO * kStepChannels, 0);
  std::vector<int> corr(size_t(g.CO), 0);
  for (int co = 0; co < g.CO; ++co)
    for (int ci = 0; ci < g.C; ++ci)
      for (int tap = 0; tap < taps; ++tap) {
        const float v = w[(int64_t(co) * g.C + ci) * taps + tap];
        if (!(v >= -128.f && v <= 127.f) || v != std::nearbyint(v))
          throw Error("cuda quantized_conv2d.mma_nhwc: weight_q holds " + std::to_string(v) + ", not an int8 value");
        const int gi = ci / kStepChannels, step = tap * g.groups + gi, within = ci % kStepChannels;
        packed[(size_t(step) * g.CO + co) * kStepChannels + within] = static_cast<int8_t>(v);
        corr[size_t(co)] += int(v);
      }
  std::vector<float> mult(size_t(g.CO)), bias(size_t(g.CO));
  const bool per_channel = node.input_shapes[2][0] != 1;
  for (int co = 0; co < g.CO; ++co) {
    corr[size_t(co)] *= st->zero_u8;
    mult[size_t(co)] = p.x_scale * node.constants[2][per_channel ? co : 0];
    bias[size_t(co)] = node.constants[3][co];
  }
  st->weights = upload_bytes(packed.data(), packed.size());
  st->corr = upload_bytes(corr.data(), corr.size() * sizeof(int));
  st->mult = upload_bytes(mult.data(), mult.size() * sizeof(float));
  st->bias = upload_bytes(bias.data(), bias.size() * sizeof(float));
  st->launch = pick_instance(node, g.CO, wide);
  return st;
}

void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda quantized_conv2d.mma_nhwc: not prepared");
  const State& st = *static_cast<const State*>(call.prepared);
  const auto& p = std::get<QuantizedConv2DParams>(call.node.params);
  const void* residual = p.conv.add_residual ? call.inputs.at(4) : nullptr;
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  if ((addr(call.inputs[0]) | addr(call.outputs[0]) | addr(residual)) % 16 || (!p.x_quantized && addr(call.workspace) % 16))
    throw Error("cuda quantized_conv2d.mma_nhwc: an input, the output or the workspace is not 16-byte aligned");
  Context& ctx = context_of(call);
  QEpilogue ep;
  ep.corr = st.corr->as<int>();
  ep.mult = st.mult->as<float>();
  ep.bias = st.bias->as<float>();
  ep.residual = residual;
  ep.act = device_activation(p.conv.activation);
  const bool out8 = p.y_dtype != DType::F32;
  if (out8) {
    ep.y_scale = p.y_scale;
    ep.y_zero = float(p.y_zero_point);
    ep.y_lo = p.y_dtype == DType::I8 ? -128.f : 0.f;
    ep.y_hi = p.y_dtype == DType::I8 ? 127.f : 255.f;
  }
  const bool flip = p.x_quantized && p.x_dtype == DType::I8;
  // the padding's bytes: x's zero point as stored (an i8 input's own byte, flipped with the rest)
  const uint32_t pad_byte = static_cast<uint8_t>(flip ? p.x_zero_point : st.zero_u8);
  const uint32_t pad_word = pad_byte * 0x01010101u;
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const uint8_t* x = reinterpret_cast<const uint8_t*>(call.inputs[0]);
    if (!p.x_quantized) {
      const int64_t quads = shape_numel(call.node.input_shapes[0]) / 4;
      const float lo = p.x_dtype == DType::I8 ? -128.f : 0.f, hi = p.x_dtype == DType::I8 ? 127.f : 255.f;
      quantize_input_kernel<T><<<grid_for(quads), 256, 0, ctx.stream>>>(
          reinterpret_cast<const T*>(call.inputs[0]), static_cast<uint32_t*>(call.workspace), quads, p.x_scale,
          float(p.x_zero_point), lo, hi, p.x_dtype == DType::I8 ? 128 : 0);
      INFER_CUDA_CHECK_LAUNCH();
      x = static_cast<const uint8_t*>(call.workspace);
    }
    st.launch(st, x, call.outputs[0], pad_word, ep, ctx);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

// mma_nhwc_wide: the 128 x 128 tiles with 64 x 64 warp tiles (half the shared-memory reads a multiply),
// for C_out >= 128; mma_nhwc: 32 x 64 ones (twice the warps a block).
bool wide_applicable(const NodeDesc& node) { return applicable(node) && check(node).g.CO >= 128; }

}  // namespace

INFER_REGISTER_KERNELS(quantized_conv2d_mma_nhwc) {
  registry.add("cuda", {
      {.op = "quantized_conv2d", .name = "mma_nhwc", .priority = 50, .layouts = {Layout::NHWC},
       .applicable = applicable, .workspace_bytes = workspace_bytes,
       .prepare = [](const NodeDesc& node) { return prepare(node, false); }, .run = run},
      {.op = "quantized_conv2d", .name = "mma_nhwc_wide", .priority = 49, .layouts = {Layout::NHWC},
       .applicable = wide_applicable, .workspace_bytes = workspace_bytes,
       .prepare = [](const NodeDesc& node) { return prepare(node, true); }, .run = run},
  });
}

}  // namespace infer::cuda
