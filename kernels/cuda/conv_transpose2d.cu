// CUDA transposed convolution (NCHW, weight [C_in,C_out,KH,KW], optional bias [C_out], asymmetric
// padding, output_padding, dilation 1, fused activation) in the session precision: float, or half
// storage with float accumulation. Variants (docs/kernels.md, "CUDA: conv_transpose2d"):
//   conventional        Tida et al. Algorithm 1: zero-upsampled, padded input in the workspace, then a
//                       direct stride-1 convolution with the flipped kernel (any stride; the baseline).
//   segregated_unified  Tida et al. Algorithm 2 (unified kernel segregation), stride 2: one thread per
//                       output; its (row % 2, col % 2) phase selects the sub-kernel taps by index math.
//   segregated_gemm     stride 2: the four phases as implicit GEMMs in ONE launch ("strided dgrad"),
//                       tensor cores (wmma, cp.async pipeline) in fp16/tf32, a SIMT tile in strict
//                       fp32, or for <= 64 columns a weight-streaming split-K kernel; results stored
//                       strided straight into y with bias + activation.
//   segregated_cublas   stride 2: the four phases' explicit columns, ONE strided-batched cuBLAS GEMM
//                       over the phases, one epilogue interleaving them into y (bias + activation).
//   flipped_conv        stride 1: im2col + cuBLAS GEMM with the flipped, transposed kernel.
//   gemm_col2im         any stride: cols = W^T x (cuBLAS), then a gathering col2im + bias + activation.
#include "kernels/conv_shapes.h"
#include "kernels/cuda/conv_transpose2d.h"

#include <cooperative_groups.h>
#include <mma.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/im2col.cuh"

namespace infer::cuda {
namespace {

// ---- the node, validated -----------------------------------------------------------------------

// The node's validated sizes (kernels/conv_shapes.h), shared with the cpu kernels.
using TconvDims = ConvTranspose2DDims;
TconvDims tconv_dims(const NodeDesc& node) { return conv_transpose2d_dims(node, "cuda"); }

// Run-time unpacking: dims plus non-null device pointers for every input the node declares.
struct TconvCall {
  TconvDims d;
  const void *x, *w, *bias;
  void* y;
};

TconvCall tconv_call(const KernelCall& call, const char* variant) {
  TconvCall c{tconv_dims(call.node), nullptr, nullptr, nullptr, nullptr};
  const std::string where = std::string("cuda conv_transpose2d.") + variant + ": ";
  if (call.inputs.size() != call.node.input_shapes.size() || call.outputs.size() != 1)
    throw Error(where + "call has the wrong number of inputs or outputs");
  for (const float* in : call.inputs)
    if (!in) throw Error(where + "null input");
  if (!call.outputs[0]) throw Error(where + "null output");
  c.x = call.inputs[0];
  c.w = call.inputs[1];
  c.bias = call.inputs.size() == 3 ? call.inputs[2] : nullptr;
  c.y = call.outputs[0];
  return c;
}

bool valid(const NodeDesc& node) { return conv_transpose2d_valid(node); }

std::pair<int, int> strides(const NodeDesc& node) {
  const auto& p = std::get<ConvTranspose2DParams>(node.params);
  return {p.stride_h, p.stride_w};
}

const float* host_weight(const NodeDesc& node, const char* variant) {
  if (!has_constant_weight(node))
    throw Error(std::string("cuda conv_transpose2d.") + variant + ": the weight must be a constant");
  return node.constants[1];
}

// ---- the phase decomposition (docs/kernels.md, "Phases") -------------------------------------------
// Output row oy receives x[iy] * w[ky] exactly when iy*s - pad + ky = oy, i.e. ky = r + s*j with
// phase r = (oy + pad) % s and iy = (oy + pad) / s - j. Phase r is a stride-1 correlation of the
// un-upsampled input with the taps r, r+s, ... (ceil((K-r)/s) of them) stored flipped; its outputs
// are first + s*m, and tap t of the flipped sub-kernel reads input q0 + m - (taps-1) + t.

// phase_axis / phase_taps / PhaseAxis: kernels/conv_shapes.h.

// ---- flipped weights: [C_out][C_in][KH][KW] = w[ci][co][KH-1-ky][KW-1-kx] (conventional, flipped_conv)

struct FlippedWeights {
  Precision precision;
  int64_t CO, CI, KH, KW;
  std::unique_ptr<DeviceArray> w;
};

std::shared_ptr<void> prepare_flipped(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  const float* w = host_weight(node, "flipped_conv");
  std::vector<float> f(static_cast<size_t>(d.CO * d.CI * d.KH * d.KW));
  for (int64_t co = 0; co < d.CO; ++co)
    for (int64_t ci = 0; ci < d.CI; ++ci)
      for (int64_t ky = 0; ky < d.KH; ++ky)
        for (int64_t kx = 0; kx < d.KW; ++kx)
          f[static_cast<size_t>(((co * d.CI + ci) * d.KH + ky) * d.KW + kx)] =
              w[((ci * d.CO + co) * d.KH + (d.KH - 1 - ky)) * d.KW + (d.KW - 1 - kx)];
  auto out = std::make_shared<FlippedWeights>();
  out->precision = node.precision;
  out->CO = d.CO;
  out->CI = d.CI;
  out->KH = d.KH;
  out->KW = d.KW;
  out->w = upload(f.data(), f.size(), node.precision);
  return out;
}

const FlippedWeights& flipped_of(const KernelCall& call, const TconvDims& d, const char* variant) {
  const auto* f = static_cast<const FlippedWeights*>(call.prepared);
  if (!f || f->precision != call.node.precision || f->CO != d.CO || f->CI != d.CI || f->KH != d.KH ||
      f->KW != d.KW)
    throw Error(std::string("cuda conv_transpose2d.") + variant + ": not prepared for this node");
  return *f;
}

// ================================================================================================
// conventional (Algorithm 1)
// ================================================================================================
// U[n][ci] has Hu = HO + KH - 1 rows = (H-1)*s + 1 + (KH-1-pad_top) + (KH-1-pad_bottom) + output_padding
// (likewise Wu): x[iy][ix] sits at U[(KH-1-pad_top) + iy*s_h][(KW-1-pad_left) + ix*s_w], zeros
// elsewhere, so a valid stride-1 KHxKW convolution of U with the flipped kernel yields HO x WO.

bool conventional_applicable(const NodeDesc& node) {
  if (!valid(node) || !has_constant_weight(node)) return false;
  const TconvDims d = tconv_dims(node);
  return d.pt < d.KH && d.pb < d.KH && d.pl < d.KW && d.pr < d.KW;
}

uint64_t upsampled_elements(const TconvDims& d) {
  return static_cast<uint64_t>(d.N * d.CI) * static_cast<uint64_t>(d.HO + d.KH - 1) *
         static_cast<uint64_t>(d.WO + d.KW - 1);
}

// One thread per element of U (gather form, so every element is written once, no memset): the
// element holds x when its offset from the top-left corner is a multiple of the stride.
template <class T>
__global__ void upsample_kernel(const T* __restrict__ x, T* __restrict__ u, int64_t planes, int64_t H,
                                int64_t W, int64_t Hu, int64_t Wu, int64_t top, int64_t left, int sh,
                                int sw) {
  const int64_t total = planes * Hu * Wu;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ux = i % Wu, t = i / Wu, uy = t % Hu, plane = t / Hu;
    const int64_t dy = uy - top, dx = ux - left;
    T v = from_float<T>(0.f);
    if (dy >= 0 && dx >= 0 && dy % sh == 0 && dx % sw == 0) {
      const int64_t iy = dy / sh, ix = dx / sw;
      if (iy < H && ix < W) v = x[(plane * H + iy) * W + ix];
    }
    u[i] = v;
  }
}

// Direct valid convolution of U, one thread per output element (consecutive threads: consecutive ox,
// so U reads and y writes coalesce; the weight reads of a warp are mostly one broadcast address).
template <class T>
__global__ void direct_conv_kernel(const T* __restrict__ u, const T* __restrict__ wf,
                                   const T* __restrict__ bias, T* __restrict__ y, int64_t N, int64_t CI,
                                   int64_t CO, int64_t Hu, int64_t Wu, int64_t KH, int64_t KW,
                                   int64_t HO, int64_t WO, DeviceActivation act) {
  const int64_t total = N * CO * HO * WO;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % WO, t = i / WO, oy = t % HO, t2 = t / HO, co = t2 % CO, n = t2 / CO;
    float acc = bias ? to_float(bias[co]) : 0.f;
    for (int64_t ci = 0; ci < CI; ++ci) {
      const T* up = u + ((n * CI + ci) * Hu + oy) * Wu + ox;
      const T* wp = wf + (co * CI + ci) * KH * KW;
      for (int64_t ky = 0; ky < KH; ++ky)
        for (int64_t kx = 0; kx < KW; ++kx)
          acc += to_float(up[ky * Wu + kx]) * to_float(wp[ky * KW + kx]);
    }
    y[i] = from_float<T>(activate(act, acc));
  }
}

