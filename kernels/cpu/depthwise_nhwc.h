// The depthwise NHWC row kernel shared by conv2d.depthwise_nhwc (conv2d_depthwise_nhwc.cc, which says
// the method: channel vectors, the K x K weights in registers, U output columns per step) and
// depthwise_pointwise.fused_nhwc (depthwise_pointwise_nhwc.cc, which writes the rows into a per-thread
// tile): the geometry, the packed weight, and dw_row_fn, which picks the function computing one output
// row of a range of channel vectors (compiled once, per ISA level, in depthwise_nhwc.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "infer/kernel.h"
#include "kernels/cpu/isa.h"

namespace infer::cpu::dwk {

constexpr int64_t kGroupVectors = 4;  // channel vectors per OpenMP iteration (conv2d.depthwise_nhwc)

struct DwDims {
  int64_t L;  // the ISA's lanes
  int64_t N, C, H, W, HO, WO, KH, KW, sh, sw, pt, pl, dh, dw;
  int64_t Cp;        // C rounded up to whole vectors
  int64_t group;     // channels per iteration (whole vectors)
  int64_t groups;    // channel groups
  int64_t in_lo, in_hi;  // output columns whose every tap column is inside the image
};

// The geometry of a depthwise conv2d p from x [N,C,H,W] with weight ws [C,1,KH,KW] to HO x WO outputs.
inline DwDims dw_dims(const Conv2DParams& p, const Shape& xs, const Shape& ws, int64_t HO, int64_t WO, CpuIsa level) {
  DwDims d;
  d.L = isa::shape(level).lanes;
  d.N = xs[0], d.C = xs[1], d.H = xs[2], d.W = xs[3], d.HO = HO, d.WO = WO, d.KH = ws[2], d.KW = ws[3];
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

// The weight w [C,1,KH,KW] re-laid out as [KH*KW][Cp] and the bias (nullptr: zeros) as [Cp].
inline void dw_pack(const DwDims& d, const float* w, const float* bias, DwPrepared& prep) {
  const int64_t taps = d.KH * d.KW;
  prep.w.assign(static_cast<size_t>(taps * d.Cp), 0.f);
  prep.bias.assign(static_cast<size_t>(d.Cp), 0.f);
  for (int64_t c = 0; c < d.C; ++c)
    for (int64_t t = 0; t < taps; ++t) prep.w[static_cast<size_t>(t * d.Cp + c)] = w[c * taps + t];
  if (bias) std::copy(bias, bias + d.C, prep.bias.begin());
}

// One output row oy of image n, channels [c0, c1) (whole vectors but the last), written at yrow (the
// row's first pixel; pixels C floats apart), with the bias and the activation act (slope: a fused
// per-channel PRelu's, or nullptr).
using DwRowFn = void (*)(const DwDims& d, const float* x, const float* w, const float* bias, float* yrow, int64_t n,
                         int64_t oy, int64_t c0, int64_t c1, const Activation& act, const float* slope);

// The row function for a node of d's kernel size, at ISA level `level`, with an activation of this kind.
DwRowFn dw_row_fn(CpuIsa level, const DwDims& d, ActivationKind act);

}  // namespace infer::cpu::dwk
