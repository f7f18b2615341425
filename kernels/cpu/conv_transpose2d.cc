// CPU transposed convolution (weight [C_in,C_out/groups,KH,KW], asymmetric padding, output_padding,
// bias, fused activation), float32, OpenMP + OpenBLAS. Five variants; gemm_col2im is the general one
// (any groups, dilation, stride); the other four take groups 1 and dilation 1 only (`applicable`):
//   conventional  Tida et al. Algorithm 1: zero-upsampled + padded input buffer, then a stride-1
//                 convolution with the flipped, in/out-swapped kernel (banded im2col + sgemm).
//   segregated_unified  Tida et al. Algorithm 2 (unified kernel segregation): no upsampled buffer;
//                 each output takes the sub-kernel of its (row % s, col % s) phase. Register-tiled
//                 micro-kernels per ISA level: kernels/cpu/conv_transpose2d_unified.cc.
//   segregated_gemm  the same phases as one implicit GEMM each (im2col of the un-upsampled input +
//                 sgemm); each result tile is stored strided into y by the bias/activation
//                 epilogue while still in cache ("strided dgrad").
//   flipped_conv  stride 1: a plain convolution with the flipped kernel, GEMM straight into y.
//   gemm_col2im   Caffe/PyTorch deconvolution: columns = W^T x (one sgemm per group), then a
//                 gathering col2im whose taps land dilation apart.
// The phase algebra holds for any stride s (s*s phases): segregated_* are the general path too.
// All but segregated_unified apply a per-channel PRelu epilogue (fuse_prelu) as channel c's LeakyRelu.
#include "kernels/conv_shapes.h"
#include "kernels/cpu/conv_transpose2d.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "infer/error.h"
#include "kernels/cpu/conv_transpose2d_unified.h"
#include "infer/kernel.h"
#include "infer/openblas.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {
namespace {

constexpr int64_t kTileFloats = int64_t(1) << 20;  // 4 MiB: a band's col / GEMM tile budget
// Loops with less work than this (elements or multiply-adds) run on one thread: waking the OpenMP
// team costs more than they do, and far more on a loaded machine where idle threads spin.
constexpr int64_t kParallelMin = int64_t(1) << 15;

// The node's validated sizes (kernels/conv_shapes.h): every size a kernel loop uses is checked there.
using TconvDims = ConvTranspose2DDims;
TconvDims tconv_dims(const NodeDesc& node) { return conv_transpose2d_dims(node, "cpu"); }

// Run-time unpacking: dims plus the call's pointers (checked non-null by check_kernel_call).
using TconvCall = ConvLikeCall<TconvDims, float>;
TconvCall tconv_call(const KernelCall& call) { return conv_like_call<float>(call, tconv_dims(call.node)); }

// ---- the phase decomposition --------------------------------------------------------------------
// Output row oy receives x[iy] * w[ky] exactly when iy*s - pad + ky = oy, i.e. ky = r + s*j with
// phase r = (oy + pad) % s and iy = (oy + pad) / s - j. Phase r therefore convolves the un-upsampled
// input with the sub-kernel of taps r, r+s, r+2s, ... (ceil((K-r)/s) of them; for s = 2, K = 4 both
// phases have 2 taps; for odd K they differ by one), stored flipped so that the sum is an ordinary
// correlation. With pad P the input offset is (oy + P) / s = oy/s + floor(P/2) for s = 2, and odd P
// makes even output rows phase 1: the paper's "P -> floor(P/2), odd P swaps the phase order".

struct Phase {
  int64_t nj = 0, ni = 0;  // taps along H and W (0 when s > K leaves this phase without taps)
  std::vector<float> a;    // [CO][CI*nj*ni], a[co][(ci*nj + ty)*ni + tx] = flipped sub-kernel
};

struct PhasePlan {
  int sh = 1, sw = 1;
  std::vector<Phase> phases;  // index rh*sw + rw
};

// phase_axis / phase_taps: kernels/conv_shapes.h.

// Sub-kernels for strides (sh, sw), prepared once. With sh = sw = 1 the single phase is the whole
// kernel flipped with C_in/C_out swapped: the weight of the conventional and flipped_conv variants.
std::shared_ptr<PhasePlan> make_phases(const TconvDims& d, const float* w, int sh, int sw) {
  if (!w) throw Error("cpu conv_transpose2d: the weight must be a constant");
  if (d.G != 1 || d.dh != 1 || d.dw != 1)
    throw Error("cpu conv_transpose2d: groups and dilation must be 1 for this variant (gemm_col2im takes any)");
  auto plan = std::make_shared<PhasePlan>();
  plan->sh = sh;
  plan->sw = sw;
  for (int rh = 0; rh < sh; ++rh)
    for (int rw = 0; rw < sw; ++rw) {
      Phase ph;
      ph.nj = phase_taps(rh, sh, d.KH);
      ph.ni = phase_taps(rw, sw, d.KW);
      const int64_t K = d.CI * ph.nj * ph.ni;
      ph.a.resize(static_cast<size_t>(d.CO * K));
      for (int64_t co = 0; co < d.CO; ++co)
        for (int64_t ci = 0; ci < d.CI; ++ci)
          for (int64_t ty = 0; ty < ph.nj; ++ty)
            for (int64_t tx = 0; tx < ph.ni; ++tx) {
              const int64_t ky = rh + sh * (ph.nj - 1 - ty), kx = rw + sw * (ph.ni - 1 - tx);
              ph.a[static_cast<size_t>(co * K + (ci * ph.nj + ty) * ph.ni + tx)] =
                  w[((ci * d.CO + co) * d.KH + ky) * d.KW + kx];
            }
      plan->phases.push_back(std::move(ph));
    }
  return plan;
}

// The stride-1 convolution that phase (rh, rw) is, over one sample of x.
ConvProblem phase_geometry(const TconvDims& d, const Phase& ph, const PhaseAxis& ah,
                            const PhaseAxis& aw) {
  return conv_transpose2d_flipped_problem(d, ph.nj, ph.ni, ph.nj - 1 - ah.q0, ph.ni - 1 - aw.q0, ah.count,
                                          aw.count);
}

size_t round_up64(size_t floats) { return (floats + 63) / 64 * 64; }

// ---- segregated_gemm / flipped_conv -------------------------------------------------------------

// Workspace floats of one phase: its col band and (unless it is the whole, contiguous output) the
// GEMM tile the epilogue scatters from.
void phase_workspace(const TconvDims& d, const Phase& ph, const PhaseAxis& ah, const PhaseAxis& aw,
                     bool contiguous, size_t& col, size_t& tile) {
  if (ph.nj == 0 || ph.ni == 0 || ah.count == 0 || aw.count == 0) return;
  const ConvProblem g = phase_geometry(d, ph, ah, aw);
  if (contiguous) {
    col = std::max(col, conv_band_col_floats(g, d.CO));
    return;
  }
  const int64_t band = conv_band_rows(g, d.CO);
  col = std::max(col, static_cast<size_t>(g.col_rows() * band * g.WO));
  tile = std::max(tile, static_cast<size_t>(d.CO * band * g.WO));
}

size_t gemm_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  size_t col = 0, tile = 0;
  const bool contiguous = d.sh == 1 && d.sw == 1;
  for (int rh = 0; rh < d.sh; ++rh)
    for (int rw = 0; rw < d.sw; ++rw) {
      Phase ph;  // sizes only
      ph.nj = phase_taps(rh, d.sh, d.KH);
      ph.ni = phase_taps(rw, d.sw, d.KW);
      phase_workspace(d, ph, phase_axis(rh, d.sh, d.pt, d.HO), phase_axis(rw, d.sw, d.pl, d.WO),
                      contiguous, col, tile);
    }
  return (round_up64(col) + tile) * sizeof(float);
}