size_t conventional_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  return static_cast<size_t>(upsampled_elements(d)) * element_size(node.precision);
}

void run_conventional(const KernelCall& call) {
  const TconvCall c = tconv_call(call, "conventional");
  const TconvDims& d = c.d;
  if (d.pt >= d.KH || d.pb >= d.KH || d.pl >= d.KW || d.pr >= d.KW)
    throw Error("cuda conv_transpose2d.conventional: padding must be smaller than the kernel");
  const FlippedWeights& f = flipped_of(call, d, "conventional");
  if (!call.workspace && upsampled_elements(d) > 0)
    throw Error("cuda conv_transpose2d.conventional: missing workspace");
  Context& ctx = context_of(call);
  const int64_t Hu = d.HO + d.KH - 1, Wu = d.WO + d.KW - 1;
  const int64_t n_up = static_cast<int64_t>(upsampled_elements(d)), n_out = d.N * d.CO * d.HO * d.WO;
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    T* u = static_cast<T*>(call.workspace);
    if (n_up > 0) {
      upsample_kernel<T><<<grid_for(n_up), 256, 0, ctx.stream>>>(
          static_cast<const T*>(c.x), u, d.N * d.CI, d.H, d.W, Hu, Wu, d.KH - 1 - d.pt, d.KW - 1 - d.pl,
          d.sh, d.sw);
      INFER_CUDA_CHECK_LAUNCH();
    }
    if (n_out > 0) {
      direct_conv_kernel<T><<<grid_for(n_out), 256, 0, ctx.stream>>>(
          u, f.w->as<T>(), static_cast<const T*>(c.bias), static_cast<T*>(c.y), d.N, d.CI, d.CO, Hu, Wu,
          d.KH, d.KW, d.HO, d.WO, device_activation(d.act));
      INFER_CUDA_CHECK_LAUNCH();
    }
  });
}

// ================================================================================================
// segregated_unified (Algorithm 2), stride 2
// ================================================================================================
// One thread per output element (n, co, oy, ox), consecutive threads along ox. Its phase
// (rh, rw) = ((oy + pad_top) % 2, (ox + pad_left) % 2) selects the taps ky = rh + 2j, kx = rw + 2i of
// the ORIGINAL weight, which read input (q_h - j, q_w - i) with q = (o + pad) / 2: the paper's
// "P -> floor(P/2), odd P swaps the phase order" falls out of this index math. Only taps that land
// inside the input are visited, so odd output sizes and output_padding need no special case. No
// workspace, no prepare: the weight is read as stored on the device.

template <class T>
__global__ void unified_kernel(const T* __restrict__ x, const T* __restrict__ w,
                               const T* __restrict__ bias, T* __restrict__ y, int64_t N, int64_t CI,
                               int64_t H, int64_t W, int64_t CO, int64_t KH, int64_t KW, int64_t HO,
                               int64_t WO, int64_t pt, int64_t pl, DeviceActivation act) {
  const int64_t total = N * CO * HO * WO;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % WO, t = i / WO, oy = t % HO, t2 = t / HO, co = t2 % CO, n = t2 / CO;
    const int64_t rh = (oy + pt) & 1, qh = (oy + pt) >> 1;
    const int64_t rw = (ox + pl) & 1, qw = (ox + pl) >> 1;
    // Tap j is used when ky = rh + 2j < KH and 0 <= qh - j < H.
    const int64_t j_lo = qh - (H - 1) > 0 ? qh - (H - 1) : 0;
    const int64_t j_hi = rh < KH ? min(qh, (KH - 1 - rh) >> 1) : -1;
    const int64_t i_lo = qw - (W - 1) > 0 ? qw - (W - 1) : 0;
    const int64_t i_hi = rw < KW ? min(qw, (KW - 1 - rw) >> 1) : -1;
    float acc = bias ? to_float(bias[co]) : 0.f;
    for (int64_t ci = 0; ci < CI; ++ci) {
      const T* xc = x + (n * CI + ci) * H * W;
      const T* wc = w + (ci * CO + co) * KH * KW;
      for (int64_t j = j_lo; j <= j_hi; ++j)
        for (int64_t ii = i_lo; ii <= i_hi; ++ii)
          acc += to_float(xc[(qh - j) * W + (qw - ii)]) * to_float(wc[(rh + 2 * j) * KW + rw + 2 * ii]);
    }
    y[i] = from_float<T>(activate(act, acc));
  }
}

void run_unified(const KernelCall& call) {
  const TconvCall c = tconv_call(call, "segregated_unified");
  const TconvDims& d = c.d;
  if (d.sh != 2 || d.sw != 2)
    throw Error("cuda conv_transpose2d.segregated_unified: stride must be 2x2");
  Context& ctx = context_of(call);
  const int64_t total = d.N * d.CO * d.HO * d.WO;
  if (total == 0) return;
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    unified_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        static_cast<const T*>(c.x), static_cast<const T*>(c.w), static_cast<const T*>(c.bias),
        static_cast<T*>(c.y), d.N, d.CI, d.H, d.W, d.CO, d.KH, d.KW, d.HO, d.WO, d.pt, d.pl,
        device_activation(d.act));
  });
  INFER_CUDA_CHECK_LAUNCH();
}

// ================================================================================================
// segregated_gemm: the four stride-2 phases as implicit GEMMs in one launch ("strided dgrad")
// ================================================================================================
// Phase ph = rh*2 + rw is the GEMM C[co][j] = sum_k A_ph[co][k] B_ph[k][j] with
//   M = C_out, N = batch * count_h * count_w (j -> sample n, phase row m, phase column mm),
//   K = C_in * taps_h * taps_w, k = (ty * taps_w + tx) * C_in + ci (tap-major, so consecutive k of
//   one tap are consecutive channels and the gather's bounds test is per tap),
//   B_ph[k][j] = x[n][ci][q0h + m - (taps_h-1) + ty][q0w + mm - (taps_w-1) + tx] (0 outside),
// and C[co][j] lands at y[n][co][first_h + 2m][first_w + 2mm]. prepare() stores A_ph as
// [C_out padded to kBM][K padded to BK] (zeros), so weight tiles load unguarded as 16-byte vectors.
// Grid: x = column tiles (of the largest phase), y = C_out tiles, z = phase * splits + split. B is gathered
// from x into shared memory on the fly (no im2col buffer). Two shared-memory stages: while tile kt
// is multiplied, tile kt+1's weights are copied by cp.async (16-byte, no registers) and its B
// elements are loaded into registers; one barrier per k-tile. The result tile
// goes through shared memory so that every thread stores a fixed output column: bias, activation and
// the strided NCHW store are fused, no rearrangement pass.
// Layers with <= 64 columns per phase (4x4 / 8x8 inputs) take the skinny kernel below instead.
// Split-K in a thread-block cluster (sm_90): when the tiled grid is still too small to occupy the
// GPU (few C_out tiles, a few column tiles, long K), the `splits` blocks of one output tile
// form a cluster along z, each multiplies a slice of K, and they add their accumulator tiles through
// distributed shared memory, each block reducing and storing a slice of the rows. Still one launch,
// no workspace, no partials in global memory; the sum order is fixed (deterministic).

constexpr int kBM = 64, kBN = 64;
constexpr int kMaxSplits = 8;  // the portable cluster size

enum class GemmMode { Half, Tf32, Simt };

template <GemmMode M> struct GemmCfg;
template <> struct GemmCfg<GemmMode::Half> {
  using T = __half;
  static constexpr int kBK = 32, kThreads = 128, kPadA = 8, kPadB = 8;
};
template <> struct GemmCfg<GemmMode::Tf32> {
  using T = float;
  static constexpr int kBK = 32, kThreads = 128, kPadA = 4, kPadB = 4;
};
template <> struct GemmCfg<GemmMode::Simt> {
  using T = float;
  static constexpr int kBK = 16, kThreads = 256, kPadA = 4, kPadB = 4;
};

GemmMode gemm_mode(Precision p) {
  return p == Precision::FP16 ? GemmMode::Half : p == Precision::TF32 ? GemmMode::Tf32 : GemmMode::Simt;
}
int gemm_bk(Precision p) { return gemm_mode(p) == GemmMode::Simt ? GemmCfg<GemmMode::Simt>::kBK : 32; }

struct SegPhase {
  int64_t a_offset;  // elements into the prepared weights
  int k, k_pad;      // K of this phase and K rounded up to the k-tile
  int nj, ni;        // taps along H and W
  int64_t first_h, first_w, count_h, count_w, q0h, q0w;
  int64_t ncols;     // batch * count_h * count_w
};

struct SegArgs {
  SegPhase ph[4];
  int64_t CI, H, W, CO, HO, WO;
  int64_t ncols_max;
  int splits;  // blocks per cluster along z, each a slice of K (1: no split)
};

