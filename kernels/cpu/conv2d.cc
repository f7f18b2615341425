// CPU conv2d (NCHW, weight [C_out,C_in/groups,KH,KW], float32, any stride, dilation and groups).
// "im2col_gemm": per sample and group, im2col into the node's workspace (Chellapilla et al. 2006,
// "High performance convolutional neural networks for document processing"), then one cblas_sgemm
// y[C_out/g, HO*WO] = w[C_out/g, C_in/g*KH*KW] x col, then the bias + activation epilogue. With
// add_residual (the fuse_conv_residual pass) the residual r is copied into the output first and the
// GEMMs accumulate onto it (beta = 1). A 1x1 stride-1 unpadded conv uses the input as the column matrix.
// "depthwise" (groups == C_in > 1, C_out = multiplier * C_in): direct loops, one OpenMP iteration per
// output plane; pixels whose window is inside the image in one vectorised pass over all taps (AVX-512 /
// AVX2 clones chosen at run time), the border pixels bounds-checked (small maps: a zero-padded copy of
// the plane in the workspace instead, so every pixel is inside), the activation fused at the store.
// Batch: samples run one after another, each a full-size GEMM written straight into its NCHW output
// plane (one GEMM over the batch would need a [C_out, N*HO*WO] -> NCHW transpose pass). OpenBLAS
// threads each GEMM; im2col and the epilogue are OpenMP loops outside it. No allocation at run time.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "infer/error.h"
#include "kernels/cpu/activation_simd.h"
#include "infer/kernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"
#include "kernels/conv_shapes.h"