// Writes act(bias) into every output of a phase that has no taps (stride > kernel).
void fill_tapless_phase(const TconvCall& c, float* yn, const PhaseAxis& ah, const PhaseAxis& aw) {
  const TconvDims& d = c.d;
#pragma omp parallel for schedule(static) if (d.CO * ah.count * aw.count >= kParallelMin)
  for (int64_t co = 0; co < d.CO; ++co) {
    const float v = activate(channel_activation(d.p->activation, c.slope, co), c.bias ? c.bias[co] : 0.f);
    float* yc = yn + co * d.HO * d.WO;
    for (int64_t m = 0; m < ah.count; ++m)
      for (int64_t mm = 0; mm < aw.count; ++mm)
        yc[(ah.first + d.sh * m) * d.WO + aw.first + d.sw * mm] = v;
  }
}

void run_segregated_gemm(const KernelCall& call) {
  const TconvCall c = tconv_call(call);
  const TconvDims& d = c.d;
  const auto* plan = static_cast<const PhasePlan*>(call.prepared);
  if (!plan || plan->sh != d.sh || plan->sw != d.sw)
    throw Error("cpu conv_transpose2d.segregated_gemm: not prepared for this node");
  if (!call.workspace && gemm_workspace_bytes(call.node) > 0)
    throw Error("cpu conv_transpose2d.segregated_gemm: missing workspace");
  const bool contiguous = d.sh == 1 && d.sw == 1;
  size_t col_floats = 0, tile_floats = 0;
  for (int rh = 0; rh < d.sh; ++rh)
    for (int rw = 0; rw < d.sw; ++rw)
      phase_workspace(d, plan->phases[static_cast<size_t>(rh * d.sw + rw)],
                      phase_axis(rh, d.sh, d.pt, d.HO), phase_axis(rw, d.sw, d.pl, d.WO),
                      contiguous, col_floats, tile_floats);
  float* col = static_cast<float*>(call.workspace);
  float* tile = col + round_up64(col_floats);
  const Activation& act = d.p->activation;

  for (int64_t n = 0; n < d.N; ++n) {
    const float* xn = c.x + n * d.CI * d.H * d.W;
    float* yn = c.y + n * d.CO * d.HO * d.WO;
    for (int rh = 0; rh < d.sh; ++rh)
      for (int rw = 0; rw < d.sw; ++rw) {
        const Phase& ph = plan->phases[static_cast<size_t>(rh * d.sw + rw)];
        const PhaseAxis ah = phase_axis(rh, d.sh, d.pt, d.HO);
        const PhaseAxis aw = phase_axis(rw, d.sw, d.pl, d.WO);
        if (ah.count == 0 || aw.count == 0) continue;
        if (ph.nj == 0 || ph.ni == 0) {
          fill_tapless_phase(c, yn, ah, aw);
          continue;
        }
        const ConvProblem g = phase_geometry(d, ph, ah, aw);
        if (contiguous) {  // stride 1: the one phase is the whole output, GEMM writes y directly
          conv_gemm_banded(g, ph.a.data(), d.CO, xn, col, yn, d.HO * d.WO, c.bias, act, c.slope);
          continue;
        }
        // A phase's outputs sit at stride s in both spatial dims of y, which sgemm (unit stride
        // within a row of C) cannot address. So the GEMM of a band of phase rows goes to a tile of
        // <= 4 MiB and the bias + activation epilogue, a pass every variant needs anyway, stores
        // it strided into y while the tile is still in cache: no separate rearrangement of the
        // whole output, but each phase result is written twice (tile, then y).
        const int64_t K = g.col_rows(), band = conv_band_rows(g, d.CO);
        for (int64_t m0 = 0; m0 < g.HO; m0 += band) {
          const int64_t rows = std::min(band, g.HO - m0), cols = rows * g.WO;
          ConvProblem gb = g;
          gb.HO = rows;
          gb.pad_top = g.pad_top - m0;
          im2col(gb, xn, col);
          sgemm(false, false, d.CO, cols, K, 1.f, ph.a.data(), K, col, cols, 0.f, tile, cols);
#pragma omp parallel for schedule(static) if (d.CO * cols >= kParallelMin)
          for (int64_t co = 0; co < d.CO; ++co) {
            const float b = c.bias ? c.bias[co] : 0.f;
            const Activation act_co = channel_activation(act, c.slope, co);  // a per-channel PRelu: co's
            const float* t = tile + co * cols;
            float* yc = yn + co * d.HO * d.WO;
            for (int64_t mr = 0; mr < rows; ++mr) {
              float* yr = yc + (ah.first + d.sh * (m0 + mr)) * d.WO + aw.first;
              const float* tr = t + mr * g.WO;
              for (int64_t mm = 0; mm < g.WO; ++mm) yr[d.sw * mm] = activate(act_co, tr[mm] + b);
            }
          }
        }
      }
  }
}