// The node's phases (a pure function of the node; prepare and run agree). run() sets the split.
SegArgs seg_args(const TconvDims& d, Precision p) {
  SegArgs a{};
  const int bk = gemm_bk(p);
  a.CI = d.CI;
  a.H = d.H;
  a.W = d.W;
  a.CO = d.CO;
  a.HO = d.HO;
  a.WO = d.WO;
  const int64_t co_pad = (d.CO + kBM - 1) / kBM * kBM;
  int64_t offset = 0;
  for (int rh = 0; rh < 2; ++rh)
    for (int rw = 0; rw < 2; ++rw) {
      SegPhase& s = a.ph[rh * 2 + rw];
      const PhaseAxis ah = phase_axis(rh, 2, d.pt, d.HO), aw = phase_axis(rw, 2, d.pl, d.WO);
      s.nj = static_cast<int>(phase_taps(rh, 2, d.KH));
      s.ni = static_cast<int>(phase_taps(rw, 2, d.KW));
      const int64_t k = d.CI * s.nj * s.ni;
      s.k = static_cast<int>(k);
      s.k_pad = static_cast<int>((k + bk - 1) / bk * bk);
      s.a_offset = offset;
      offset += co_pad * s.k_pad;
      s.first_h = ah.first;
      s.first_w = aw.first;
      s.count_h = ah.count;
      s.count_w = aw.count;
      s.q0h = ah.q0;
      s.q0w = aw.q0;
      s.ncols = d.N * ah.count * aw.count;
      a.ncols_max = std::max(a.ncols_max, s.ncols);
    }
  a.splits = 1;
  return a;
}

// Split K only when the plain grid is under 2 blocks per SM: then up to ~4 blocks per SM, each
// split >= 4 k-tiles, at most a portable cluster. Needs clusters (sm_90+).
int seg_splits(const SegArgs& a, const Context& ctx, Precision p) {
  if (ctx.cc_major < 9) return 1;
  const int64_t target = 4 * int64_t(std::max(ctx.sm_count, 1));
  const int64_t blocks = 4 * ((a.ncols_max + kBN - 1) / kBN) * ((a.CO + kBM - 1) / kBM);
  int64_t ktiles_max = 0;
  for (const SegPhase& s : a.ph) ktiles_max = std::max<int64_t>(ktiles_max, s.k_pad / gemm_bk(p));
  if (blocks == 0 || 2 * blocks > target || ktiles_max < 8) return 1;
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>({(target + blocks - 1) / blocks, ktiles_max / 4, kMaxSplits})));
}

bool segregated_gemm_applicable(const NodeDesc& node) {
  if (!valid(node) || !has_constant_weight(node) || strides(node) != std::make_pair(2, 2)) return false;
  const TconvDims d = tconv_dims(node);
  const int64_t taps = ((d.KH + 1) / 2) * ((d.KW + 1) / 2);
  const int64_t co_tiles = (d.CO + kBM - 1) / kBM;
  const int64_t col_tiles = (d.N * ((d.HO + 1) / 2) * ((d.WO + 1) / 2) + kBN - 1) / kBN;
  return d.CI * taps + 64 <= INT_MAX && co_tiles <= 65535 && col_tiles <= INT_MAX;
}

struct SegPrepared {
  Precision precision;
  int bk;
  int64_t CO, CI, KH, KW;
  int64_t a_offset[4];
  int k_pad[4];
  std::unique_ptr<DeviceArray> w;
};

std::shared_ptr<void> prepare_segregated_gemm(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  if (d.sh != 2 || d.sw != 2) throw Error("cuda conv_transpose2d.segregated_gemm: stride must be 2x2");
  const float* w = host_weight(node, "segregated_gemm");
  const SegArgs a = seg_args(d, node.precision);
  const int64_t co_pad = (d.CO + kBM - 1) / kBM * kBM;
  size_t total = 0;
  for (const SegPhase& s : a.ph) total += static_cast<size_t>(co_pad * s.k_pad);
  std::vector<float> buf(total, 0.f);
  for (int ph = 0; ph < 4; ++ph) {
    const SegPhase& s = a.ph[ph];
    const int rh = ph / 2, rw = ph % 2;
    for (int64_t co = 0; co < d.CO; ++co)
      for (int ty = 0; ty < s.nj; ++ty)
        for (int tx = 0; tx < s.ni; ++tx) {
          // flipped sub-kernel: tap ty of phase rh is ky = rh + 2 * (nj - 1 - ty)
          const int64_t ky = rh + 2 * (s.nj - 1 - ty), kx = rw + 2 * (s.ni - 1 - tx);
          float* dst = buf.data() + s.a_offset + co * s.k_pad + (int64_t(ty) * s.ni + tx) * d.CI;
          for (int64_t ci = 0; ci < d.CI; ++ci) dst[ci] = w[((ci * d.CO + co) * d.KH + ky) * d.KW + kx];
        }
  }
  auto out = std::make_shared<SegPrepared>();
  out->precision = node.precision;
  out->bk = gemm_bk(node.precision);
  out->CO = d.CO;
  out->CI = d.CI;
  out->KH = d.KH;
  out->KW = d.KW;
  for (int ph = 0; ph < 4; ++ph) {
    out->a_offset[ph] = a.ph[ph].a_offset;
    out->k_pad[ph] = a.ph[ph].k_pad;
  }
  out->w = upload(buf.data(), buf.size(), node.precision);
  return out;
}

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

// BN: the column tile, 64, or 128 for fp16 layers with many columns (kWideBN): a 64 x 128 tile
// with twice the threads (8 warps, each still 32 x 32), so each weight tile feeds twice the columns.
constexpr int kWideBN = 128;
constexpr int64_t kWideMinCols = 8192;  // columns per phase from which fp16 uses the wide tile

template <GemmMode kMode, int BN>
constexpr int seg_threads() { return GemmCfg<kMode>::kThreads * BN / 64; }

template <GemmMode kMode, int BN>
struct SegSmem {
  using Cfg = GemmCfg<kMode>;
  using T = typename Cfg::T;
  static constexpr int kLdA = Cfg::kBK + Cfg::kPadA;  // row pitches keep 16-byte (wmma: 32-byte) alignment
  static constexpr int kLdB = BN + Cfg::kPadB;
  static constexpr int kLdC = BN + 4;
  static constexpr int kABytes = kBM * kLdA * int(sizeof(T));
  static constexpr int kBBytes = Cfg::kBK * kLdB * int(sizeof(T));
  static constexpr int kCBytes = kBM * kLdC * int(sizeof(float));
  static constexpr int kStageBytes = kABytes + kBBytes;  // two stages: the k-tile ring
  static constexpr int kBytes = 2 * kStageBytes > kCBytes ? 2 * kStageBytes : kCBytes;
};

