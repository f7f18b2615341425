// CUDA conv2d `mma_small_cin_nhwc` (fp16, NHWC): an implicit GEMM on tensor cores (mma.sync m16n8k16)
// for convolutions with few input channels (C_in <= 4: an image input, VGG conv1_1, AlexNet conv1,
// ResNet's 7x7 stem), which are memory-bound: VGG-16 conv1_1 at batch 64 reads 19 MB and writes 411 MB.
// M = output pixels, N = C_out (a multiple of 8, in chunks of 64), K = KH x KW x C_in in the weight's
// natural (ky, kx, c) order, zero-padded to a multiple of 16 (no width folding, which multiplies K and N
// by its fold factor, F = 8 for C_in = 3; no column buffer). A block owns 4 output rows x 32 columns of
// one image (a warp per row, two m16 tiles; gemm_mainloop.cuh's one-stage loop over a block's tiles): it
// stages the input window those read in shared memory (coalesced, zeros outside the image: the padding;
// any stride and dilation), and each lane builds its A fragments from there through a table of K
// offsets; B (the weights, [C_out][K + 8] half) stays in shared memory; sums are float. The epilogue
// (gemm_epilogue.cuh; the bias as the sums' start) stages a warp's 32 x 64 outputs in shared memory and
// writes them as 16-byte stores, 512 contiguous bytes per warp instruction (near the copy rate).
#include <algorithm>
#include <memory>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv2d/common.h"
#include "infer/kernel.h"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_mainloop.cuh"
#include "kernels/cuda/gemm_tiles.cuh"

namespace infer::cuda {
namespace {

constexpr int kWarps = 4;           // warps per block: one output row each
constexpr int kTiles = 2;           // m16 tiles per warp: 32 output columns
constexpr int kCols = 16 * kTiles;
constexpr int kChunk = 64;          // output channels per pass (8 n8 tiles)
constexpr int kStageStride = kChunk + 8;  // floats per staged output pixel: conflict-free float2 stores
constexpr int kMaxCin = 4;
constexpr int kMaxK = 512;          // KH x KW x C_in, padded: 11 x 11 x 3 = 363 (AlexNet conv1) fits
constexpr size_t kMaxSmem = 160 * 1024;
constexpr int kBatch = 2;           // window pixels per thread per load batch

struct Geo {
  int N, C, H, W, HO, WO, KH, KW, sh, sw, pt, pl, dh, dw;
};

// The input window of a block's 4 x 32 outputs: rows x cols pixels of C channels.
__host__ __device__ inline int window_rows(const Geo& g) { return (kWarps - 1) * g.sh + (g.KH - 1) * g.dh + 1; }
__host__ __device__ inline int window_cols(const Geo& g) { return (kCols - 1) * g.sw + (g.KW - 1) * g.dw + 1; }

// Shared memory: weights [CO][Kp + 8] half, the K table (int per k), the bias (float [CO]), the warps'
// output staging [kCols][kStageStride] float each, the input window (half, rounded up to 16 bytes).
size_t smem_bytes(const Geo& g, int CO, int Kp) {
  return size_t(CO) * (Kp + 8) * 2 + size_t(Kp) * 4 + size_t(CO) * 4 + size_t(kWarps) * kCols * kStageStride * 4 +
         (size_t(window_rows(g)) * window_cols(g) * g.C * 2 + 15) / 16 * 16;
}

// A 2-byte shared-memory load from a 32-bit shared address (no generic-address arithmetic per load).
__device__ __forceinline__ unsigned lds_u16(unsigned addr) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(addr));
  return v;
}