// ---- conventional (Algorithm 1) -----------------------------------------------------------------

// The upsampled buffer's geometry: x[iy][ix] sits at U[(KH-1-pad_top) + iy*s_h][(KW-1-pad_left) +
// ix*s_w]; U has HO + KH - 1 rows (so a valid stride-1 KHxKW convolution yields HO rows), i.e.
// (H-1)*s + 1 + (KH-1-pad_top) + (KH-1-pad_bottom) + output_padding.
ConvProblem upsampled_geometry(const TconvDims& d) {
  if (d.G != 1 || d.dh != 1 || d.dw != 1)
    throw Error("cpu conv_transpose2d.conventional: groups and dilation must be 1");
  if (d.pt > d.KH - 1 || d.pl > d.KW - 1 || d.p->pad.bottom > d.KH - 1 ||
      d.p->pad.right > d.KW - 1)
    throw Error("cpu conv_transpose2d.conventional: padding must be smaller than the kernel");
  ConvProblem g;
  g.C = d.CI;
  g.H = d.HO + d.KH - 1;
  g.W = d.WO + d.KW - 1;
  g.KH = d.KH;
  g.KW = d.KW;
  g.HO = d.HO;
  g.WO = d.WO;
  return g;
}

size_t conventional_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  const ConvProblem g = upsampled_geometry(d);
  return (round_up64(static_cast<size_t>(g.C * g.H * g.W)) + conv_band_col_floats(g, d.CO)) *
         sizeof(float);
}

