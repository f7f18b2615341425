// CPU conv2d (NCHW, weight [C_out,C_in/groups,KH,KW], float32, any stride, dilation and groups).
// "im2col_gemm": per sample and group, im2col into the node's workspace (Chellapilla et al. 2006,
// "High performance convolutional neural networks for document processing"), then one cblas_sgemm
// y[C_out/g, HO*WO] = w[C_out/g, C_in/g*KH*KW] x col, then the bias + activation epilogue. With
// add_residual (the fuse_conv_residual pass) the residual r is copied into the output first and the
// GEMMs accumulate onto it (beta = 1). A 1x1 stride-1 unpadded conv uses the input as the column matrix.
// "depthwise" (groups == C_in > 1, C_out = multiplier * C_in): direct loops, one OpenMP iteration per
// output plane, each output row accumulated kernel row by kernel row over the valid column ranges
// (a 3-wide kernel row in one pass where all three taps are inside the image).
// Batch: samples run one after another, each a full-size GEMM written straight into its NCHW output
// plane (one GEMM over the batch would need a [C_out, N*HO*WO] -> NCHW transpose pass). OpenBLAS
// threads each GEMM; im2col and the epilogue are OpenMP loops outside it. No allocation at run time.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/im2col.h"
#include "kernels/conv_shapes.h"