// 4 blocks (16 warps) per SM: at most 128 registers a thread. A: the epilogue's activation when it is
// bias + that activation only (dispatch_fixed_epilogue), else kGenericEpilogue.
template <int A>
__global__ void __launch_bounds__(kWarps * 32, 4)
    small_cin_kernel(const __half* __restrict__ x, const uint4* __restrict__ wt, __half* __restrict__ y, Geo g,
                     int Kp, int CO, GemmEpilogue<__half, float> ep) {
  extern __shared__ uint4 smem[];
  const int wstride = Kp + 8;  // halfs; Kp % 16 == 0, so a row is 16-byte aligned and B reads spread over banks
  const int wvec = CO * wstride / 8;
  for (int i = threadIdx.x; i < wvec; i += blockDim.x) smem[i] = wt[i];
  const uint32_t* ws = reinterpret_cast<const uint32_t*>(smem);
  int* table = reinterpret_cast<int*>(smem + wvec);  // k -> offset in the window, -1: a padding k
  float* bs = reinterpret_cast<float*>(table + Kp);
  float* stage = bs + CO + (threadIdx.x / 32) * kCols * kStageStride;  // CO % 8 == 0: 16-byte aligned
  unsigned short* win = reinterpret_cast<unsigned short*>(bs + CO + kWarps * kCols * kStageStride);
  const int wrows = window_rows(g), wcols = window_cols(g), rowlen = wcols * g.C;
  const int K = g.KH * g.KW * g.C;
  for (int k = threadIdx.x; k < Kp; k += blockDim.x) {
    if (k < K) {
      const int ky = k / (g.KW * g.C), r = k - ky * g.KW * g.C, kx = r / g.C, c = r - kx * g.C;
      table[k] = ky * g.dh * rowlen + kx * g.dw * g.C + c;
    } else {
      table[k] = -1;
    }
  }
  for (int i = threadIdx.x; i < CO; i += blockDim.x) bs[i] = ep.bias ? ep.bias[i] : 0.f;

  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
  constexpr bool other = A < 0;  // a PRelu slope or an activation without a fixed instance
  const unsigned short* xs = reinterpret_cast<const unsigned short*>(x);
  // this lane's four A rows (tile i >> 1, row gr + 8 (i & 1)): shared-memory byte addresses in the window
  const unsigned win_addr = static_cast<unsigned>(__cvta_generic_to_shared(win));
  unsigned wrow[2 * kTiles];
#pragma unroll
  for (int i = 0; i < 2 * kTiles; ++i)
    wrow[i] = win_addr + 2u * (warp * g.sh * rowlen + ((i >> 1) * 16 + gr + (i & 1) * 8) * g.sw * g.C);
  const int tiles_x = (g.WO + kCols - 1) / kCols, tiles_y = (g.HO + kWarps - 1) / kWarps;
  const int64_t tiles = int64_t(g.N) * tiles_y * tiles_x;
  // The window is loaded in batches of kBatch pixels per thread, every load of a batch issued before its
  // stores; the next tile's first batch is loaded into registers while this tile computes (VGG conv1_1:
  // the whole window), so its latency hides behind the MMAs instead of stalling every block per tile.
  const int wpix = wrows * wcols, batches = (wpix + kBatch * kWarps * 32 - 1) / (kBatch * kWarps * 32);
  int r0[kBatch], cx0[kBatch];  // the thread's window pixels in batch 0: the same for every tile
#pragma unroll
  for (int u = 0; u < kBatch; ++u) {
    const int idx = u * kWarps * 32 + threadIdx.x;
    r0[u] = idx / wcols, cx0[u] = idx - r0[u] * wcols;
  }
  unsigned pf[kBatch][kMaxCin];
  const auto load = [&](int tx, int ty, int n, int b, unsigned (&v)[kBatch][kMaxCin]) {
    const int iy0 = ty * kWarps * g.sh - g.pt, ix0 = tx * kCols * g.sw - g.pl;
    const unsigned short* img = xs + int64_t(n) * g.H * g.W * g.C;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = (b * kBatch + u) * kWarps * 32 + threadIdx.x;
      const int r = b == 0 ? r0[u] : idx / wcols, cx = b == 0 ? cx0[u] : idx - r * wcols;
      const int iy = iy0 + r, ix = ix0 + cx;
      const bool in = idx < wpix && static_cast<unsigned>(iy) < static_cast<unsigned>(g.H) &&
                      static_cast<unsigned>(ix) < static_cast<unsigned>(g.W);
      const unsigned short* src = img + (int64_t(iy) * g.W + ix) * g.C;
#pragma unroll
      for (int c = 0; c < kMaxCin; ++c) v[u][c] = in && c < g.C ? __ldg(src + c) : 0u;
    }
  };
  const auto store = [&](int b, const unsigned (&v)[kBatch][kMaxCin]) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = (b * kBatch + u) * kWarps * 32 + threadIdx.x;
      if (idx < wpix)