template <GemmMode kMode, int BN>
__global__ void __launch_bounds__(seg_threads<kMode, BN>())
    segregated_gemm_kernel(const typename GemmCfg<kMode>::T* __restrict__ x,
                           const typename GemmCfg<kMode>::T* __restrict__ wp,
                           const typename GemmCfg<kMode>::T* __restrict__ bias,
                           typename GemmCfg<kMode>::T* __restrict__ y, SegArgs a, DeviceActivation act) {
  using Cfg = GemmCfg<kMode>;
  using T = typename Cfg::T;
  using S = SegSmem<kMode, BN>;
  constexpr int BK = Cfg::kBK, NT = seg_threads<kMode, BN>();
  static_assert(BN == 64 || (BN == kWideBN && kMode != GemmMode::Simt), "the SIMT tile is 64 x 64");
  constexpr int kVec = 16 / int(sizeof(T));               // elements per 16-byte vector
  constexpr int kAVecs = kBM * BK / kVec / NT;            // A vectors per thread per k-tile
  constexpr int kBRowStep = NT / BN;                      // B rows covered by one pass of the block
  constexpr int kBPer = BK / kBRowStep;                   // B elements per thread per k-tile
  static_assert(kAVecs >= 1 && kBM * BK == kAVecs * kVec * NT, "A tile / thread mismatch");
  static_assert(NT % BN == 0 && BK % kBRowStep == 0, "B tile / thread mismatch");

  __shared__ __align__(128) unsigned char smem[S::kBytes];
  // Stage st: A tile [kBM][kLdA] at st * kStageBytes, B tile [BK][kLdB] after it.
  auto As_of = [&](int st) { return reinterpret_cast<T*>(smem + st * S::kStageBytes); };
  auto Bs_of = [&](int st) { return reinterpret_cast<T*>(smem + st * S::kStageBytes + S::kABytes); };
  float* Cs = reinterpret_cast<float*>(smem);              // [kBM][kLdC], after the main loop

  const int phase = blockIdx.z / a.splits, split = blockIdx.z % a.splits;  // split = cluster rank
  const SegPhase P = a.ph[phase];
  const int64_t col0 = int64_t(blockIdx.x) * BN;
  if (col0 >= P.ncols) return;  // fewer columns than the largest phase: uniform over the cluster
  const int m0 = blockIdx.y * kBM;
  const int tid = threadIdx.x;

  const int ktiles = P.k_pad / BK;
  const int per_split = (ktiles + a.splits - 1) / a.splits;
  const int kt_begin = min(ktiles, split * per_split), kt_end = min(ktiles, kt_begin + per_split);

  // This thread's B column (fixed for the whole block): sample n, phase row m, phase column mm.
  const int b_col = tid % BN, b_row0 = tid / BN;
  const int64_t jcol = col0 + b_col;
  const bool col_ok = jcol < P.ncols;
  int64_t n = 0, m = 0, mm = 0;
  if (col_ok) {
    const int64_t hw = P.count_h * P.count_w;
    n = jcol / hw;
    const int64_t r = jcol - n * hw;
    m = r / P.count_w;
    mm = r - m * P.count_w;
  }
  const T* xn = x + n * a.CI * a.H * a.W;
  const int64_t iy0 = P.q0h + m - (P.nj - 1), ix0 = P.q0w + mm - (P.ni - 1);
  const T* ap = wp + P.a_offset + int64_t(m0) * P.k_pad;

  T b_reg[kBPer];

  // A (prepared weights, never out of bounds): asynchronous 16-byte copies into stage st.
  auto issue_a = [&](int kt, int st) {
    T* As = As_of(st);
#pragma unroll
    for (int i = 0; i < kAVecs; ++i) {
      const int v = tid + i * NT, row = v / (BK / kVec), cv = v % (BK / kVec);
      cp_async16(As + row * S::kLdA + cv * kVec, ap + int64_t(row) * P.k_pad + kt * BK + cv * kVec);
    }
    cp_async_commit();
  };
  // B (implicit im2col gather with bounds): into registers one tile ahead, stored by begin_tile.
  auto load_b = [&](int kt) {
    // k = (ty*ni + tx)*CI + ci: decompose the first row once, then step by kBRowStep incrementally.
    const int k_first = kt * BK + b_row0;
    int tap = k_first / int(a.CI);
    int ci = k_first - tap * int(a.CI);
    int ty = tap / max(P.ni, 1);
    int tx = tap - ty * P.ni;
#pragma unroll
    for (int i = 0; i < kBPer; ++i) {
      const int k = k_first + i * kBRowStep;
      T v = from_float<T>(0.f);
      if (col_ok && k < P.k) {
        const int64_t iy = iy0 + ty, ix = ix0 + tx;
        if (iy >= 0 && iy < a.H && ix >= 0 && ix < a.W) v = xn[(int64_t(ci) * a.H + iy) * a.W + ix];
      }
      b_reg[i] = v;
      ci += kBRowStep;
      while (ci >= int(a.CI)) {
        ci -= int(a.CI);
        if (++tx == P.ni) {
          tx = 0;
          ++ty;
        }
      }
    }
  };
  auto store_b = [&](int st) {
    T* Bs = Bs_of(st);
#pragma unroll
    for (int i = 0; i < kBPer; ++i) Bs[(b_row0 + i * kBRowStep) * S::kLdB + b_col] = b_reg[i];
  };
  // Two-stage pipeline, one barrier per k-tile: tile kt+1's A copies and B loads are in flight
  // while tile kt is multiplied. Stage st is rewritten at kt+2, after every thread passed the
  // barrier of kt+1, i.e. finished multiplying kt.
  auto begin_tile = [&](int kt, int st) {
    store_b(st);
    cp_async_wait_all();  // this thread's A copies of tile kt
    __syncthreads();      // everyone's A and B of tile kt are visible; tile kt-1 is consumed
    if (kt + 1 < kt_end) {
      issue_a(kt + 1, st ^ 1);
      load_b(kt + 1);
    }
  };

  if constexpr (kMode == GemmMode::Simt) {
    // 16 x 16 threads, each a 4 x 4 register tile: rows ty + 16i, columns tx + 16j (conflict-free
    // shared reads: a warp reads 2 A words and 16 consecutive B words per k).
    const int tx = tid % 16, ty = tid / 16;
    float acc[4][4] = {};
    if (kt_begin < kt_end) {
      issue_a(kt_begin, 0);
      load_b(kt_begin);
    }
    for (int kt = kt_begin, st = 0; kt < kt_end; ++kt, st ^= 1) {
      begin_tile(kt, st);
      const T* As = As_of(st);
      const T* Bs = Bs_of(st);
#pragma unroll
      for (int k = 0; k < BK; ++k) {
        float av[4], bv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) av[i] = As[(ty + 16 * i) * S::kLdA + k];
#pragma unroll
        for (int j = 0; j < 4; ++j) bv[j] = Bs[k * S::kLdB + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) Cs[(ty + 16 * i) * S::kLdC + tx + 16 * j] = acc[i][j];
  } else {
    // Warps in a 2 x (BN/32) grid, each a 32 x 32 block of 2 x 2 wmma 16x16 accumulators (float).
    using namespace nvcuda;
    constexpr int kFragK = kMode == GemmMode::Half ? 16 : 8;
    using AType = std::conditional_t<kMode == GemmMode::Half, __half, wmma::precision::tf32>;
    const int warp = tid / 32, wm = (warp / (BN / 32)) * 32, wn = (warp % (BN / 32)) * 32;
    wmma::fragment<wmma::accumulator, 16, 16, kFragK, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
    if (kt_begin < kt_end) {
      issue_a(kt_begin, 0);
      load_b(kt_begin);
    }
    for (int kt = kt_begin, st = 0; kt < kt_end; ++kt, st ^= 1) {
      begin_tile(kt, st);
      const T* As = As_of(st);
      const T* Bs = Bs_of(st);
#pragma unroll
      for (int kk = 0; kk < BK; kk += kFragK) {
        wmma::fragment<wmma::matrix_a, 16, 16, kFragK, AType, wmma::row_major> fa[2];
        wmma::fragment<wmma::matrix_b, 16, 16, kFragK, AType, wmma::row_major> fb[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          wmma::load_matrix_sync(fa[i], As + (wm + 16 * i) * S::kLdA + kk, S::kLdA);
          wmma::load_matrix_sync(fb[i], Bs + kk * S::kLdB + wn + 16 * i, S::kLdB);
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
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::store_matrix_sync(Cs + (wm + 16 * i) * S::kLdC + wn + 16 * j, acc[i][j], S::kLdC,
                                wmma::mem_row_major);
  }
  __syncthreads();

  // Epilogue: thread -> fixed column b_col, rows b_row0 + kBRowStep*i. Column j = (n, m, mm) is
  // output pixel (first_h + 2m, first_w + 2mm) of sample n. With a split, block `split` of the cluster
  // reduces rows [row_begin, row_end) over every block's Cs (distributed shared memory).
  int row_begin = 0, row_end = kBM;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  if (a.splits > 1) {
    cg::this_cluster().sync();  // every block's Cs is complete
    const int per = (kBM + a.splits - 1) / a.splits;
    row_begin = min(kBM, split * per);
    row_end = min(kBM, row_begin + per);
  }
#endif
  if (col_ok) {
    const int64_t plane = a.HO * a.WO;
    T* yp = y + n * a.CO * plane + (P.first_h + 2 * m) * a.WO + P.first_w + 2 * mm;
    for (int r = row_begin + b_row0; r < row_end; r += kBRowStep) {
      const int64_t co = m0 + r;
      if (co >= a.CO) break;
      float v = 0.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      if (a.splits > 1) {
        for (int q = 0; q < a.splits; ++q)
          v += cg::this_cluster().map_shared_rank(Cs, q)[r * S::kLdC + b_col];
      } else
#endif
      {
        v = Cs[r * S::kLdC + b_col];
      }
      if (bias) v += to_float(bias[co]);
      yp[co * plane] = from_float<T>(activate(act, v));
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (a.splits > 1) cg::this_cluster().sync();  // no block leaves while others read its Cs
#endif
}

template <GemmMode kMode, int BN = kBN>
void launch_segregated_gemm(Context& ctx, const TconvCall& c, const SegPrepared& prep, const SegArgs& a) {
  using T = typename GemmCfg<kMode>::T;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>((a.ncols_max + BN - 1) / BN),
                     static_cast<unsigned>((a.CO + kBM - 1) / kBM), static_cast<unsigned>(4 * a.splits));
  cfg.blockDim = dim3(seg_threads<kMode, BN>());
  cfg.dynamicSmemBytes = 0;
  cfg.stream = ctx.stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(a.splits);
  cfg.attrs = attr;
  cfg.numAttrs = a.splits > 1 ? 1 : 0;  // a plain launch without a split
  INFER_CUDA_CHECK(cudaLaunchKernelEx(&cfg, segregated_gemm_kernel<kMode, BN>, static_cast<const T*>(c.x),
                                      static_cast<const T*>(prep.w->data()),
                                      static_cast<const T*>(c.bias), static_cast<T*>(c.y), a,
                                      device_activation(c.d.act)));
  INFER_CUDA_CHECK_LAUNCH();
}

// ---- skinny-N path: weight streaming for small-spatial layers ------------------------------------
// When every phase has <= 64 columns (batch * phase pixels: 4x4 and 8x8 inputs at small batch), the
// GEMM is a few columns against C_out x K weights (EB-GAN layer 1: 134 MB fp32), so it is bound by
// streaming the weights, and the 64x64 tile above wastes most of its columns. This kernel instead:
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
//   blocks of one tile (a cluster along z, as above) add theirs through distributed shared memory,
//   each rank storing a slice of the 32 channels with bias + activation, strided into y.
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
    segregated_skinny_kernel(const T* __restrict__ x, const T* __restrict__ wp, const T* __restrict__ bias,
                             T* __restrict__ y, SegArgs a, DeviceActivation act) {
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
  int64_t n = 0, m = 0, mm = 0;
  if (col_ok) {
    const int64_t hw = P.count_h * P.count_w;
    n = b_col / hw;
    const int64_t r = b_col - n * hw;
    m = r / P.count_w;
    mm = r - m * P.count_w;
  }
  const T* xn = x + n * a.CI * a.H * a.W;
  const int64_t iy0 = P.q0h + m - (P.nj - 1), ix0 = P.q0w + mm - (P.ni - 1);

  uint32_t a_w[NW];
  T b_reg[BPER];
  auto load_chunk = [&](int ch) {
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
    const int k_first = ch * KC + b_row0;
    int tap = k_first / int(a.CI);
    int ci = k_first - tap * int(a.CI);
    int ty = tap / max(P.ni, 1);
    int tx = tap - ty * P.ni;
#pragma unroll
    for (int i = 0; i < BPER; ++i) {
      const int k = k_first + i * BSTEP;
      T v = from_float<T>(0.f);
      if (col_ok && k < P.k) {
        const int64_t iy = iy0 + ty, ix = ix0 + tx;
        if (iy >= 0 && iy < a.H && ix >= 0 && ix < a.W) v = xn[(int64_t(ci) * a.H + iy) * a.W + ix];
      }
      b_reg[i] = v;
      ci += BSTEP;
      while (ci >= int(a.CI)) {
        ci -= int(a.CI);
        if (++tx == P.ni) {
          tx = 0;
          ++ty;
        }
      }
    }
  };

  float acc[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) acc[c] = 0.f;
  if (c_begin < c_end) load_chunk(c_begin);
  for (int ch = c_begin; ch < c_end; ++ch) {
    __syncthreads();  // the previous chunk's B reads are done
#pragma unroll
    for (int i = 0; i < BPER; ++i) buf[(b_row0 + i * BSTEP) * NC + b_col] = to_float(b_reg[i]);
    uint32_t a_cur[NW];
#pragma unroll
    for (int i = 0; i < NW; ++i) a_cur[i] = a_w[i];
    __syncthreads();
    if (ch + 1 < c_end) load_chunk(ch + 1);  // in flight while this chunk is multiplied
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
  }

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

  int row_begin = 0, row_end = R;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  if (a.splits > 1) {
    cg::this_cluster().sync();  // every block's Cs is complete
    const int per = (R + a.splits - 1) / a.splits;
    row_begin = min(R, split * per);
    row_end = min(R, row_begin + per);
  }
#endif
  const int rows = row_end - row_begin;
  const int64_t plane = a.HO * a.WO, hw = P.count_h * P.count_w;
  for (int e = tid; e < rows * NC; e += kSkinnyThreads) {
    const int r = row_begin + e % rows, c = e / rows;  // consecutive threads: consecutive channels
    const int64_t co = m0 + r;
    if (co >= a.CO || c >= P.ncols) continue;
    float v = 0.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (a.splits > 1) {
      for (int q = 0; q < a.splits; ++q) v += cg::this_cluster().map_shared_rank(Cs, q)[c * R + r];
    } else
#endif
    {
      v = Cs[c * R + r];
    }
    if (bias) v += to_float(bias[co]);
    const int64_t cn = c / hw, crem = c - cn * hw, cm = crem / P.count_w, cmm = crem - cm * P.count_w;
    y[(cn * a.CO + co) * plane + (P.first_h + 2 * cm) * a.WO + P.first_w + 2 * cmm] =
        from_float<T>(activate(act, v));
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (a.splits > 1) cg::this_cluster().sync();  // no block leaves while others read its Cs
#endif
}

// Columns per phase that the skinny path takes (0: use the tiled kernel).
int skinny_cols(const SegArgs& a) {
  return a.ncols_max <= 16 ? 16 : a.ncols_max <= 32 ? 32 : a.ncols_max <= kSkinnyMaxCols ? 64 : 0;
}

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
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>((a.CO + kBM - 1) / kBM * (kBM / kSkinnyRows)), 1u,
                     static_cast<unsigned>(4 * a.splits));
  cfg.blockDim = dim3(kSkinnyThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = ctx.stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(a.splits);
  cfg.attrs = attr;
  cfg.numAttrs = a.splits > 1 ? 1 : 0;
  INFER_CUDA_CHECK(cudaLaunchKernelEx(&cfg, segregated_skinny_kernel<T, NC>, static_cast<const T*>(c.x),
                                      static_cast<const T*>(prep.w->data()),
                                      static_cast<const T*>(c.bias), static_cast<T*>(c.y), a,
                                      device_activation(c.d.act)));
  INFER_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_skinny(Context& ctx, const TconvCall& c, const SegPrepared& prep, const SegArgs& a, int nc) {
  if (nc == 16) launch_skinny<T, 16>(ctx, c, prep, a);
  else if (nc == 32) launch_skinny<T, 32>(ctx, c, prep, a);
  else launch_skinny<T, 64>(ctx, c, prep, a);
}

void run_segregated_gemm(const KernelCall& call) {
  const TconvCall c = tconv_call(call, "segregated_gemm");
  const TconvDims& d = c.d;
  if (d.sh != 2 || d.sw != 2) throw Error("cuda conv_transpose2d.segregated_gemm: stride must be 2x2");
  const Precision p = call.node.precision;
  const auto* prep = static_cast<const SegPrepared*>(call.prepared);
  SegArgs a = seg_args(d, p);
  bool ok = prep && prep->precision == p && prep->bk == gemm_bk(p) && prep->CO == d.CO &&
            prep->CI == d.CI && prep->KH == d.KH && prep->KW == d.KW;
  for (int ph = 0; ok && ph < 4; ++ph)
    ok = prep->a_offset[ph] == a.ph[ph].a_offset && prep->k_pad[ph] == a.ph[ph].k_pad;
  if (!ok) throw Error("cuda conv_transpose2d.segregated_gemm: not prepared for this node");
  if (a.ncols_max == 0 || d.CO == 0) return;
  Context& ctx = context_of(call);
  if (const int nc = skinny_cols(a)) {  // small-spatial layer: stream the weights
    if (p == Precision::FP16) launch_skinny<__half>(ctx, c, *prep, a, nc);
    else launch_skinny<float>(ctx, c, *prep, a, nc);
    return;
  }
  a.splits = seg_splits(a, ctx, p);
  switch (gemm_mode(p)) {
    case GemmMode::Half:
      if (a.splits == 1 && a.ncols_max >= kWideMinCols)  // many columns: the 64 x 128 tile
        launch_segregated_gemm<GemmMode::Half, kWideBN>(ctx, c, *prep, a);
      else
        launch_segregated_gemm<GemmMode::Half>(ctx, c, *prep, a);
      break;
    case GemmMode::Tf32: launch_segregated_gemm<GemmMode::Tf32>(ctx, c, *prep, a); break;
    case GemmMode::Simt: launch_segregated_gemm<GemmMode::Simt>(ctx, c, *prep, a); break;
  }
}

// ================================================================================================
// flipped_conv (stride 1)
// ================================================================================================
// A stride-1 transposed convolution is the convolution of x with the flipped, in/out-swapped kernel
// and padding KH-1-pad_top / KW-1-pad_left (negative when pad >= k: an offset into x; the bottom and
// right padding follow from HO, WO). im2col + cuBLAS GEMM per chunk of images (im2col.cuh), then
// bias + activation.

ConvGeometry flipped_geometry(const TconvDims& d) {
  ConvGeometry g;
  g.C = d.CI;
  g.H = d.H;
  g.W = d.W;
  g.KH = d.KH;
  g.KW = d.KW;
  g.pad_top = d.KH - 1 - d.pt;
  g.pad_left = d.KW - 1 - d.pl;
  g.HO = d.HO;
  g.WO = d.WO;
  return g;
}

size_t flipped_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  return conv_gemm_workspace_bytes(flipped_geometry(d), d.N, node.precision);
}

void run_flipped_conv(const KernelCall& call) {
  const TconvCall c = tconv_call(call, "flipped_conv");
  const TconvDims& d = c.d;
  if (d.sh != 1 || d.sw != 1) throw Error("cuda conv_transpose2d.flipped_conv: stride must be 1x1");
  const FlippedWeights& f = flipped_of(call, d, "flipped_conv");
  const ConvGeometry g = flipped_geometry(d);
  const Precision p = call.node.precision;
  if (!call.workspace && conv_gemm_workspace_bytes(g, d.N, p) > 0)
    throw Error("cuda conv_transpose2d.flipped_conv: missing workspace");
  Context& ctx = context_of(call);
  conv_gemm(ctx, p, g, f.w->data(), d.CO, c.x, d.CI * d.H * d.W, c.y, d.CO * d.HO * d.WO, d.N,
            call.workspace, conv_gemm_chunk(g, d.N, p));
  bias_activation(ctx, p, c.y, c.bias, d.N, d.CO, d.HO * d.WO, d.act);
}

// ================================================================================================
// gemm_col2im (Caffe / PyTorch deconvolution), any stride
// ================================================================================================
// cols_n [C_out*KH*KW][H*W] = W^T x_n: the weight [C_in][C_out*KH*KW] as stored is the transposed A
// operand, so no prepare. Then col2im as a gather: one thread per output element sums the taps
// (ky, kx) that land on it (ky = (oy + pad_top) % s + s*j, input row (oy + pad_top - ky) / s), adds
// the bias and applies the activation. No atomics, deterministic; every output written.
// Threads: blockIdx.y walks the output planes (image x channel, so channel and bias are per block),
// x the pixels of a plane. Index math within a plane is 32-bit (applicable() keeps a plane's columns
// under 2^31 elements) and the stride is a compile-time 2 for the GAN layers: the first version, one
// flat 64-bit index with int64 div/mod per tap, ran at ~34 G outputs/s on the H100 (EB-GAN batch 64:
// 2.0 ms for 64x64x128x128), bound by integer division rather than by its ~10 bytes per output.

int64_t col2im_chunk(const TconvDims& d, Precision p) {
  const size_t per_image = static_cast<size_t>(d.CO * d.KH * d.KW * d.H * d.W) * element_size(p);
  return images_per_chunk(d.N, per_image);
}

size_t col2im_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  return static_cast<size_t>(col2im_chunk(d, node.precision)) *
         static_cast<size_t>(d.CO * d.KH * d.KW * d.H * d.W) * element_size(node.precision);
}

// S > 0: both strides are S (compile time: shifts instead of divisions); S == 0: sh, sw at run time.
template <class T, int S>
__global__ void col2im_kernel(const T* __restrict__ cols, const T* __restrict__ bias, T* __restrict__ y,
                              int64_t planes, int CO, int H, int W, int KH, int KW, int HO, int WO,
                              int sh_rt, int sw_rt, int pt, int pl, DeviceActivation act) {
  const int sh = S > 0 ? S : sh_rt, sw = S > 0 ? S : sw_rt;
  const int hw = H * W, hwo = HO * WO;
  for (int64_t c = blockIdx.y; c < planes; c += gridDim.y) {  // c = img * CO + co
    const T* cp = cols + c * KH * KW * hw;
    T* yp = y + c * hwo;
    const float b = bias ? to_float(bias[c % CO]) : 0.f;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < hwo; p += gridDim.x * blockDim.x) {
      const int oy = p / WO, ox = p - oy * WO;
      const int ty = oy + pt, tx = ox + pl;
      float acc = b;
      for (int ky = ty % sh; ky < KH && ky <= ty; ky += sh) {
        const int iy = (ty - ky) / sh;
        if (iy >= H) continue;
        const T* row = cp + ky * KW * hw + iy * W;
        for (int kx = tx % sw; kx < KW && kx <= tx; kx += sw) {
          const int ix = (tx - kx) / sw;
          if (ix < W) acc += to_float(row[kx * hw + ix]);
        }
      }
      yp[p] = from_float<T>(activate(act, acc));
    }
  }
}

void run_gemm_col2im(const KernelCall& call) {
  const TconvCall c = tconv_call(call, "gemm_col2im");
  const TconvDims& d = c.d;
  const Precision p = call.node.precision;
  const size_t es = element_size(p);
  const int64_t M = d.CO * d.KH * d.KW, HW = d.H * d.W, out_image = d.CO * d.HO * d.WO;
  if (d.N == 0 || out_image == 0) return;
  if (!call.workspace && M * HW > 0) throw Error("cuda conv_transpose2d.gemm_col2im: missing workspace");
  Context& ctx = context_of(call);
  const int64_t chunk = col2im_chunk(d, p);
  for (int64_t n0 = 0; n0 < d.N; n0 += chunk) {
    const int64_t images = std::min(chunk, d.N - n0);
    if (d.CI > 0) {
      GemmArgs g;
      g.m = M;
      g.n = HW;
      g.k = d.CI;
      g.a = c.w;
      g.lda = M;
      g.trans_a = true;
      g.stride_a = 0;
      g.b = static_cast<const char*>(c.x) + n0 * d.CI * HW * es;
      g.ldb = HW;
      g.stride_b = d.CI * HW;
      g.c = call.workspace;
      g.ldc = HW;
      g.stride_c = M * HW;
      g.batch = images;
      gemm(ctx, p, g);
    } else {
      INFER_CUDA_CHECK(cudaMemsetAsync(call.workspace, 0, static_cast<size_t>(images * M * HW) * es, ctx.stream));
    }
    // a block per (pixel range, plane); small planes get smaller blocks (DCGAN's 8x8 outputs: 64)
    const int64_t planes = images * d.CO, hwo = d.HO * d.WO;
    const int threads = static_cast<int>(std::min<int64_t>(256, (hwo + 31) / 32 * 32));
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((hwo + threads - 1) / threads, 65535)),
                    static_cast<unsigned>(std::min<int64_t>(planes, 65535)));
    const bool s2 = d.sh == 2 && d.sw == 2;
    dispatch(p, [&](auto tag) {
      using T = decltype(tag);
      auto* kernel = s2 ? col2im_kernel<T, 2> : col2im_kernel<T, 0>;
      kernel<<<grid, threads, 0, ctx.stream>>>(
          static_cast<const T*>(call.workspace), static_cast<const T*>(c.bias),
          static_cast<T*>(c.y) + n0 * out_image, planes, static_cast<int>(d.CO), static_cast<int>(d.H),
          static_cast<int>(d.W), static_cast<int>(d.KH), static_cast<int>(d.KW), static_cast<int>(d.HO),
          static_cast<int>(d.WO), d.sh, d.sw, d.pt, d.pl, device_activation(d.act));
    });
    INFER_CUDA_CHECK_LAUNCH();
  }
}

// --- segregated_cublas ------------------------------------------------------------------------
// segregated_cublas: stride-2 transposed convolution as the four kernel-segregation phases (Tida et
// al.), each an explicit im2col of the un-upsampled input + ONE cuBLAS strided-batched GEMM over the
// four phases + one epilogue that interleaves the phase results into NCHW with bias + activation.
// The CPU segregated_gemm's design (explicit per-phase columns, rearranging epilogue pass) on cuBLAS.
// It reuses this file's phase math (phase_axis, phase_taps) and call checks (tconv_call).
//
// Layout (per chunk of `imgs` images; Hp x Wp = ceil(HO/2) x ceil(WO/2), the largest phase grid):
//   A_ph [C_out][K]   K = C_in * th * tw, th = ceil(KH/2), tw = ceil(KW/2) (the most taps of any
//                     phase), k = (ci*th + ty)*tw + tx; flipped sub-kernel, zeros where the phase has
//                     fewer taps (odd kernels) -- prepared once, storage type.
//   B_ph [K][cols]    cols = imgs*Hp*Wp, col = (img*Hp + m)*Wp + mm; zero for padding taps, taps
//                     outside the input and (m, mm) outside this phase's own grid (odd outputs).
//   C_ph [C_out][cols] = A_ph B_ph: one cuda::gemm, batch 4 (fp16: tensor cores, fp32 accumulation;
//                     tf32: TF32; fp32: strict).
//   y[n][co][oy][ox] = act(C_ph[co][(n*Hp + oy/2)*Wp + ox/2] + bias[co]), ph = ((oy+pt)%2, (ox+pl)%2).
constexpr size_t kScBudget = size_t(256) << 20;  // columns + phase outputs of one chunk (>= 1 image)
constexpr int kScRows = 8;                       // column rows (k) per thread in the im2col kernel

struct ScPhase {
  int nj, ni;                    // taps of this phase along H and W (<= th, tw; 0: no taps)
  int64_t count_h, count_w;      // this phase's output grid (<= Hp, Wp; may be 0)
  int64_t q0h, q0w;              // input row/column of the phase's first output, tap j = 0
};

struct ScGeom {
  ScPhase ph[4];                 // ph = rh*2 + rw, rh = (oy + pad_top) % 2
  int64_t CI, H, W, CO, HO, WO;
  int64_t th, tw, K;             // K = CI*th*tw: the batched GEMM's K (same for all four phases)
  int64_t Hp, Wp, HpWp;          // the largest phase grid: the batched layout
};

ScGeom sc_geom(const TconvDims& d) {
  ScGeom g{};
  g.CI = d.CI;
  g.H = d.H;
  g.W = d.W;
  g.CO = d.CO;
  g.HO = d.HO;
  g.WO = d.WO;
  g.th = g.tw = 0;
  for (int rh = 0; rh < 2; ++rh)
    for (int rw = 0; rw < 2; ++rw) {
      ScPhase& s = g.ph[rh * 2 + rw];
      const PhaseAxis ah = phase_axis(rh, 2, d.pt, d.HO), aw = phase_axis(rw, 2, d.pl, d.WO);
      s.nj = static_cast<int>(phase_taps(rh, 2, d.KH));
      s.ni = static_cast<int>(phase_taps(rw, 2, d.KW));
      s.count_h = ah.count;
      s.count_w = aw.count;
      s.q0h = ah.q0;
      s.q0w = aw.q0;
      g.th = std::max<int64_t>(g.th, s.nj);
      g.tw = std::max<int64_t>(g.tw, s.ni);
    }
  g.K = d.CI * g.th * g.tw;
  g.Hp = (d.HO + 1) / 2;  // = the count of the phase whose first row is 0
  g.Wp = (d.WO + 1) / 2;
  g.HpWp = g.Hp * g.Wp;
  return g;
}

// Images per chunk: columns (4*K*HpWp) + phase outputs (4*CO*HpWp) per image within kScBudget, at
// least one image, and few enough that the GEMM's n = imgs*HpWp stays within int.
int64_t sc_chunk(const ScGeom& g, int64_t N, Precision p) {
  if (N <= 0 || g.HpWp == 0) return 0;
  const size_t per_image = static_cast<size_t>(4 * (g.K + g.CO) * g.HpWp) * element_size(p);
  return std::min<int64_t>(images_per_chunk(N, per_image, kScBudget), std::max<int64_t>(1, INT_MAX / g.HpWp));
}

size_t sc_col_bytes(const ScGeom& g, int64_t chunk, Precision p) {
  return align256(static_cast<size_t>(4 * g.K * chunk * g.HpWp) * element_size(p));
}
size_t sc_out_bytes(const ScGeom& g, int64_t chunk, Precision p) {
  return align256(static_cast<size_t>(4 * g.CO * chunk * g.HpWp) * element_size(p));
}

bool segregated_cublas_applicable(const NodeDesc& node) {
  if (!valid(node) || !has_constant_weight(node) || strides(node) != std::make_pair(2, 2)) return false;
  const TconvDims d = tconv_dims(node);
  const ScGeom g = sc_geom(d);
  // cuBLAS takes int m, n, k and leading dimensions; the epilogue indexes one plane in int.
  return g.K <= INT_MAX && d.CO <= INT_MAX && g.HpWp <= INT_MAX && d.HO * d.WO <= INT_MAX &&
         4 * d.CO * g.K <= (int64_t(1) << 40);
}

size_t segregated_cublas_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  const ScGeom g = sc_geom(d);
  if (d.N == 0 || d.CO == 0 || g.HpWp == 0) return 0;
  const int64_t chunk = sc_chunk(g, d.N, node.precision);
  return sc_col_bytes(g, chunk, node.precision) + sc_out_bytes(g, chunk, node.precision);
}