void run_conventional(const KernelCall& call) {
  const TconvCall c = tconv_call(call);
  const TconvDims& d = c.d;
  const auto* plan = static_cast<const PhasePlan*>(call.prepared);
  if (!plan || plan->sh != 1 || plan->sw != 1)
    throw Error("cpu conv_transpose2d.conventional: not prepared for this node");
  if (!call.workspace) throw Error("cpu conv_transpose2d.conventional: missing workspace");
  const ConvProblem g = upsampled_geometry(d);
  float* up = static_cast<float*>(call.workspace);
  float* col = up + round_up64(static_cast<size_t>(g.C * g.H * g.W));
  const int64_t top = d.KH - 1 - d.pt, left = d.KW - 1 - d.pl;
  for (int64_t n = 0; n < d.N; ++n) {
    const float* xn = c.x + n * d.CI * d.H * d.W;
#pragma omp parallel for schedule(static) if (g.C * g.H * g.W >= kParallelMin)
    for (int64_t ci = 0; ci < d.CI; ++ci) {  // zero-insertion: zeros everywhere, then x at stride s
      float* u = up + ci * g.H * g.W;
      std::memset(u, 0, sizeof(float) * static_cast<size_t>(g.H * g.W));
      for (int64_t iy = 0; iy < d.H; ++iy)
        for (int64_t ix = 0; ix < d.W; ++ix)
          u[(top + iy * d.sh) * g.W + left + ix * d.sw] = xn[(ci * d.H + iy) * d.W + ix];
    }
    conv_gemm_banded(g, plan->phases[0].a.data(), d.CO, up, col, c.y + n * d.CO * d.HO * d.WO,
                     d.HO * d.WO, c.bias, d.p->activation, c.slope);
  }
}

