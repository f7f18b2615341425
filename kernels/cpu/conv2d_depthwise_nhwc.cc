// CPU conv2d "depthwise_nhwc": a depthwise conv2d (groups == C_in == C_out, weight [C,1,KH,KW], any
// kernel, stride, padding and dilation) on NHWC activations, vectorised along the channels: an output
// pixel's kLanes channels (16 on AVX-512, 8 on AVX2, 4 on baseline) are one vector, and each tap is
// one FMA of the input pixel's channel vector with the tap's weight vector. The weight is re-laid out
// once in prepare() as [KH*KW][C rounded up to kLanes] (zeros past C) with the bias beside it, so the
// taps' weights are whole-vector loads; a channel count that is not a multiple of the vector (24, 40
// at AVX-512) ends in one masked vector of inputs and outputs (nhwc.h). For 3x3 and 5x5 kernels the
// tap loops are unrolled and the KH*KW weight vectors stay in registers while one output row of one
// channel vector is computed; the columns whose window is inside the image run without per-tap checks,
// the border columns clip the tap range. Bias and the fused activation at the store (ReLU, Clip,
// HardSigmoid, HardSwish in registers; others per element after the row). Threads: OpenMP over
// (image, output row, group of up to 4 channel vectors); one thread below kParallelMin multiply-adds.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/omp_last.h"

namespace infer::cpu {
namespace {

// Multiply-adds below which one thread runs the node (docs/kernels.md "CPU: the channels-last path").
constexpr int64_t kParallelMin = int64_t(1) << 18;
constexpr int64_t kGroupVectors = 4;  // channel vectors per OpenMP iteration

struct DwDims {
  int64_t L;  // the ISA's lanes
  int64_t N, C, H, W, HO, WO, KH, KW, sh, sw, pt, pl, dh, dw;
  int64_t Cp;        // C rounded up to whole vectors
  int64_t group;     // channels per iteration (whole vectors)
  int64_t groups;    // channel groups
  int64_t in_lo, in_hi;  // output columns whose every tap column is inside the image
};

DwDims dw_dims(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  DwDims d;
  d.L = isa::shape(node.isa).lanes;
  d.N = xs[0], d.C = xs[1], d.H = xs[2], d.W = xs[3], d.HO = ys[2], d.WO = ys[3], d.KH = ws[2], d.KW = ws[3];
  d.sh = p.stride_h, d.sw = p.stride_w, d.pt = p.pad.top, d.pl = p.pad.left;
  d.dh = p.dilation_h, d.dw = p.dilation_w;
  d.Cp = (d.C + d.L - 1) / d.L * d.L;
  d.group = std::min(d.Cp, kGroupVectors * d.L);
  d.groups = (d.Cp + d.group - 1) / d.group;
  // ox in [in_lo, in_hi): ox*sw - pl >= 0 and ox*sw - pl + (KW-1)*dw < W
  d.in_lo = std::min(d.WO, (d.pl + d.sw - 1) / d.sw);
  const int64_t last = d.W - 1 - (d.KW - 1) * d.dw + d.pl;  // the largest ox*sw allowed
  d.in_hi = last < 0 ? 0 : std::min(d.WO, last / d.sw + 1);
  d.in_hi = std::max(d.in_hi, d.in_lo);
  return d;
}

struct DwPrepared {
  std::vector<float> w;     // [KH*KW][Cp]
  std::vector<float> bias;  // [Cp], zeros without a bias
};

std::shared_ptr<void> dw_prepare(const NodeDesc& node) {
  const DwDims d = dw_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv2d.depthwise_nhwc: the weight must be a constant");
  auto prep = std::make_shared<DwPrepared>();
  const int64_t taps = d.KH * d.KW;
  prep->w.assign(static_cast<size_t>(taps * d.Cp), 0.f);
  prep->bias.assign(static_cast<size_t>(d.Cp), 0.f);
  for (int64_t c = 0; c < d.C; ++c)
    for (int64_t t = 0; t < taps; ++t) prep->w[static_cast<size_t>(t * d.Cp + c)] = w[c * taps + t];
  if (node.constants.size() >= 3 && node.constants[2])
    std::copy(node.constants[2], node.constants[2] + d.C, prep->bias.begin());
  return prep;
}

// acc += the taps ky in [ky0, ky1), kx in [kx0, kx1) of output column ox (K > 0: K x K weights in
// wv; K == 0: any size, weights read from w).
template <class I, int K>
INFER_INLINE void dw_taps(const DwDims& d, const float* xc, const typename I::Vec* wv, const float* w, int64_t iy0,
                          int64_t ix0, int64_t ky0, int64_t ky1, int64_t kx0, int64_t kx1, int64_t n,
                          typename I::Vec& acc) {
  using V = typename I::Vec;
  const int64_t C = d.C;
  if constexpr (K > 0) {
    for (int ky = 0; ky < K; ++ky) {
      if (ky < ky0 || ky >= ky1) continue;
      const float* xr = xc + ((iy0 + ky * d.dh) * d.W + ix0) * C;
      for (int kx = 0; kx < K; ++kx) {
        if (kx < kx0 || kx >= kx1) continue;
        V xv;
        nhwc::load_upto<I>(xv, xr + kx * d.dw * C, n);
        acc += wv[ky * K + kx] * xv;
      }
    }
  } else {
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const float* xr = xc + ((iy0 + ky * d.dh) * d.W + ix0) * C;
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        V xv, wk;
        nhwc::load_upto<I>(xv, xr + kx * d.dw * C, n);
        mk::load(wk, w + (ky * d.KW + kx) * d.Cp);
        acc += wk * xv;
      }
    }
  }
}