struct ScPrepared {
  Precision precision;
  int64_t CO, CI, KH, KW, K;
  std::unique_ptr<DeviceArray> a;  // [4][C_out][K], storage type
};

std::shared_ptr<void> prepare_segregated_cublas(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  if (d.sh != 2 || d.sw != 2) throw Error("cuda conv_transpose2d.segregated_cublas: stride must be 2x2");
  const float* w = host_weight(node, "segregated_cublas");
  const ScGeom g = sc_geom(d);
  std::vector<float> a(static_cast<size_t>(4 * d.CO * g.K), 0.f);
  for (int ph = 0; ph < 4; ++ph) {
    const ScPhase& s = g.ph[ph];
    const int rh = ph / 2, rw = ph % 2;
    for (int64_t co = 0; co < d.CO; ++co) {
      float* row = a.data() + (ph * d.CO + co) * g.K;
      for (int64_t ci = 0; ci < d.CI; ++ci)
        for (int ty = 0; ty < s.nj; ++ty)
          for (int tx = 0; tx < s.ni; ++tx) {
            // flipped sub-kernel: tap ty of phase rh is the original tap ky = rh + 2*(nj-1-ty)
            const int64_t ky = rh + 2 * (s.nj - 1 - ty), kx = rw + 2 * (s.ni - 1 - tx);
            row[(ci * g.th + ty) * g.tw + tx] = w[((ci * d.CO + co) * d.KH + ky) * d.KW + kx];
          }
    }
  }
  auto out = std::make_shared<ScPrepared>();
  out->precision = node.precision;
  out->CO = d.CO;
  out->CI = d.CI;
  out->KH = d.KH;
  out->KW = d.KW;
  out->K = g.K;
  out->a = upload(a.data(), a.size(), node.precision);
  return out;
}