// ---- gemm_col2im --------------------------------------------------------------------------------
// Caffe / PyTorch deconvolution (the CUDA backend's gemm_col2im) in bands of output rows, so the
// columns stay in cache. For output rows [o0, o1) of one sample, the input rows [i0, i1) that reach
// them give the columns
//   col[(co*KH + ky)*KW + kx][(iy - i0)*W + ix] = sum_ci w[ci][co][ky][kx] * x[ci][iy][ix]
// in one sgemm (the weight as stored, [C_in][C_out*KH*KW], is A^T: no prepare, works for a
// non-constant weight too), then every output row of the band is gathered from the columns of its
// taps by the thread that owns it: y[co][oy][ox] = act(bias + sum of col over the (ky, kx) with
// (oy + pad_top - ky) % s_h == 0 and likewise along x). Consecutive bands share (KH - 1) / s_h input
// rows, whose columns are computed twice. Groups: the columns keep the same [C_out*KH*KW] row
// order, each group's COG*KH*KW rows one sgemm over its CIG input channels (weight rows
// [g*CIG, (g+1)*CIG) of [C_in][COG*KH*KW]). Dilation: tap (ky, kx) lands at oy = iy*s_h - pad_top +
// ky*d_h (likewise x), so the band's input rows and the gather's tap test use ky*d_h, and the
// dilated extent d_h*(KH-1)+1 takes KH's place in the band arithmetic.
// Any stride; work C_out/G*KH*KW*C_in*H*W multiply-adds: the
// full-kernel GEMM (no zero taps), with the column matrix C_out*KH*KW / s_h*s_w times the output
// rather than the C_in*KH*KW / s_h*s_w of the phase GEMMs, which wins where C_out is small against
// C_in (DCGAN's 128 -> 3 last layer) and for 1x1 inputs (one GEMV).

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// The dilated kernel height d_h*(KH-1)+1: the rows one input row's taps span.
int64_t dilated_kh(const TconvDims& d) { return d.dh * (d.KH - 1) + 1; }

// Input rows that one band of `out_rows` output rows can need: (out_rows + EKH - 2) / s + 1, <= H.
int64_t col2im_in_rows(const TconvDims& d, int64_t out_rows) {
  return std::min<int64_t>(d.H, (out_rows + dilated_kh(d) - 2) / d.sh + 1);
}

// Output rows per band: the most whose columns fit in kTileFloats (in_rows(ob) <= max_in <=> ob <=
// max_in*s - EKH + 1), at least 1 (then the workspace is one band's columns, whatever its size).
int64_t col2im_band_rows(const TconvDims& d) {
  const int64_t per_in_row = std::max<int64_t>(1, d.CO * d.KH * d.KW * d.W);
  const int64_t max_in = std::max<int64_t>(1, kTileFloats / per_in_row);
  return std::max<int64_t>(1, std::min(d.HO, max_in * d.sh - dilated_kh(d) + 1));
}

size_t col2im_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  const int64_t rows = col2im_in_rows(d, col2im_band_rows(d));
  return static_cast<size_t>(std::max<int64_t>(0, d.CO * d.KH * d.KW * rows * d.W)) * sizeof(float);
}