#pragma unroll
        for (int c = 0; c < kMaxCin; ++c)
          if (c < g.C) win[idx * g.C + c] = static_cast<unsigned short>(v[u][c]);
    }
  };
  // Tiles as (tx, ty, n), stepped by the grid size in mixed radix (no divisions per tile).
  const int64_t G = gridDim.x;
  const int gx = static_cast<int>(G % tiles_x), gy = static_cast<int>((G / tiles_x) % tiles_y);
  const int gn = static_cast<int>(G / (int64_t(tiles_x) * tiles_y));
  const auto advance = [&](int& tx, int& ty, int& n) {
    tx += gx;
    if (tx >= tiles_x) tx -= tiles_x, ++ty;
    ty += gy;
    if (ty >= tiles_y) ty -= tiles_y, ++n;
    n += gn;
  };
  int tx = static_cast<int>(blockIdx.x % tiles_x), ty = static_cast<int>((blockIdx.x / tiles_x) % tiles_y),
      n = static_cast<int>(blockIdx.x / (unsigned(tiles_x) * tiles_y));  // the current tile
  // The shared one-stage loop (gemm_mainloop.cuh) over this block's output tiles (K fits one stage, so
  // an iteration is a tile): fetch loads a tile's first window batch into registers one tile ahead,
  // store moves to tile k and writes its window (the rest of a larger window loaded there: strides > 1,
  // big kernels), the multiply runs the whole K and the epilogue.
  const auto fetch = [&](int k) {
    int px = tx, py = ty, pn = n;
    if (k > 0) advance(px, py, pn);  // called for k + 1 while tile k is current
    load(px, py, pn, 0, pf);
  };
  const auto store_window = [&](int k, int) {
    if (k > 0) advance(tx, ty, n);
    store(0, pf);
    for (int b = 1; b < batches; ++b) {
      unsigned v[kBatch][kMaxCin];
      load(tx, ty, n, b, v);
      store(b, v);
    }
  };
  auto tiles_it = tile_iterator(NoOp{}, fetch, store_window);
  const int count = blockIdx.x < tiles ? static_cast<int>((tiles - 1 - blockIdx.x) / G + 1) : 0;
  // (the loop's first barrier: the table and bias are written; the previous tile's window reads are done)
  gemm_mainloop<1>(tiles_it, 0, count, [&](int, int) {
    const int oy = ty * kWarps + warp, ox0 = tx * kCols;
    if (oy >= g.HO) return;  // warp-uniform: a row past the image's last
    for (int n0 = 0; n0 < CO; n0 += kChunk) {
      const int nt_count = min(kChunk, CO - n0) / 8;
      float acc[kTiles][8][4];  // the sums start at the bias: the first k step's MMA adds it
      // two k steps in flight: the second step's window loads issue while the first step's MMAs run
      // (H100, VGG conv1_1 at batch 64: 0.234 -> 0.190 ms)
#pragma unroll 2
      for (int k0 = 0; k0 < Kp; k0 += 16) {
        // lane's k: k0 + 2t, 2t + 1 (registers 0, 1) and 2t + 8, 2t + 9 (registers 2, 3)
        // a padding k (table -1) reads the row's first element and keeps 0 instead: one select per value
        unsigned eb[4];
        bool pad[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int e = table[k0 + 2 * t + (j & 1) + 8 * (j >> 1)];
          pad[j] = e < 0;
          eb[j] = pad[j] ? 0u : 2u * e;
        }
        uint32_t a[kTiles][4];
#pragma unroll
        for (int i = 0; i < 2 * kTiles; ++i) {
          unsigned v[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            v[j] = lds_u16(wrow[i] + eb[j]);
            v[j] = pad[j] ? 0u : v[j];
          }
          // A fragment: a[0] row gr k 2t..2t+1, a[1] row gr+8, a[2] row gr k 2t+8.., a[3] row gr+8
          a[i >> 1][(i & 1)] = v[0] | (v[1] << 16);
          a[i >> 1][2 + (i & 1)] = v[2] | (v[3] << 16);
        }
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          if (nt < nt_count) {
            const int w = ((n0 + nt * 8 + gr) * wstride + k0 + 2 * t) / 2;
            const uint32_t b0 = ws[w], b1 = ws[w + 4];
            if (k0 == 0) {
              const float c0 = bs[n0 + nt * 8 + 2 * t], c1 = bs[n0 + nt * 8 + 2 * t + 1];
#pragma unroll
              for (int j = 0; j < kTiles; ++j) mma_16816_bias(acc[j][nt], a[j], b0, b1, c0, c1);
            } else {
#pragma unroll
              for (int j = 0; j < kTiles; ++j) mma_16816(acc[j][nt], a[j], b0, b1);
            }
          }
        }
      }
      // epilogue (gemm_epilogue.cuh, the bias already in the sums): D rows gr, gr + 8, columns 2t, 2t + 1
      // of each n8 tile -> staging -> 16-byte stores. A fixed activation (none, ReLU, Clip, SiLU,
      // HardSwish: compiled in, no switch) is applied in registers and the pair rounded to half2, staged
      // as half. The generic epilogue (PRelu slopes, other activations): staged as float, finished in
      // place in one loop (64 inlined copies of activate()'s switch overflow the instruction cache: 2x
      // slower), rounded on the way out. (MobileNetV2's 3 -> 32 stride-2 ReLU6 stem ran the generic
      // path before the fixed instances: 0.216 ms at batch 64 fp16 on an H200.)
      __half* hs = reinterpret_cast<__half*>(stage);  // [kCols][2 * kStageStride] half in the float rows
      // f(row, column, d0, d1) for each D pair of the warp's tiles: rows gr, gr + 8, columns 2t, 2t + 1
      const auto each_pair = [&](auto&& f) {
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
            if (nt < nt_count) {
#pragma unroll
              for (int h = 0; h < 2; ++h)
                f(j * 16 + gr + 8 * h, nt * 8 + 2 * t, acc[j][nt][2 * h], acc[j][nt][2 * h + 1]);
            }
      };
      if constexpr (!other) {
        each_pair([&](int r, int c, float d0, float d1) {
          *reinterpret_cast<__half2*>(hs + r * (2 * kStageStride) + c) =
              __floats2half2_rn(activate_fixed<A>(ep.act, d0), activate_fixed<A>(ep.act, d1));
        });
      } else {
        each_pair([&](int r, int c, float d0, float d1) {
          *reinterpret_cast<float2*>(stage + r * kStageStride + c) = make_float2(d0, d1);
        });
        __syncwarp();
#pragma unroll 1
        for (int idx = lane, cols = nt_count * 8; idx < kCols * cols; idx += 32) {
          const int r = idx / cols, c = idx % cols;
          if (ox0 + r >= g.WO) continue;  // not stored (and no residual element there)
          float& v = stage[r * kStageStride + c];
          v = ep.finish(v, ep.slope_channel(n0 + c), ((int64_t(n) * g.HO + oy) * g.WO + ox0 + r) * CO + n0 + c);
        }
      }
      __syncwarp();
      // uint4 indexing: the compiler then knows the 16-byte alignment and emits one 16-byte store (through
      // a __half* cast it split each into four 4-byte stores: 4x the store instructions, 75% of the
      // sectors wasted)
      const int co8 = CO / 8;
      uint4* yrow = reinterpret_cast<uint4*>(y) + ((int64_t(n) * g.HO + oy) * g.WO + ox0) * co8 + n0 / 8;
      for (int idx = lane; idx < kCols * nt_count; idx += 32) {
        const int r = nt_count == 8 ? idx >> 3 : idx / nt_count, piece = idx - r * nt_count;
        if (ox0 + r >= g.WO) continue;
        uint4 out;
        if constexpr (!other) {
          out = *reinterpret_cast<const uint4*>(hs + r * (2 * kStageStride) + piece * 8);
        } else {
          const float4 lo = *reinterpret_cast<const float4*>(stage + r * kStageStride + piece * 8);
          const float4 hi = *reinterpret_cast<const float4*>(stage + r * kStageStride + piece * 8 + 4);
          const __half2 h0 = __floats2half2_rn(lo.x, lo.y), h1 = __floats2half2_rn(lo.z, lo.w);
          const __half2 h2 = __floats2half2_rn(hi.x, hi.y), h3 = __floats2half2_rn(hi.z, hi.w);
          out.x = *reinterpret_cast<const uint32_t*>(&h0), out.y = *reinterpret_cast<const uint32_t*>(&h1);
          out.z = *reinterpret_cast<const uint32_t*>(&h2), out.w = *reinterpret_cast<const uint32_t*>(&h3);
        }
        yrow[r * co8 + piece] = out;
      }
      __syncwarp();
    }
  });
}