// Per-phase column matrices of images [0, imgs) of x. Grid: x = column blocks of 256 (one thread per
// column, fixed for the thread: its image/row/column is decoded once), y = groups of kScRows rows
// (grid-stride), z = phase. For one row k, consecutive threads read consecutive input columns and
// write consecutive column elements: coalesced both ways. Every element is written (zeros included).
template <class T>
__global__ void sc_columns_kernel(const T* __restrict__ x, T* __restrict__ cols, ScGeom g, int ncols) {
  const int64_t col64 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col64 >= ncols) return;
  const int col = static_cast<int>(col64);
  const int ph = blockIdx.z;
  const ScPhase P = g.ph[ph];
  const int hpwp = static_cast<int>(g.HpWp), wp = static_cast<int>(g.Wp);
  const int img = col / hpwp, r = col - img * hpwp, m = r / wp, mm = r - m * wp;
  const bool col_ok = m < P.count_h && mm < P.count_w;
  const T* xn = x + int64_t(img) * g.CI * g.H * g.W;
  const int64_t iy0 = P.q0h + m - (P.nj - 1), ix0 = P.q0w + mm - (P.ni - 1);
  T* out = cols + int64_t(ph) * g.K * ncols + col;
  const int th = static_cast<int>(g.th), tw = static_cast<int>(g.tw);
  const int64_t kgroups = (g.K + kScRows - 1) / kScRows;
  for (int64_t kg = blockIdx.y; kg < kgroups; kg += gridDim.y) {
    const int64_t k0 = kg * kScRows;
    int64_t ci = k0 / (th * tw);
    int rest = static_cast<int>(k0 - ci * th * tw), ty = rest / tw, tx = rest - ty * tw;
#pragma unroll
    for (int i = 0; i < kScRows; ++i) {
      const int64_t k = k0 + i;
      if (k >= g.K) break;
      T v = from_float<T>(0.f);
      if (col_ok && ty < P.nj && tx < P.ni) {
        const int64_t iy = iy0 + ty, ix = ix0 + tx;
        if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W) v = xn[(ci * g.H + iy) * g.W + ix];
      }
      out[k * ncols] = v;
      if (++tx == tw) {
        tx = 0;
        if (++ty == th) {
          ty = 0;
          ++ci;
        }
      }
    }
  }
}