void run_gemm_col2im(const KernelCall& call) {
  const TconvCall c = tconv_call(call);
  const TconvDims& d = c.d;
  if (!call.workspace && col2im_workspace_bytes(call.node) > 0)
    throw Error("cpu conv_transpose2d.gemm_col2im: missing workspace");
  float* col = static_cast<float*>(call.workspace);
  const Activation& act = d.p->activation;
  const int64_t band = col2im_band_rows(d);
  const int64_t Mg = d.COG * d.KH * d.KW;  // column rows of one group
  for (int64_t n = 0; n < d.N; ++n) {
    const float* xn = c.x + n * d.CI * d.H * d.W;
    float* yn = c.y + n * d.CO * d.HO * d.WO;
    for (int64_t o0 = 0; o0 < d.HO; o0 += band) {
      const int64_t o1 = std::min(d.HO, o0 + band);
      // iy reaches oy through some ky in [0, KH) when oy = iy*s - pt + ky*dh
      const int64_t i0 = std::max<int64_t>(0, ceil_div(o0 + d.pt - dilated_kh(d) + 1, d.sh));
      const int64_t i1 = std::min<int64_t>(d.H, floor_div(o1 - 1 + d.pt, d.sh) + 1);
      const int64_t ncols = std::max<int64_t>(0, i1 - i0) * d.W;
      if (ncols > 0)
        for (int64_t g = 0; g < d.G; ++g)  // col rows [g*Mg, (g+1)*Mg) = w_g^T x_g
          sgemm(true, false, Mg, ncols, d.CIG, 1.f, c.w + g * d.CIG * Mg, Mg,
                xn + (g * d.CIG * d.H + i0) * d.W, d.H * d.W, 0.f, col + g * Mg * ncols, ncols);
#pragma omp parallel for schedule(static) if ((o1 - o0) * d.CO * d.WO * d.KH * d.KW / (d.sh * d.sw) >= kParallelMin)
      for (int64_t r = 0; r < (o1 - o0) * d.CO; ++r) {
        const int64_t co = r / (o1 - o0), oy = o0 + r % (o1 - o0);
        float* yr = yn + (co * d.HO + oy) * d.WO;
        const float b = c.bias ? c.bias[co] : 0.f;
        for (int64_t ox = 0; ox < d.WO; ++ox) yr[ox] = b;
        for (int64_t ky = 0; ky < d.KH; ++ky) {
          const int64_t t = oy + d.pt - ky * d.dh;
          if (t < 0 || t % d.sh != 0 || t / d.sh >= d.H) continue;  // then i0 <= t / s < i1
          const float* crow = col + (co * d.KH + ky) * d.KW * ncols + (t / d.sh - i0) * d.W;
          for (int64_t kx = 0; kx < d.KW; ++kx) {
            const float* cr = crow + kx * ncols;
            // ox = ix*s_w - pl + kx*dw within [0, WO)
            const int64_t off = kx * d.dw - d.pl;
            const int64_t ix0 = std::max<int64_t>(0, ceil_div(-off, d.sw));
            const int64_t ix1 = std::min<int64_t>(d.W - 1, floor_div(d.WO - 1 - off, d.sw));
            for (int64_t ix = ix0; ix <= ix1; ++ix) yr[ix * d.sw + off] += cr[ix];
          }
        }
        if (act.kind != ActivationKind::None) {
          const Activation act_co = channel_activation(act, c.slope, co);  // a per-channel PRelu: co's
          for (int64_t ox = 0; ox < d.WO; ++ox) yr[ox] = activate(act_co, yr[ox]);
        }
      }
    }
  }
}

// ---- registration -------------------------------------------------------------------------------

bool valid(const NodeDesc& node) { return conv_transpose2d_valid(node); }

// Every variant but gemm_col2im: groups 1, dilation 1 (conv_transpose2d_plain) and a constant weight.
bool valid_with_constant_weight(const NodeDesc& node) {
  return conv_transpose2d_plain(node) && has_constant_weight(node);
}