// Output column ox near the border: the tap columns clipped to the image.
template <class I, int K>
INFER_INLINE void dw_border(const DwDims& d, const float* xc, const typename I::Vec* wv, const float* w,
                            const typename I::Vec& b, int64_t iy0, int64_t ky0, int64_t ky1, int64_t ox, int64_t n,
                            float* yc, const Activation& act) {
  const int64_t ix0 = ox * d.sw - d.pl;
  const int64_t kx0 = ix0 >= 0 ? 0 : std::min(d.KW, (-ix0 + d.dw - 1) / d.dw);
  const int64_t kx1 = std::max(kx0, std::min(d.KW, d.W - ix0 <= 0 ? 0 : (d.W - ix0 - 1) / d.dw + 1));
  typename I::Vec acc = b;
  dw_taps<I, K>(d, xc, wv, w, iy0, ix0, ky0, ky1, kx0, kx1, n, acc);
  nhwc::store_upto<I>(yc + ox * d.C, nhwc::activate_v<I>(acc, act), n);
}

// One output row oy of image n, channels [c0, c1) (whole vectors but the last).
template <class I, int K>
INFER_INLINE void dw_row(const DwDims& d, const float* x, const float* w, const float* bias, float* y, int64_t n,
                         int64_t oy, int64_t c0, int64_t c1, const Activation& act) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const int64_t iy0 = oy * d.sh - d.pt;
  // tap rows inside the image: 0 <= iy0 + ky*dh < H
  const int64_t ky0 = iy0 >= 0 ? 0 : std::min(d.KH, (-iy0 + d.dh - 1) / d.dh);
  const int64_t ky1 = std::max(ky0, std::min(d.KH, d.H - iy0 <= 0 ? 0 : (d.H - iy0 - 1) / d.dh + 1));
  const float* xn = x + n * d.H * d.W * d.C;
  float* yrow = y + (n * d.HO + oy) * d.WO * d.C;
  for (int64_t c = c0; c < c1; c += L) {
    const int64_t nl = std::min<int64_t>(L, d.C - c);
    V wv[K > 0 ? K * K : 1];
    if constexpr (K > 0)
      for (int t = 0; t < K * K; ++t) mk::load(wv[t], w + t * d.Cp + c);
    V b;
    mk::load(b, bias + c);
    const float* xc = xn + c;
    float* yc = yrow + c;
    for (int64_t ox = 0; ox < d.in_lo; ++ox) dw_border<I, K>(d, xc, wv, w + c, b, iy0, ky0, ky1, ox, nl, yc, act);
    for (int64_t ox = d.in_lo; ox < d.in_hi; ++ox) {
      V acc = b;
      dw_taps<I, K>(d, xc, wv, w + c, iy0, ox * d.sw - d.pl, ky0, ky1, 0, d.KW, nl, acc);
      nhwc::store_upto<I>(yc + ox * d.C, nhwc::activate_v<I>(acc, act), nl);
    }
    for (int64_t ox = d.in_hi; ox < d.WO; ++ox) dw_border<I, K>(d, xc, wv, w + c, b, iy0, ky0, ky1, ox, nl, yc, act);
  }
  if (!nhwc::vector_activation(act.kind))
    for (int64_t ox = 0; ox < d.WO; ++ox)
      nhwc::activate_span(yrow + ox * d.C + c0, std::min(c1, d.C) - c0, act);
}