// Interleaves the four phase results into y (images [0, imgs) of the chunk) with bias + activation.
// Grid: x = blocks of 256 consecutive output elements of one (image, channel) plane (one thread per
// output, coalesced stores), y = planes (grid-stride). The phase of (oy, ox) is ((oy+pt)%2,
// (ox+pl)%2) and its grid position (oy/2, ox/2): "P -> floor(P/2), odd P swaps the phase order".
template <class T>
__global__ void sc_epilogue_kernel(const T* __restrict__ c, const T* __restrict__ bias, T* __restrict__ y,
                                   ScGeom g, int64_t planes, int ncols, int pt, int pl,
                                   DeviceActivation act) {
  const int howo = static_cast<int>(g.HO * g.WO), wo = static_cast<int>(g.WO);
  const int64_t e64 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e64 >= howo) return;
  const int e = static_cast<int>(e64);
  const int oy = e / wo, ox = e - oy * wo;
  const int ph = ((oy + pt) & 1) * 2 + ((ox + pl) & 1);
  const int64_t cell = int64_t(oy >> 1) * g.Wp + (ox >> 1);
  for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
    const int64_t img = p / g.CO, co = p - img * g.CO;
    float v = to_float(c[(ph * g.CO + co) * ncols + img * g.HpWp + cell]);
    if (bias) v += to_float(bias[co]);
    y[p * howo + e] = from_float<T>(activate(act, v));
  }
}