// The default choice per node (KernelVariant::priority_for; fixed: flipped_conv 30, segregated_gemm
// 20, conventional 1), from the Table-4 layers on the 2-core AMD EPYC (Zen 5) VM, 2026-11-27
// (docs/kernels.md "Default choice since 2026-11-27", docs/benchmarks.md): one thread, process CPU
// time, best of 3-7, ms summed over DCGAN's / EB-GAN's layers, segregated_unified vs the fastest
// OpenBLAS variant per layer: AVX-512 4.25 / 42.8 ms (every layer faster: 0.49-0.92x, the -> 3
// layer 0.101 vs gemm_col2im's 0.114); AVX2 with OpenBLAS at Haswell 7.3 / 69.3 (0.57-0.99x);
// baseline with OpenBLAS at Prescott 19.8 / 175.6 (0.62-1.01x). Also faster on stride 1 (3x3 p1
// 64 -> 64 at 32x32: 0.36 vs 0.49 ms), stride 3, the z projection and batch 8 (two threads,
// AVX-512, OpenBLAS's AVX-512 kernels). With OpenBLAS at its own (AVX-512) level, AVX2 tiles lose the 8x8-128x128 layers (up to
// 1.6x; the 4x4 ones they still win, 0.76-0.82x) and SSE2 ones every layer (1.9-4.2x).
//  - segregated_unified, 40 (above everything) wherever OpenBLAS's kernels are no wider than ours
//    (openblas_isa() <= node.isa): at the CPU's own level (AVX-512 here; AVX2 or baseline on CPUs
//    that have nothing more), and at a capped level with OpenBLAS capped alike (INFER_CPU_ISA=avx2
//    with OPENBLAS_CORETYPE=Haswell, as bench/byom_vs_peers.py runs it: what an AVX2 CPU runs). Where
//    OpenBLAS runs wider kernels than the level (INFER_CPU_ISA caps ours, not OpenBLAS's) it keeps
//    35 for a 1x1 input (the z projection), 25 for stride 2 on inputs of at most 4x4 when capped at
//    AVX2, and 10 elsewhere, and the rules below (measured against the earlier direct-loop kernel)
//    choose.
//  - gemm_col2im, 30 for stride 2 with C_out <= 8 (the -> 3 output layers); 22 for the other stride-2
//    layers with C_out <= C_in / 2 (its column matrix is then at most half the phase GEMMs' im2col);
//    else 5, leaving segregated_gemm (20) or flipped_conv (30).
bool stride2(const TconvDims& d) { return d.sh == 2 && d.sw == 2; }

int unified_priority(const NodeDesc& node) {
  if (!valid(node)) return 10;
  if (node.isa >= std::min(cpu_isa_supported(), openblas_isa())) return 40;
  const TconvDims d = tconv_dims(node);
  if (d.H * d.W == 1) return 35;
  if (node.isa == CpuIsa::Avx2 && stride2(d) && d.H * d.W <= 16) return 25;
  return 10;
}

int col2im_priority(const NodeDesc& node) {
  if (!valid(node)) return 5;
  const TconvDims d = tconv_dims(node);
  if (!stride2(d) || d.H * d.W == 1) return 5;
  if (d.CO <= 8) return 30;
  if (2 * d.CO <= d.CI) return 22;  // above segregated_gemm, below unified's 25 where that applies
  return 5;
}

}  // namespace

int64_t conv_band_rows(const ConvProblem& g, int64_t M) {
  const int64_t per_row = std::max<int64_t>(1, std::max(g.col_rows(), M) * g.WO);
  return std::max<int64_t>(1, std::min(g.HO, kTileFloats / per_row));
}

size_t conv_band_col_floats(const ConvProblem& g, int64_t M) {
  if (im2col_is_identity(g)) return 0;
  return static_cast<size_t>(g.col_rows() * conv_band_rows(g, M) * g.WO);
}

void conv_gemm_banded(const ConvProblem& g, const float* A, int64_t M, const float* x, float* col,
                      float* y, int64_t ldy, const float* bias, const Activation& act, const float* slope) {
  const int64_t K = g.col_rows();
  if (im2col_is_identity(g)) {  // x [C, H*W] already is the column matrix
    sgemm(false, false, M, g.HO * g.WO, K, 1.f, A, K, x, g.HO * g.WO, 0.f, y, ldy);
    bias_activation_rows(y, M, g.HO * g.WO, ldy, bias, act, slope);
    return;
  }
  const int64_t band = conv_band_rows(g, M);
  for (int64_t m0 = 0; m0 < g.HO; m0 += band) {
    const int64_t rows = std::min(band, g.HO - m0), cols = rows * g.WO;
    ConvProblem gb = g;
    gb.HO = rows;
    gb.pad_top = g.pad_top - m0 * g.stride_h;
    im2col(gb, x, col);
    sgemm(false, false, M, cols, K, 1.f, A, K, col, cols, 0.f, y + m0 * g.WO, ldy);
    bias_activation_rows(y + m0 * g.WO, M, cols, ldy, bias, act, slope);
  }
}