struct Checked {
  bool ok = false;
  Geo g{};
  int CO = 0, Kp = 0;
};

// fp16 NHWC, groups 1 (any stride and dilation), C_in <= 4, C_out a multiple of 8, KH x KW x C_in <= 512,
// constant weights (and bias), and the weights + input window within 160 KiB of shared memory.
Checked check(const NodeDesc& node) {
  Checked r;
  if (!conv::nhwc_constant_conv(node) || node.precision != Precision::FP16) return r;
  const auto* p = &std::get<Conv2DParams>(node.params);
  if (p->groups != 1 || p->add_residual) return r;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  if (x[1] > kMaxCin || w[0] % 8 != 0) return r;
  if (p->stride_h <= 0 || p->stride_w <= 0 || p->dilation_h <= 0 || p->dilation_w <= 0) return r;
  const int64_t K = w[1] * w[2] * w[3];
  const int64_t span_y = (w[2] - 1) * p->dilation_h, span_x = (w[3] - 1) * p->dilation_w;
  if (K > kMaxK || span_y >= (1 << 12) || span_x >= (1 << 12) || p->stride_h > (1 << 12) || p->stride_w > (1 << 12))
    return r;  // (then the window below is bounded before its size is computed in int)
  if ((x[2] + p->pad.top + p->pad.bottom - span_y - 1) / p->stride_h + 1 != y[2] ||
      (x[3] + p->pad.left + p->pad.right - span_x - 1) / p->stride_w + 1 != y[3])
    return r;
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  r.g = Geo{i32(x[0]), i32(x[1]), i32(x[2]), i32(x[3]), i32(y[2]), i32(y[3]), i32(w[2]), i32(w[3]),
            p->stride_h, p->stride_w, p->pad.top, p->pad.left, p->dilation_h, p->dilation_w};
  r.CO = i32(w[0]);
  r.Kp = i32((K + 15) / 16 * 16);
  r.ok = smem_bytes(r.g, r.CO, r.Kp) <= kMaxSmem;
  return r;
}