void run_segregated_cublas(const KernelCall& call) {
  const TconvCall c = tconv_call(call, "segregated_cublas");
  const TconvDims& d = c.d;
  if (d.sh != 2 || d.sw != 2) throw Error("cuda conv_transpose2d.segregated_cublas: stride must be 2x2");
  const Precision p = call.node.precision;
  const ScGeom g = sc_geom(d);
  const auto* prep = static_cast<const ScPrepared*>(call.prepared);
  if (!prep || prep->precision != p || prep->CO != d.CO || prep->CI != d.CI || prep->KH != d.KH ||
      prep->KW != d.KW || prep->K != g.K)
    throw Error("cuda conv_transpose2d.segregated_cublas: not prepared for this node");
  if (g.K > INT_MAX || g.HpWp > INT_MAX || d.HO * d.WO > INT_MAX)
    throw Error("cuda conv_transpose2d.segregated_cublas: node too large");
  const size_t ws = segregated_cublas_workspace_bytes(call.node);
  if (!call.workspace && ws > 0) throw Error("cuda conv_transpose2d.segregated_cublas: missing workspace");
  Context& ctx = context_of(call);
  if (ws == 0) return;  // empty output (N, C_out or the output plane is 0)
  const size_t es = element_size(p);
  const int64_t chunk = sc_chunk(g, d.N, p);
  char* col = static_cast<char*>(call.workspace);
  char* out = col + sc_col_bytes(g, chunk, p);
  const int64_t x_image = d.CI * d.H * d.W, y_image = d.CO * d.HO * d.WO;
  for (int64_t n0 = 0; n0 < d.N; n0 += chunk) {
    const int64_t imgs = std::min(chunk, d.N - n0);
    const int ncols = static_cast<int>(imgs * g.HpWp);
    const char* xc = static_cast<const char*>(c.x) + static_cast<size_t>(n0 * x_image) * es;
    char* yc = static_cast<char*>(c.y) + static_cast<size_t>(n0 * y_image) * es;
    if (g.K > 0) {
      // (1) the columns of all four phases
      const int64_t kgroups = (g.K + kScRows - 1) / kScRows;
      const dim3 grid(static_cast<unsigned>((int64_t(ncols) + 255) / 256),
                      static_cast<unsigned>(std::min<int64_t>(kgroups, 65535)), 4u);
      dispatch(p, [&](auto tag) {
        using T = decltype(tag);
        sc_columns_kernel<T><<<grid, 256, 0, ctx.stream>>>(reinterpret_cast<const T*>(xc),
                                                           reinterpret_cast<T*>(col), g, ncols);
      });
      INFER_CUDA_CHECK_LAUNCH();
      // (2) C_ph = A_ph B_ph for the four phases in one strided-batched GEMM
      GemmArgs a;
      a.m = d.CO;
      a.n = ncols;
      a.k = g.K;
      a.a = prep->a->data();
      a.lda = g.K;
      a.stride_a = d.CO * g.K;
      a.b = col;
      a.ldb = ncols;
      a.stride_b = g.K * ncols;
      a.c = out;
      a.ldc = ncols;
      a.stride_c = d.CO * ncols;
      a.batch = 4;
      gemm(ctx, p, a);
    } else {  // C_in == 0: every phase result is 0 (the output is act(bias))
      INFER_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(4 * d.CO * ncols) * es, ctx.stream));
    }
    // (3) interleave into NCHW with bias + activation
    const int64_t planes = imgs * d.CO;
    const dim3 grid(static_cast<unsigned>((d.HO * d.WO + 255) / 256),
                    static_cast<unsigned>(std::min<int64_t>(planes, 65535)));
    dispatch(p, [&](auto tag) {
      using T = decltype(tag);
      sc_epilogue_kernel<T><<<grid, 256, 0, ctx.stream>>>(
          reinterpret_cast<const T*>(out), static_cast<const T*>(c.bias), reinterpret_cast<T*>(yc), g,
          planes, ncols, d.pt, d.pl, device_activation(d.act));
    });
    INFER_CUDA_CHECK_LAUNCH();
  }
}

// segregated_cublas's per-node priority. Batched small-spatial layers: at batch 32 on the H100
// (2026-11-23, bench/results/gpu-2026-11-23.md, Table 4) it was the fastest variant on every 4x4
// input (fp32: EB-GAN 4x4x2048 0.78 ms vs 1.75 for gemm_col2im, DCGAN 0.27 vs 0.45; fp16: 0.12 vs
// 0.45, 0.056 vs 0.113) and on 8x8 inputs with >= 1024 channels (EB-GAN 0.79 vs 0.85 fp32, 0.17 vs
// 0.21 fp16), where one batched GEMM over the four phases has enough columns to fill the GPU and
// the col2im columns (16x the input) cost more than the phase columns (4x). At batch 1 it lost
// everywhere (4x4x2048 0.28 vs 0.10 ms), so the rule starts at batch 16 (batches 2-31 were not
// measured). 27: above gemm_col2im's 25. Otherwise 15, below segregated_gemm (20).
static int segregated_cublas_priority(const NodeDesc& node) {
  if (!valid(node)) return 15;
  const TconvDims d = tconv_dims(node);
  const bool batched = d.N >= 16;
  if (batched && (d.H * d.W <= 16 || (d.H * d.W <= 64 && d.CI >= 1024))) return 27;
  return 15;
}


}  // namespace

// gemm_col2im's per-node priority (KernelVariant::priority_for; fixed ones: flipped_conv 30,
// segregated_gemm 20, segregated_unified 10, conventional 1). Reasoning, from the H100 batch-1
// measurements of DCGAN / EB-GAN (docs/kernels.md) and what the kernels are bound by:
//  - 1x1 input (the z -> 4x4 first layer, any stride): a GEMM M = C_out*KH*KW, N = 1, K = C_in per
//    image (strided-batched, so the weight is read once per image: 31% of DCGAN at batch 64 fp16;
//    one GEMM with N = batch would read it once) and a trivial col2im; flipped_conv would im2col a
//    mostly-padding 4x4 window per output pixel, and segregated_gemm's phases have one column each.
//    35: above everything.
//  - stride 2, H*W <= 4096 (4x4 .. 64x64 inputs): cuBLAS + col2im measured faster than both of
//    segregated_gemm's paths on the H100 (2026-11-23, EB-GAN batch 1 fp32: 4x4x2048 0.105 vs 0.127 ms
//    for the skinny weight-streaming path, 8x8x1024 0.043 vs 0.112 ms; fp16 and batch 32 likewise).
//    25: above segregated_gemm.
//  - stride 2, H*W > 4096 (128x128): segregated_gemm measured faster (fp32 0.130 vs 0.183 ms, fp16
//    0.062 vs 0.116): the col2im columns (16x the output for a 4x4 kernel) dominate. Stay below.
//  - any other case: 12, above segregated_unified and conventional, which it beats everywhere it
//    was measured (e.g. a stride-2 node with a non-constant weight, or stride 3).
//  - stride 1 (not 1x1): flipped_conv (30) stays the default.
static int gemm_col2im_priority(const NodeDesc& node) {
  if (!valid(node)) return 12;
  const TconvDims d = tconv_dims(node);
  if (d.H * d.W == 1) return 35;
  if (d.sh == 2 && d.sw == 2 && segregated_gemm_applicable(node)) return d.H * d.W <= 4096 ? 25 : 5;
  return 12;
}

uint64_t conv_transpose2d_upsampled_bytes(const NodeDesc& desc) {
  const TconvDims d = tconv_dims(desc);
  if (d.pt >= d.KH || d.pb >= d.KH || d.pl >= d.KW || d.pr >= d.KW)
    throw Error("cuda conv_transpose2d_upsampled_bytes: padding must be smaller than the kernel");
  return upsampled_elements(d) * element_size(desc.precision);
}

namespace {

bool flipped_applicable(const NodeDesc& node) {
  return valid(node) && has_constant_weight(node) && strides(node) == std::make_pair(1, 1);
}

bool col2im_applicable(const NodeDesc& node) {
  if (!valid(node)) return false;
  const TconvDims d = tconv_dims(node);
  // cuBLAS's int dimensions; col2im's 32-bit in-plane index math (one image's columns per output
  // channel, and an output plane, under 2^31 elements)
  return d.CO * d.KH * d.KW <= INT_MAX && d.H * d.W <= INT_MAX && d.CI <= INT_MAX &&
         d.KH * d.KW * d.H * d.W <= INT_MAX && d.HO * d.WO <= INT_MAX && d.CO <= INT_MAX;
}

bool unified_applicable(const NodeDesc& node) {
  return valid(node) && strides(node) == std::make_pair(2, 2);
}

}  // namespace

void register_conv_transpose2d(KernelRegistry& registry) {
  registry.add("cuda", {
      {.op = "conv_transpose2d", .name = "flipped_conv", .priority = 30,
       .applicable = flipped_applicable, .workspace_bytes = flipped_workspace_bytes,
       .prepare = prepare_flipped, .run = run_flipped_conv},
      // priority: when a caller ignores priority_for
      {.op = "conv_transpose2d", .name = "gemm_col2im", .priority = 12,
       .priority_for = gemm_col2im_priority, .applicable = col2im_applicable,
       .workspace_bytes = col2im_workspace_bytes, .run = run_gemm_col2im},
      {.op = "conv_transpose2d", .name = "segregated_gemm", .priority = 20,
       .applicable = segregated_gemm_applicable, .prepare = prepare_segregated_gemm,
       .run = run_segregated_gemm},
      {.op = "conv_transpose2d", .name = "segregated_unified", .priority = 10,
       .applicable = unified_applicable, .run = run_unified},
      {.op = "conv_transpose2d", .name = "conventional", .priority = 1,
       .applicable = conventional_applicable, .workspace_bytes = conventional_workspace_bytes,
       .prepare = prepare_flipped, .run = run_conventional},
      // priority: when a caller ignores priority_for, below segregated_gemm (20)
      {.op = "conv_transpose2d", .name = "segregated_cublas", .priority = 15,
       .priority_for = segregated_cublas_priority, .applicable = segregated_cublas_applicable,
       .workspace_bytes = segregated_cublas_workspace_bytes, .prepare = prepare_segregated_cublas,
       .run = run_segregated_cublas},
  });
}

}  // namespace infer::cuda