namespace {

std::shared_ptr<void> prepare_phases(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  return make_phases(d, node.constants.size() >= 2 ? node.constants[1] : nullptr, d.sh, d.sw);
}

std::shared_ptr<void> prepare_flipped(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  return make_phases(d, node.constants.size() >= 2 ? node.constants[1] : nullptr, 1, 1);
}

bool flipped_applicable(const NodeDesc& node) {
  const auto& p = std::get<ConvTranspose2DParams>(node.params);
  return valid_with_constant_weight(node) && p.stride_h == 1 && p.stride_w == 1;
}

bool col2im_applicable(const NodeDesc& node) {
  if (!valid(node)) return false;
  const TconvDims d = tconv_dims(node);
  return d.CO * d.KH * d.KW <= INT_MAX && d.H * d.W <= INT_MAX && d.CI <= INT_MAX;
}

bool conventional_applicable(const NodeDesc& node) {
  if (!valid_with_constant_weight(node)) return false;
  const auto& p = std::get<ConvTranspose2DParams>(node.params);
  const int64_t kh = node.input_shapes[1][2], kw = node.input_shapes[1][3];
  return p.pad.top < kh && p.pad.bottom < kh && p.pad.left < kw && p.pad.right < kw;
}

}  // namespace

INFER_REGISTER_KERNELS(conv_transpose2d) {
  // Heuristic (priorities measured, see docs/kernels.md and unified_priority / col2im_priority):
  // segregated_unified wherever it applies, except where OpenBLAS runs wider kernels than the node's
  // level (a level capped below the CPU's, OpenBLAS not capped with it; then: a 1x1
  // input -> segregated_unified, and 4x4 stride-2 inputs when capped at AVX2; other stride 1 ->
  // flipped_conv; stride 2 -> gemm_col2im for C_out <= 8 or C_out <= C_in / 2, else segregated_gemm;
  // other strides -> segregated_gemm); gemm_col2im for groups, dilation or a non-constant weight.
  registry.add("cpu", {
      {.op = "conv_transpose2d", .name = "flipped_conv", .priority = 30, .isa = KernelVariant::Isa::OpenBlas,
       .fuses_prelu = true, .applicable = flipped_applicable, .workspace_bytes = gemm_workspace_bytes,
       .prepare = prepare_phases, .run = run_segregated_gemm},
      {.op = "conv_transpose2d", .name = "segregated_gemm", .priority = 20, .isa = KernelVariant::Isa::OpenBlas,
       .fuses_prelu = true, .applicable = valid_with_constant_weight, .workspace_bytes = gemm_workspace_bytes,
       .prepare = prepare_phases, .run = run_segregated_gemm},
      {.op = "conv_transpose2d", .name = "segregated_unified", .priority = 10,
       .priority_for = unified_priority, .isa = KernelVariant::Isa::PerIsa,
       .applicable = conv_transpose2d_unified_applicable,
       .prepare = conv_transpose2d_unified_prepare, .run = conv_transpose2d_unified_run},
      {.op = "conv_transpose2d", .name = "gemm_col2im", .priority = 5,
       .priority_for = col2im_priority, .isa = KernelVariant::Isa::OpenBlas, .fuses_prelu = true,
       .applicable = col2im_applicable,
       .workspace_bytes = col2im_workspace_bytes, .run = run_gemm_col2im},
      {.op = "conv_transpose2d", .name = "conventional", .priority = 1, .isa = KernelVariant::Isa::OpenBlas,
       .fuses_prelu = true, .applicable = conventional_applicable,
       .workspace_bytes = conventional_workspace_bytes,
       .prepare = prepare_flipped, .run = run_conventional},
  });
}

}  // namespace infer::cpu