bool applicable(const NodeDesc& node) { return check(node).ok && current_device_info().cc_major >= 8; }

// Measured priority: see docs/kernels.md (VGG-16 conv1_1 at batch 64 fp16 on the H100).
int priority(const NodeDesc& node) {
  const Checked c = check(node);
  if (!c.ok) return 0;
  return c.g.N >= 4 ? 70 : 4;
}

struct State {
  std::unique_ptr<DeviceArray> weights;  // half [CO][Kp + 8], k in (ky, kx, c) order, zeros past K
  std::unique_ptr<DeviceArray> bias;     // float [CO], or null
  std::unique_ptr<DeviceArray> slope;    // float [CO] per-channel PRelu slopes (fuse_prelu), or null
};

// The node's epilogue: the prepared float bias and slopes, its activation.
GemmEpilogue<__half, float> epilogue_of(const NodeDesc& node, const State& st) {
  return gemm_epilogue<__half, float>(data_or_null(st.bias), std::get<Conv2DParams>(node.params).activation,
                                      nullptr, data_or_null(st.slope));
}

std::shared_ptr<void> prepare(const NodeDesc& node) {
  const Checked c = check(node);
  if (!c.ok) throw Error("cuda conv2d.mma_small_cin_nhwc: needs NHWC fp16, C_in <= 4, C_out % 8 == 0");
  const Geo& g = c.g;
  const int wstride = c.Kp + 8;
  const float* w = node.constants[1];
  std::vector<float> t(size_t(c.CO) * wstride, 0.f);
  for (int co = 0; co < c.CO; ++co)
    for (int ky = 0; ky < g.KH; ++ky)
      for (int kx = 0; kx < g.KW; ++kx)
        for (int ci = 0; ci < g.C; ++ci)
          t[size_t(co) * wstride + (ky * g.KW + kx) * g.C + ci] = w[((int64_t(co) * g.C + ci) * g.KH + ky) * g.KW + kx];
  auto st = std::make_shared<State>();
  st->weights = upload(t.data(), t.size(), Precision::FP16);
  st->bias = float_bias(node, c.CO, "conv2d.mma_small_cin_nhwc");
  st->slope = float_slope(node, c.CO, "conv2d.mma_small_cin_nhwc");
  // above 48 KiB of shared memory a kernel must opt in (per device and instance, once: here, not inside
  // a graph capture): the instance run() will launch
  if (const size_t smem = smem_bytes(g, c.CO, c.Kp); smem > 48 * 1024)
    dispatch_fixed_epilogue(epilogue_of(node, *st), [&](auto a) {
      INFER_CUDA_CHECK(cudaFuncSetAttribute(small_cin_kernel<decltype(a)::value>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    });
  return st;
}

void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda conv2d.mma_small_cin_nhwc: not prepared");
  const Checked c = check(call.node);
  if (!c.ok) throw Error("cuda conv2d.mma_small_cin_nhwc: needs NHWC fp16, C_in <= 4, C_out % 8 == 0");
  if (reinterpret_cast<uintptr_t>(call.outputs[0]) % 16 != 0)
    throw Error("cuda conv2d.mma_small_cin_nhwc: the output is not 16-byte aligned");
  const State& st = *static_cast<const State*>(call.prepared);
  Context& ctx = context_of(call);
  const size_t smem = smem_bytes(c.g, c.CO, c.Kp);
  const int64_t tiles = int64_t(c.g.N) * ((c.g.HO + kWarps - 1) / kWarps) * ((c.g.WO + kCols - 1) / kCols);
  const int64_t blocks_max = int64_t(ctx.sm_count > 0 ? ctx.sm_count : 132) * 8;
  const auto blocks = static_cast<unsigned>(std::max<int64_t>(1, std::min(tiles, blocks_max)));
  const auto ep = epilogue_of(call.node, st);
  dispatch_fixed_epilogue(ep, [&](auto a) {
    small_cin_kernel<decltype(a)::value><<<blocks, kWarps * 32, smem, ctx.stream>>>(
        reinterpret_cast<const __half*>(call.inputs[0]), st.weights->as<uint4>(),
        reinterpret_cast<__half*>(call.outputs[0]), c.g, c.Kp, c.CO, ep);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(conv2d_small_cin_nhwc) {
  registry.add("cuda", {
      {.op = "conv2d", .name = "mma_small_cin_nhwc", .priority = 70, .priority_for = priority,
       .layouts = {Layout::NHWC}, .fuses_prelu = true, .applicable = applicable, .prepare = prepare, .run = run},
  });
}

}  // namespace infer::cuda