namespace infer::cpu {
namespace {

size_t conv2d_workspace(const NodeDesc& node) {
  const ConvGeometry g = conv_geometry(std::get<Conv2DParams>(node.params), node.input_shapes[0],
                                       node.input_shapes[1], node.output_shapes[0]);
  return im2col_is_identity(g) ? 0 : g.col_floats() * sizeof(float);
}

void conv2d_run(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const Shape& ys = call.node.output_shapes[0];
  const ConvGeometry g = conv_geometry(p, xs, ws, ys);
  const bool identity = im2col_is_identity(g);
  if (!identity && !call.workspace && g.col_floats() > 0)
    throw Error("cpu conv2d: im2col_gemm needs a workspace of " +
                std::to_string(g.col_floats() * sizeof(float)) + " bytes, got none");

  const float* x = call.inputs[0];
  const float* w = call.inputs[1];
  const float* bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  const float* residual = p.add_residual ? call.inputs[3] : nullptr;
  float* y = call.outputs[0];
  float* col = static_cast<float*>(call.workspace);
  const int64_t N = xs[0], CO = ws[0], K = g.col_rows(), P = g.col_cols();
  const int64_t G = p.groups, COG = CO / G;  // COG output channels per group
  const Activation act = fused_activation(call.node.params);

  for (int64_t n = 0; n < N; ++n) {
    // The residual add rides on the GEMMs: y = r, then y = w * col + 1 * y.
    if (residual) std::memcpy(y + n * CO * P, residual + n * CO * P, static_cast<size_t>(CO * P) * sizeof(float));
    for (int64_t gi = 0; gi < G; ++gi) {
      const float* xg = x + (n * G + gi) * g.C * g.H * g.W;
      float* yg = y + (n * CO + gi * COG) * P;
      const float* b_mat = xg;
      if (!identity) {
        im2col(g, xg, col);
        b_mat = col;
      }
      sgemm(false, false, COG, P, K, 1.f, w + gi * COG * K, K, b_mat, P, residual ? 1.f : 0.f, yg, P);
    }
    bias_activation_rows(y + n * CO * P, CO, P, P, bias, act);
  }
}

// [lo, hi): the outputs t < count with t * stride + offset inside [0, limit).
void tap_range(int64_t count, int64_t stride, int64_t offset, int64_t limit, int64_t& lo,
               int64_t& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last = limit - 1 - offset;
  hi = last < 0 ? 0 : std::min(count, last / stride + 1);
  lo = std::min(lo, hi);
}

void depthwise_run(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const Shape& ys = call.node.output_shapes[0];
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t CO = ws[0], KH = ws[2], KW = ws[3], HO = ys[2], WO = ys[3], M = CO / C;
  const int64_t sh = p.stride_h, sw = p.stride_w, dh = p.dilation_h, dw = p.dilation_w;
  const int64_t pt = p.pad.top, pl = p.pad.left;
  const float* x = call.inputs[0];
  const float* w = call.inputs[1];
  const float* bias = call.inputs.size() == 3 ? call.inputs[2] : nullptr;
  float* y = call.outputs[0];
  const Activation act = fused_activation(call.node.params);
  // The output columns each kernel column kx reaches inside the image (the same for every plane).
  std::vector<int64_t> col_lo(static_cast<size_t>(KW)), col_hi(static_cast<size_t>(KW));
  for (int64_t kx = 0; kx < KW; ++kx) tap_range(WO, sw, kx * dw - pl, W, col_lo[kx], col_hi[kx]);

  const int64_t planes = N * CO;
#pragma omp parallel for schedule(static) if (planes * HO * WO * KH * KW >= (int64_t(1) << 15))
  for (int64_t pi = 0; pi < planes; ++pi) {
    const int64_t n = pi / CO, co = pi % CO;
    const float* xp = x + (n * C + co / M) * H * W;
    const float* wp = w + co * KH * KW;
    float* yp = y + pi * HO * WO;
    const float b = bias ? bias[co] : 0.f;
    for (int64_t oy = 0; oy < HO; ++oy) {
      float* yrow = yp + oy * WO;
      for (int64_t ox = 0; ox < WO; ++ox) yrow[ox] = b;
      for (int64_t ky = 0; ky < KH; ++ky) {
        const int64_t iy = oy * sh - pt + ky * dh;
        if (iy < 0 || iy >= H) continue;
        const float* xrow = xp + iy * W - pl;
        const float* wk = wp + ky * KW;
        // 3 taps per row (3x3, MobileNet's case): one pass over the columns all three reach, the
        // rest per tap; other widths, or no such column, per tap over its valid range.
        int64_t in_lo = WO, in_hi = 0;
        if (KW == 3) {
          in_lo = std::max({col_lo[0], col_lo[1], col_lo[2]});
          in_hi = std::min({col_hi[0], col_hi[1], col_hi[2]});
        }
        if (in_lo < in_hi) {
          const float w0 = wk[0], w1 = wk[1], w2 = wk[2];
          const float *x0 = xrow, *x1 = xrow + dw, *x2 = xrow + 2 * dw;
          if (sw == 1) {
#pragma omp simd
            for (int64_t ox = in_lo; ox < in_hi; ++ox) yrow[ox] += w0 * x0[ox] + w1 * x1[ox] + w2 * x2[ox];
          } else {
            for (int64_t ox = in_lo; ox < in_hi; ++ox)
              yrow[ox] += w0 * x0[ox * sw] + w1 * x1[ox * sw] + w2 * x2[ox * sw];
          }
        }
        for (int64_t kx = 0; kx < KW; ++kx) {
          const float wv = wk[kx];
          const float* xr = xrow + kx * dw;
          // the tap's valid columns outside [in_lo, in_hi) (all of them when there is no such range)
          const int64_t parts[2][2] = {{col_lo[kx], std::min(col_hi[kx], in_lo)},
                                       {std::max(col_lo[kx], in_hi), col_hi[kx]}};
          for (int part = 0; part < (in_lo < in_hi ? 2 : 1); ++part) {
            const int64_t lo = in_lo < in_hi ? parts[part][0] : col_lo[kx];
            const int64_t hi = in_lo < in_hi ? parts[part][1] : col_hi[kx];
            if (sw == 1) {
#pragma omp simd
              for (int64_t ox = lo; ox < hi; ++ox) yrow[ox] += wv * xr[ox];
            } else {
              for (int64_t ox = lo; ox < hi; ++ox) yrow[ox] += wv * xr[ox * sw];
            }
          }
        }
      }
      if (act.kind == ActivationKind::Relu) {
#pragma omp simd
        for (int64_t ox = 0; ox < WO; ++ox) yrow[ox] = yrow[ox] < 0.f ? 0.f : yrow[ox];
      } else if (act.kind != ActivationKind::None) {
        for (int64_t ox = 0; ox < WO; ++ox) yrow[ox] = activate(act, yrow[ox]);
      }
    }
  }
}

}  // namespace

void register_conv2d(KernelRegistry& registry) {
  registry.add("cpu", {
      {.op = "conv2d", .name = "im2col_gemm", .priority = 10, .workspace_bytes = conv2d_workspace,
       .run = conv2d_run},
      {.op = "conv2d", .name = "depthwise", .priority = 20, .applicable = conv2d_depthwise,
       .run = depthwise_run},
  });
}

}  // namespace infer::cpu