namespace infer::cpu {
namespace {

size_t conv2d_workspace(const NodeDesc& node) {
  const ConvProblem g = conv2d_problem(std::get<Conv2DParams>(node.params), node.input_shapes[0],
                                       node.input_shapes[1], node.output_shapes[0]);
  return im2col_is_identity(g) ? 0 : static_cast<size_t>(g.col_elements()) * sizeof(float);
}

void conv2d_run(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const Shape& ys = call.node.output_shapes[0];
  const ConvProblem g = conv2d_problem(p, xs, ws, ys);
  const bool identity = im2col_is_identity(g);
  if (!identity && !call.workspace && static_cast<size_t>(g.col_elements()) > 0)
    throw Error("cpu conv2d: im2col_gemm needs a workspace of " +
                std::to_string(static_cast<size_t>(g.col_elements()) * sizeof(float)) + " bytes, got none");

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
    bias_activation_rows(y + n * CO * P, CO, P, P, bias, act, prelu_slope(call));
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

// One depthwise output plane. Output pixels whose KH x KW window lies inside the image (rows with
// every tap row valid, columns [in_lo, in_hi)) are summed with no bounds checks, the loop over those
// columns vectorised (omp simd); the border pixels take the bounds-checked sum. The activation is applied as the pixel is stored: ReLU and Clip (ReLU6)
// inline (Act); the other kinds (SiLU, ...) over the finished plane in the level's vectors
// (dw_activate, activation_simd.h; an exp call per pixel kept the sum's loop scalar). Compiled for
// AVX-512, AVX2 and baseline x86-64, picked by the node's ISA level (isa.h): the rest of the build
// targets baseline x86-64.
struct DwPlane {
  const float* x;  // the input plane
  const float* w;  // KH * KW taps
  float* y;        // the output plane
  float bias;
  int64_t H, W, HO, WO, KH, KW, sh, sw, pt, pl, dh, dw, in_lo, in_hi;
};

enum class DwAct { None, Relu, Clip };

template <DwAct A>
__attribute__((always_inline)) inline float dw_act(float v, const Activation& act) {
  if constexpr (A == DwAct::Relu) return v < 0.f ? 0.f : v;
  if constexpr (A == DwAct::Clip) {
    // im2col.h's clamp_nan written out: a plain inline function is not inlined into the AVX2
    // functions (their tune=haswell differs from its default tuning), and the call per pixel kept
    // the sum's loop scalar there
    v = v < act.alpha ? act.alpha : v;
    return v > act.beta ? act.beta : v;
  }
  return v;
}

// Columns [lo, hi) of one output row of a K x K kernel, every tap inside the image; S: the column
// stride when known (1), else 0 and `sw`.
template <DwAct A, int K, int S>
__attribute__((always_inline)) inline void dw_columns(const float* wk, float bias, const float* xr,
                                                      float* yrow, int64_t lo, int64_t hi, int64_t sw,
                                                      int64_t row, int64_t dw, const Activation& act) {
  const int64_t s = S > 0 ? S : sw;
#pragma omp simd
  for (int64_t ox = lo; ox < hi; ++ox) {
    float acc = bias;
    for (int ky = 0; ky < K; ++ky)
      for (int kx = 0; kx < K; ++kx) acc += wk[ky * K + kx] * xr[ky * row + ox * s + kx * dw];
    yrow[ox] = dw_act<A>(acc, act);
  }
}

// K: the kernel is K x K (3, 5: its tap loops unroll, so the loop over output columns vectorises); 0:
// any size, the interior accumulated tap by tap (one vectorised pass over the columns per tap).
template <DwAct A, int K>
__attribute__((always_inline)) inline void dw_plane_impl(const DwPlane& d, const Activation& act) {
  for (int64_t oy = 0; oy < d.HO; ++oy) {
    float* yrow = d.y + oy * d.WO;
    const int64_t iy0 = oy * d.sh - d.pt;
    const bool rows_inside = iy0 >= 0 && iy0 + (d.KH - 1) * d.dh < d.H;
    const int64_t lo = rows_inside ? d.in_lo : d.WO, hi = rows_inside ? d.in_hi : d.WO;
    // Bounds-checked pixels: the whole row when a tap row is outside, else the border columns.
    auto checked = [&](int64_t ox) {
      float acc = d.bias;
      const int64_t ix0 = ox * d.sw - d.pl;
      for (int64_t ky = 0; ky < d.KH; ++ky) {
        const int64_t iy = iy0 + ky * d.dh;
        if (iy < 0 || iy >= d.H) continue;
        for (int64_t kx = 0; kx < d.KW; ++kx) {
          const int64_t ix = ix0 + kx * d.dw;
          if (ix >= 0 && ix < d.W) acc += d.w[ky * d.KW + kx] * d.x[iy * d.W + ix];
        }
      }
      yrow[ox] = dw_act<A>(acc, act);
    };
    for (int64_t ox = 0; ox < std::min(lo, d.WO); ++ox) checked(ox);
    if (lo < hi) {
      const float* xr = d.x + iy0 * d.W - d.pl;  // column ox * sw + kx * dw of tap row ky
      const int64_t sw = d.sw, row = d.dh * d.W, dw = d.dw;
      if constexpr (K > 0) {
        float wk[K * K];
        for (int t = 0; t < K * K; ++t) wk[t] = d.w[t];
        // stride 1 (contiguous columns) apart from the strided case, so that it vectorises unit-stride
        if (sw == 1)
          dw_columns<A, K, 1>(wk, d.bias, xr, yrow, lo, hi, 1, row, dw, act);
        else
          dw_columns<A, K, 0>(wk, d.bias, xr, yrow, lo, hi, sw, row, dw, act);
      } else {
        for (int64_t ox = lo; ox < hi; ++ox) yrow[ox] = d.bias;
        for (int64_t ky = 0; ky < d.KH; ++ky)
          for (int64_t kx = 0; kx < d.KW; ++kx) {
            const float wv = d.w[ky * d.KW + kx];
            const float* xt = xr + ky * row + kx * dw;
#pragma omp simd
            for (int64_t ox = lo; ox < hi; ++ox) yrow[ox] += wv * xt[ox * sw];
          }
        if constexpr (A != DwAct::None)
          for (int64_t ox = lo; ox < hi; ++ox) yrow[ox] = dw_act<A>(yrow[ox], act);
      }
    }
    for (int64_t ox = std::max(hi, lo); ox < d.WO; ++ox) checked(ox);
  }
}

template <int K>
__attribute__((always_inline)) inline void dw_plane_act(const DwPlane& d, const Activation& act) {
  switch (act.kind) {
    case ActivationKind::Relu: return dw_plane_impl<DwAct::Relu, K>(d, act);
    case ActivationKind::Clip: return dw_plane_impl<DwAct::Clip, K>(d, act);
    default: return dw_plane_impl<DwAct::None, K>(d, act);  // None (the others: dw_activate)
  }
}

template <class>
INFER_INLINE void dw_plane_body(const DwPlane& d, const Activation& act) {
  // No lambdas here: what runs must inline into each level's function (always_inline templates do).
  const int k = d.KH == d.KW && (d.KH == 3 || d.KH == 5) ? static_cast<int>(d.KH) : 0;
  if (k == 3) return dw_plane_act<3>(d, act);
  if (k == 5) return dw_plane_act<5>(d, act);
  dw_plane_act<0>(d, act);
}
INFER_PER_ISA(void, dw_plane, dw_plane_body, (const DwPlane& d, const Activation& act), (d, act))
// The kinds other than None, ReLU and Clip: over each finished plane (at most 112 x 112 floats in the
// models, still in L2), in a function of their own. Inlined into dw_plane's, the activation code
// changed how GCC compiled the strided 5x5 loops there (144 x 56 x 56 -> 28 x 28, stride 2: 0.7 to
// 2.4 ms single-threaded between otherwise equal builds).
INFER_PER_ISA(void, dw_activate, activate_row, (float* y, int64_t n, const Activation& act), (y, n, act))
bool dw_act_after(const Activation& act) {
  return act.kind != ActivationKind::None && act.kind != ActivationKind::Relu && act.kind != ActivationKind::Clip;
}

// The plane geometry of a depthwise node (pointers and bias left for each plane), with the output
// columns every kernel column reaches inside the image.
DwPlane dw_base(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  DwPlane d{nullptr, nullptr, nullptr, 0.f, xs[2], xs[3], ys[2], ys[3], ws[2], ws[3], p.stride_h,
            p.stride_w, p.pad.top, p.pad.left, p.dilation_h, p.dilation_w, 0, ys[3]};
  for (int64_t kx = 0; kx < d.KW; ++kx) {
    int64_t lo, hi;
    tap_range(d.WO, d.sw, kx * d.dw - d.pl, d.W, lo, hi);
    d.in_lo = std::max(d.in_lo, lo);
    d.in_hi = std::min(d.in_hi, hi);
  }
  if (d.in_lo > d.in_hi) d.in_lo = d.in_hi;
  return d;
}

// Small maps (MobileNetV2's 14x14 and 7x7) are mostly border pixels, which take the bounds-checked
// scalar sum: there each plane is first copied into a zero-padded scratch plane that holds every tap
// of every output, and all pixels run the vectorised loop. Returns the scratch plane's floats, or 0
// where the border pixels are at most 1/8 of the plane (the copy would cost more than it saves).
// The scratch plane's rows and columns: every tap row / column of every output (image row / column
// + top / left padding).
std::pair<int64_t, int64_t> dw_padded_dims(const DwPlane& d) {
  return {(d.HO - 1) * d.sh + (d.KH - 1) * d.dh + 1, (d.WO - 1) * d.sw + (d.KW - 1) * d.dw + 1};
}

int64_t dw_padded_floats(const DwPlane& d) {
  int64_t rows = 0;  // output rows whose tap rows are all inside the image
  for (int64_t oy = 0; oy < d.HO; ++oy) {
    const int64_t iy0 = oy * d.sh - d.pt;
    rows += iy0 >= 0 && iy0 + (d.KH - 1) * d.dh < d.H;
  }
  const int64_t border = d.HO * d.WO - rows * (d.in_hi - d.in_lo);
  if (border * 8 <= d.HO * d.WO) return 0;
  const auto [Hp, Wp] = dw_padded_dims(d);
  return Hp * Wp;
}

// One scratch plane per processor (omp_get_num_procs: the same at creation and at run time); a
// thread numbered beyond them (OMP_NUM_THREADS above the processor count) takes the unpadded path.
size_t depthwise_workspace(const NodeDesc& node) {
  return static_cast<size_t>(dw_padded_floats(dw_base(node)) * omp_get_num_procs()) * sizeof(float);
}

void depthwise_run(const KernelCall& call) {
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t CO = ws[0], KH = ws[2], KW = ws[3], M = CO / C;
  const float* x = call.inputs[0];
  const float* w = call.inputs[1];
  const float* bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  const float* slope = prelu_slope(call);
  float* y = call.outputs[0];
  const Activation node_act = fused_activation(call.node.params);
  const DwPlane base = dw_base(call.node);
  const int64_t pad_floats = call.workspace ? dw_padded_floats(base) : 0;
  // plain variables: clang (the fuzz build) refuses structured bindings inside an OpenMP region
  const std::pair<int64_t, int64_t> padded = dw_padded_dims(base);
  const int64_t Hp = padded.first, Wp = padded.second;
  const int slots = omp_get_num_procs();
  const auto dw_plane = dw_plane_for(call.node.isa);
  const auto dw_activate = dw_activate_for(call.node.isa);

  const int64_t planes = N * CO;
#pragma omp parallel for schedule(static) if (planes * base.HO * base.WO * KH * KW >= (int64_t(1) << 15))
  for (int64_t pi = 0; pi < planes; ++pi) {
    DwPlane d = base;
    const int64_t n = pi / CO, co = pi % CO;
    const Activation act = channel_activation(node_act, slope, co);  // a per-channel PRelu's LeakyRelu
    const bool act_after = dw_act_after(act);
    const Activation conv_act = act_after ? Activation{ActivationKind::None, 0.f, 0.f} : act;
    d.x = x + (n * C + co / M) * H * W;
    d.w = w + co * KH * KW;
    d.y = y + pi * base.HO * base.WO;
    d.bias = bias ? bias[co] : 0.f;
    const int t = omp_get_thread_num();
    if (pad_floats > 0 && t < slots) {
      // padded row / column = image row / column + top / left padding
      float* xp = static_cast<float*>(call.workspace) + static_cast<int64_t>(t) * pad_floats;
      std::fill(xp, xp + pad_floats, 0.f);
      for (int64_t r = 0; r < H && r + d.pt < Hp; ++r) {
        const int64_t cols = std::min(W, Wp - d.pl);
        if (cols > 0) std::memcpy(xp + (r + d.pt) * Wp + d.pl, d.x + r * W, static_cast<size_t>(cols) * sizeof(float));
      }
      d.x = xp;
      d.H = Hp, d.W = Wp, d.pt = 0, d.pl = 0, d.in_lo = 0, d.in_hi = d.WO;
    }
    dw_plane(d, conv_act);
    if (act_after) dw_activate(d.y, base.HO * base.WO, act);
  }
}

}  // namespace

INFER_REGISTER_KERNELS(conv2d) {
  registry.add("cpu", {
      {.op = "conv2d", .name = "im2col_gemm", .priority = 10, .isa = KernelVariant::Isa::OpenBlas,
       .fuses_prelu = true, .workspace_bytes = conv2d_workspace,
       .run = conv2d_run},
      {.op = "conv2d", .name = "depthwise", .priority = 20, .isa = KernelVariant::Isa::PerIsa,
       .fuses_prelu = true, .applicable = conv2d_depthwise,
       .workspace_bytes = depthwise_workspace, .run = depthwise_run},
  });
}

}  // namespace infer::cpu