template <class I>
INFER_INLINE void dw_rows_body(const DwDims& d, const float* x, const float* w, const float* bias, float* y,
                               int64_t t0, int64_t t1, const Activation& act) {
  const int k = d.KH == d.KW && (d.KH == 3 || d.KH == 5) ? static_cast<int>(d.KH) : 0;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t g = t % d.groups, row = t / d.groups, n = row / d.HO, oy = row % d.HO;
    const int64_t c0 = g * d.group, c1 = std::min(d.C, c0 + d.group);
    if (k == 3) dw_row<I, 3>(d, x, w, bias, y, n, oy, c0, c1, act);
    else if (k == 5) dw_row<I, 5>(d, x, w, bias, y, n, oy, c0, c1, act);
    else dw_row<I, 0>(d, x, w, bias, y, n, oy, c0, c1, act);
  }
}
INFER_PER_ISA(void, dw_rows, dw_rows_body,
              (const DwDims& d, const float* x, const float* w, const float* bias, float* y, int64_t t0,
               int64_t t1, const Activation& act),
              (d, x, w, bias, y, t0, t1, act))

void dw_run(const KernelCall& call) {
  const DwDims d = dw_dims(call.node);
  const auto* prep = static_cast<const DwPrepared*>(call.prepared);
  if (!prep) throw Error("cpu conv2d.depthwise_nhwc: not prepared for this node");
  const Activation act = fused_activation(call.node.params);
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const int64_t tasks = d.N * d.HO * d.groups;
  const bool parallel = d.N * d.HO * d.WO * d.C * d.KH * d.KW >= kParallelMin;
  const auto dw_rows = dw_rows_for(call.node.isa);
  const float *w = prep->w.data(), *bias = prep->bias.data();
  MasterLast last;
#pragma omp parallel if (parallel)
  {
#pragma omp for schedule(guided) nowait
    for (int64_t t = 0; t < tasks; ++t) dw_rows(d, x, w, bias, y, t, t + 1, act);
    last.arrive();
  }
}

// Depthwise with one output channel per input channel (a channel multiplier would make the input a
// gather along the vector), a constant weight and bias, 4-D shapes.
bool dw_applicable(const NodeDesc& node) {
  if (!conv2d_depthwise(node) || !has_constant_weight(node)) return false;
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1];
  if (node.output_shapes[0].size() != 4 || ws[0] != xs[1]) return false;
  return node.input_shapes.size() < 3 || node.constants[2] != nullptr;
}

}  // namespace

void register_conv2d_depthwise_nhwc(KernelRegistry& registry) {
  // Priority 25, above the NCHW depthwise (20): the channels_last pass switches a graph to NHWC at its
  // first depthwise convolution (docs/kernels.md "CPU: the channels-last path": measured faster).
  registry.add("cpu", {
      {.op = "conv2d", .name = "depthwise_nhwc", .priority = 25, .layouts = {Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .applicable = dw_applicable, .prepare = dw_prepare, .run = dw_run},
  });
}

}  // namespace infer::cpu
