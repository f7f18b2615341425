// CPU fused convolution + average pooling (ConvPool2DParams: conv, then pool x pool averages at
// stride pool with floor rounding, then the activation), float32, OpenMP + OpenBLAS, after Tokura
// et al.: conv and average pooling are both linear, so the pair is one strided linear map. Variants:
//   unfused       the conv (banded im2col + sgemm) into a workspace plane, then the pooling pass.
//   fused_filter  the pre-convolved ((p-1)*s + k)^2 filter (prepared once, scaled by 1/p^2) at
//                 stride p*s straight into y through im2col + sgemm.
//   direct_sum    separable p x p box sums of the zero-padded input (vertical, then horizontal),
//                 then the original k x k kernel (scaled by 1/p^2) at stride p*s through GEMM.
// s is the conv's own stride (1 in every zoo model); a partial last pooling window is dropped.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cpu/conv_transpose2d.h"
#include "infer/kernel.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {
namespace {

// Loops with less work than this run on one thread (see kernels/cpu/conv_transpose2d.cc).
constexpr int64_t kParallelMin = int64_t(1) << 15;

// The node's validated sizes (kernels/conv_shapes.h): every loop bound comes from there.
using PoolDims = ConvPool2DDims;
PoolDims pool_dims(const NodeDesc& node) { return conv_pool2d_dims(node, "cpu"); }

using PoolCall = ConvLikeCall<PoolDims, float>;
PoolCall pool_call(const KernelCall& call) { return conv_like_call<float>(call, pool_dims(call.node)); }

size_t round_up64(size_t floats) { return (floats + 63) / 64 * 64; }

// ---- unfused ------------------------------------------------------------------------------------

ConvProblem plain_geometry(const PoolDims& d) { return conv_pool2d_conv_problem(d, d.HC, d.WC); }


size_t unfused_workspace_bytes(const NodeDesc& node) {
  const PoolDims d = pool_dims(node);
  const ConvProblem g = plain_geometry(d);
  return (round_up64(static_cast<size_t>(d.CO * d.HC * d.WC)) + conv_band_col_floats(g, d.CO)) *
         sizeof(float);
}

void run_unfused(const KernelCall& call) {
  const PoolCall c = pool_call(call);
  const PoolDims& d = c.d;
  if (!call.workspace && unfused_workspace_bytes(call.node) > 0)
    throw Error("cpu conv_pool2d.unfused: missing workspace");
  const ConvProblem g = plain_geometry(d);
  float* conv = static_cast<float*>(call.workspace);
  float* col = conv + round_up64(static_cast<size_t>(d.CO * d.HC * d.WC));
  const float inv_area = 1.f / float(d.P * d.P);
  const Activation none{};
  for (int64_t n = 0; n < d.N; ++n) {
    conv_gemm_banded(g, c.w, d.CO, c.x + n * d.CI * d.H * d.W, col, conv, d.HC * d.WC, c.bias,
                     none);
#pragma omp parallel for schedule(static) if (d.CO * d.HC * d.WC >= kParallelMin)
    for (int64_t co = 0; co < d.CO; ++co) {
      const float* cp = conv + co * d.HC * d.WC;
      float* yp = c.y + (n * d.CO + co) * d.PH * d.PW;
      for (int64_t py = 0; py < d.PH; ++py)
        for (int64_t px = 0; px < d.PW; ++px) {
          float s = 0.f;
          for (int64_t dy = 0; dy < d.P; ++dy)
            for (int64_t dx = 0; dx < d.P; ++dx) s += cp[(py * d.P + dy) * d.WC + px * d.P + dx];
          yp[py * d.PW + px] = activate(d.p->conv.activation, s * inv_area);
        }
    }
  }
}

// ---- fused_filter -------------------------------------------------------------------------------
// The pre-convolved filter of kernels/conv_shapes.h (conv_pool2d_fused_filter), built once.

struct Weights {
  int64_t kh = 0, kw = 0;
  std::vector<float> a;  // [CO][CI*kh*kw]
};

std::shared_ptr<void> prepare_fused_filter(const NodeDesc& node) {
  const PoolDims d = pool_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv_pool2d.fused_filter: the weight must be a constant");
  auto f = std::make_shared<Weights>();
  f->a = conv_pool2d_fused_filter(d, w, f->kh, f->kw);
  return f;
}

// The prepared filter is kh x kw = (P-1)*s + K (checked before use).
ConvProblem fused_geometry(const PoolDims& d) { return conv_pool2d_fused_problem(d); }

size_t fused_filter_workspace_bytes(const NodeDesc& node) {
  const PoolDims d = pool_dims(node);
  return conv_band_col_floats(fused_geometry(d), d.CO) * sizeof(float);
}

void run_fused_filter(const KernelCall& call) {
  const PoolCall c = pool_call(call);
  const PoolDims& d = c.d;
  const auto* f = static_cast<const Weights*>(call.prepared);
  if (!f || f->kh != (d.P - 1) * d.sh + d.KH || f->kw != (d.P - 1) * d.sw + d.KW)
    throw Error("cpu conv_pool2d.fused_filter: not prepared for this node");
  const ConvProblem g = fused_geometry(d);
  if (!call.workspace && conv_band_col_floats(g, d.CO) > 0)
    throw Error("cpu conv_pool2d.fused_filter: missing workspace");
  for (int64_t n = 0; n < d.N; ++n)
    conv_gemm_banded(g, f->a.data(), d.CO, c.x + n * d.CI * d.H * d.W,
                     static_cast<float*>(call.workspace), c.y + n * d.CO * d.PH * d.PW,
                     d.PH * d.PW, c.bias, d.p->conv.activation);
}

// ---- direct_sum ---------------------------------------------------------------------------------
// B[a][b] = sum_{dy,dx < p} xpad[a + dy*s][b + dx*s] (dilated by the conv stride s), so that
// y[py][px] = bias + (1/p^2) * sum_{ci,ky,kx} w[ky][kx] * B[py*p*s + ky][px*p*s + kx]: the original
// kernel at stride p*s over B. B has BH x BW useful cells; rows are BW + (p-1)*s wide because the
// vertical sums are formed first and the horizontal ones then overwrite them in place (each cell
// only reads cells at or right of itself).

struct BoxGeometry {
  int64_t BH, BW, BWp;
};

BoxGeometry box_geometry(const PoolDims& d) {
  if (d.PH == 0 || d.PW == 0) return {0, 0, 0};
  const int64_t bw = (d.PW - 1) * d.P * d.sw + d.KW;
  return {(d.PH - 1) * d.P * d.sh + d.KH, bw, bw + (d.P - 1) * d.sw};
}

// The strided convolution over the stored box sums B (BH x BWp, already padded): no box, no padding.
ConvProblem sum_geometry(const PoolDims& d, const BoxGeometry& b) {
  ConvProblem g = conv_pool2d_sum_problem(d);
  g.H = b.BH;
  g.W = b.BWp;
  g.pad_top = g.pad_left = 0;
  g.box = 1;
  return g;
}

size_t direct_sum_workspace_bytes(const NodeDesc& node) {
  const PoolDims d = pool_dims(node);
  const BoxGeometry b = box_geometry(d);
  return (round_up64(static_cast<size_t>(d.CI * b.BH * b.BWp)) +
          conv_band_col_floats(sum_geometry(d, b), d.CO)) *
         sizeof(float);
}

std::shared_ptr<void> prepare_direct_sum(const NodeDesc& node) {
  const PoolDims d = pool_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv_pool2d.direct_sum: the weight must be a constant");
  auto s = std::make_shared<Weights>();
  s->kh = d.KH;
  s->kw = d.KW;
  const size_t n = static_cast<size_t>(d.CO * d.CI * d.KH * d.KW);
  s->a.resize(n);
  const float inv_area = 1.f / float(d.P * d.P);
  for (size_t i = 0; i < n; ++i) s->a[i] = w[i] * inv_area;
  return s;
}

void run_direct_sum(const KernelCall& call) {
  const PoolCall c = pool_call(call);
  const PoolDims& d = c.d;
  const auto* s = static_cast<const Weights*>(call.prepared);
  if (!s || s->kh != d.KH || s->kw != d.KW || s->a.size() != size_t(d.CO * d.CI * d.KH * d.KW))
    throw Error("cpu conv_pool2d.direct_sum: not prepared for this node");
  const BoxGeometry b = box_geometry(d);
  if (b.BH == 0) return;  // empty output
  if (!call.workspace) throw Error("cpu conv_pool2d.direct_sum: missing workspace");
  float* box = static_cast<float*>(call.workspace);
  float* col = box + round_up64(static_cast<size_t>(d.CI * b.BH * b.BWp));
  const ConvProblem g = sum_geometry(d, b);
  const int64_t col_lo = d.pl, col_hi = std::min(b.BWp, d.W + d.pl);  // B columns over real x
  for (int64_t n = 0; n < d.N; ++n) {
    const float* xn = c.x + n * d.CI * d.H * d.W;
#pragma omp parallel for schedule(static) if (d.CI * b.BH * b.BWp * d.P >= kParallelMin)
    for (int64_t ci = 0; ci < d.CI; ++ci) {
      const float* xc = xn + ci * d.H * d.W;
      for (int64_t a = 0; a < b.BH; ++a) {
        float* row = box + (ci * b.BH + a) * b.BWp;
        std::fill(row, row + b.BWp, 0.f);
        for (int64_t dy = 0; dy < d.P; ++dy) {  // vertical sums over the zero-padded input
          const int64_t r = a + dy * d.sh - d.pt;
          if (r < 0 || r >= d.H) continue;
          const float* xr = xc + r * d.W;
          for (int64_t col_b = col_lo; col_b < col_hi; ++col_b) row[col_b] += xr[col_b - d.pl];
        }
        for (int64_t col_b = 0; col_b < b.BW; ++col_b) {  // horizontal sums, in place
          float sum = 0.f;
          for (int64_t dx = 0; dx < d.P; ++dx) sum += row[col_b + dx * d.sw];
          row[col_b] = sum;
        }
      }
    }
    conv_gemm_banded(g, s->a.data(), d.CO, box, col, c.y + n * d.CO * d.PH * d.PW, d.PH * d.PW,
                     c.bias, d.p->conv.activation);
  }
}

bool valid_node(const NodeDesc& node) { return conv_pool2d_valid(node); }

bool valid_with_constant_weight(const NodeDesc& node) { return valid_node(node) && has_constant_weight(node); }

}  // namespace

INFER_REGISTER_KERNELS(conv_pool2d) {
  // Heuristic (measured, see docs/kernels.md): direct_sum, then fused_filter, then unfused.
  registry.add("cpu", {
      {.op = "conv_pool2d", .name = "direct_sum", .priority = 20, .isa = KernelVariant::Isa::OpenBlas,
       .applicable = valid_with_constant_weight, .workspace_bytes = direct_sum_workspace_bytes,
       .prepare = prepare_direct_sum, .run = run_direct_sum},
      {.op = "conv_pool2d", .name = "fused_filter", .priority = 10, .isa = KernelVariant::Isa::OpenBlas,
       .applicable = valid_with_constant_weight, .workspace_bytes = fused_filter_workspace_bytes,
       .prepare = prepare_fused_filter, .run = run_fused_filter},
      {.op = "conv_pool2d", .name = "unfused", .priority = 5, .isa = KernelVariant::Isa::OpenBlas, .applicable = valid_node,
       .workspace_bytes = unfused_workspace_bytes, .run = run_unfused},
  });
}

}  // namespace infer::cpu
