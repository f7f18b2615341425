// CUDA conv_transpose2d through cuDNN (kernels/cuda/cudnn.h): `cudnn` runs the transposed convolution
// as the backward-data pass of the forward convolution from its output to its input. For stride 2 that
// is what CUTLASS calls "strided dgrad": cuDNN decomposes it by output phase like the unified
// kernel-segregation method (Tida et al.), each phase an implicit GEMM on tensor cores in fp16 / tf32,
// no zero-upsampled buffer and no column buffer. NCHW or NHWC (weights re-laid out to KRSC once);
// bias + activation (or a per-channel PRelu) by infer's epilogue after (cuDNN fuses none into backward
// data).
// `cudnn_folded`: width folding (seed 004) for a generator's output layer with few channels (C_out <=
// 4, e.g. DCGAN's 128 -> 3), NHWC, under the fold_width pass: F input columns are one pixel of F*C_in
// channels and the s*F output columns they produce one pixel of s*F*C_out channels (no data movement
// in NHWC), so along the width the layer becomes a stride-1 transposed convolution over folded pixels
// with a block-structured kernel built once here; the height keeps its stride. Exact: every output
// takes the same products (the added weights are zeros); bias and PRelu slopes repeat per fold.
#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "infer/kernel.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/epilogue.h"

namespace infer::cuda {
namespace {

struct Geometry {
  bool ok = false;
  dnn::Problem problem;  // backward data: problem.{N,C,H,W} is the tconv's output, {P,Q} its input
  bool has_bias = false;
  Activation act;
};

Geometry geometry(const NodeDesc& node) {
  Geometry g;
  if (!conv_transpose2d_plain(node)) return g;  // groups 1, dilation 1 (gemm_col2im takes the others)
  const ConvTranspose2DDims d = conv_transpose2d_dims(node, "cuda");
  const ConvTranspose2DParams& p = *d.p;
  // cuDNN's legacy descriptors: symmetric padding, dilation 1; every size an int.
  if (d.pt != d.pb || d.pl != d.pr || p.dilation_h != 1 || p.dilation_w != 1) return g;
  for (int64_t v : {d.N, d.CI, d.H, d.W, d.CO, d.KH, d.KW, d.HO, d.WO})
    if (v <= 0 || v > INT32_MAX) return g;
  dnn::Problem& q = g.problem;
  q.backward_data = true;
  q.precision = node.precision;
  q.layout = node.layout;
  q.N = d.N, q.C = d.CO, q.H = d.HO, q.W = d.WO, q.K = d.CI, q.R = d.KH, q.S = d.KW, q.P = d.H, q.Q = d.W;
  q.pad_h = d.pt, q.pad_w = d.pl, q.stride_h = d.sh, q.stride_w = d.sw;
  // The forward convolution of the output must give back the input's size (output_padding < stride).
  if ((q.H + 2 * q.pad_h - q.R) / q.stride_h + 1 != q.P || (q.W + 2 * q.pad_w - q.S) / q.stride_w + 1 != q.Q)
    return g;
  g.has_bias = node.input_shapes.size() >= 3;
  g.act = d.act;
  g.ok = true;
  return g;
}

bool applicable(const NodeDesc& node) {
  return geometry(node).ok && (node.layout == Layout::NCHW || has_constant_weight(node));
}

// Channels-last on tensor cores for batched generators (batch >= 8) when the output channels align;
// a 3-channel image output stays with infer's NCHW kernels. NCHW and small batches: today's
// segregated / col2im kernels (measured faster at batch 1); cudnn through --autotune or --kernel.
// Except fp16 stride-2 layers on inputs over 64x64 below batch 8 (EB-GAN's 128x128x128 -> 64): 22,
// above segregated_gemm (20), so the channels_last pass runs them NHWC on cuDNN. H200, 2026-11-29,
// EB-GAN batch 1 fp16 with the node forced to each variant: cudnn 0.161 ms for the model (two layout
// conversions included), segregated_gemm 0.193 (its kernel 71 us), cutlass 0.191, gemm_col2im 0.194.
int priority(const NodeDesc& node) {
  const Geometry g = geometry(node);
  if (!g.ok) return 0;
  if (node.layout == Layout::NCHW || node.precision == Precision::FP32) return 4;
  const int64_t a = dnn::channel_alignment(node.precision);
  const dnn::Problem& q = g.problem;
  if (q.C % a != 0) return 2;
  if (q.N >= 8) return 50;
  const bool large_s2 = q.stride_h == 2 && q.stride_w == 2 && q.P * q.Q > 4096;
  return node.precision == Precision::FP16 && large_s2 ? 22 : 8;
}

struct State {
  std::unique_ptr<dnn::Conv> conv;
  std::unique_ptr<DeviceArray> weights;  // KRSC for NHWC; null: the node's own weight (NCHW)
  Geometry g;
};

std::shared_ptr<void> prepare(const NodeDesc& node) {
  auto st = std::make_shared<State>();
  st->g = geometry(node);
  if (!st->g.ok)
    throw Error("cuda conv_transpose2d.cudnn: the node is not one cuDNN takes (symmetric padding, "
                "groups and dilation 1)");
  const dnn::Problem& q = st->g.problem;
  if (node.layout == Layout::NHWC) {
    if (!has_constant_weight(node)) throw Error("cuda conv_transpose2d.cudnn: NHWC needs a constant weight");
    std::vector<float> krsc(static_cast<size_t>(q.K * q.C * q.R * q.S));
    krsc_from_kcrs(node.constants[1], q.K, q.C, q.R, q.S, krsc.data());
    st->weights = upload(krsc.data(), krsc.size(), node.precision);
  }
  st->conv = std::make_unique<dnn::Conv>(q);
  return st;
}

size_t workspace(const NodeDesc& node) {
  const Geometry g = geometry(node);
  return g.ok ? dnn::workspace_bytes(g.problem) : 0;
}

void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda conv_transpose2d.cudnn: not prepared");
  const State& st = *static_cast<const State*>(call.prepared);
  Context& ctx = context_of(call);
  const void* w = st.weights ? st.weights->data() : call.inputs[1];
  st.conv->backward_data(ctx, call.inputs[0], w, call.outputs[0], call.workspace);
  const dnn::Problem& q = st.g.problem;
  const void* bias = st.g.has_bias ? call.inputs[2] : nullptr;
  const void* slope = prelu_slope(call);
  if (q.layout == Layout::NHWC)
    bias_activation_nhwc(ctx, call.node.precision, call.outputs[0], bias, q.N * q.H * q.W, q.C, st.g.act,
                         nullptr, slope);
  else
    bias_activation(ctx, call.node.precision, call.outputs[0], bias, q.N, q.C, q.H * q.W, st.g.act, nullptr,
                    slope);
}

// ---- width folding --------------------------------------------------------------------------------

// The fold of a node: F input columns per folded pixel, G = s*F output columns; along the width,
// output column G*j + r takes input column F*(j + d) + t through tap kx = r - s*t + pad - s*F*d, so the
// folded tap kf = P - d over d in [-P, P] (symmetric: what cuDNN's descriptors need).
struct Fold {
  bool ok = false;
  int64_t F = 1, G = 1, P = 0;
  dnn::Problem folded;  // backward data over the folded width
};

Fold fold_of(const NodeDesc& node) {
  Fold f;
  const Geometry g = geometry(node);
  if (!g.ok || node.layout != Layout::NHWC || node.precision == Precision::FP32 || !has_constant_weight(node))
    return f;
  const dnn::Problem& q = g.problem;  // C = the tconv's C_out, K its C_in, {H,W} its output, {P,Q} its input
  const int64_t s = q.stride_w;
  if (q.C > 4 || q.W != s * q.Q) return f;  // output columns = s x input columns: folds evenly
  const int64_t a = dnn::channel_alignment(node.precision);
  for (int64_t F : {1, 2, 4, 8, 16}) {
    const int64_t G = s * F;
    if ((G * q.C) % a != 0 || (F * q.K) % a != 0 || q.Q % F != 0) continue;
    int64_t dmin = INT64_MAX, dmax = INT64_MIN;
    for (int64_t r = 0; r < G; ++r)
      for (int64_t t = 0; t < F; ++t)
        for (int64_t kx = 0; kx < q.S; ++kx) {
          const int64_t num = r - s * t + q.pad_w - kx;
          if (num % G != 0) continue;
          const int64_t d = num / G;
          dmin = std::min(dmin, d), dmax = std::max(dmax, d);
        }
    if (dmin == INT64_MAX || dmin != -dmax) continue;
    f.ok = true;
    f.F = F, f.G = G, f.P = dmax;
    f.folded = q;
    f.folded.K = q.K * F, f.folded.C = q.C * G, f.folded.Q = q.Q / F, f.folded.W = q.W / G;
    f.folded.S = 2 * dmax + 1, f.folded.stride_w = 1, f.folded.pad_w = static_cast<int>(dmax);
    return f;
  }
  return f;
}

bool folded_applicable(const NodeDesc& node) { return fold_of(node).ok; }

// An --autotune / --kernel candidate, below the NCHW kernels: measured slower (H100, DCGAN's 128 -> 3
// output layer at batch 64 fp16: 0.092 ms folded on cuDNN against 0.022 ms gemm_col2im + 0.015 ms for
// the conversion before it; the model 0.206 -> 0.229 ms, tf32 0.504 -> 0.558, batch 8 fp16 0.082 ->
// 0.098; 2026-11-25): cuDNN's backward data over 24 folded output channels ran at 9 TFLOP/s.
int folded_priority(const NodeDesc& node) { return fold_of(node).ok ? 5 : 0; }

size_t folded_workspace(const NodeDesc& node) {
  const Fold f = fold_of(node);
  return f.ok ? dnn::workspace_bytes(f.folded) : 0;
}

struct FoldedState {
  std::unique_ptr<dnn::Conv> conv;
  std::unique_ptr<DeviceArray> weights, bias, slope;  // folded KRSC; bias and PRelu slopes repeated G times
  dnn::Problem folded;
  Activation act;
};

std::shared_ptr<void> folded_prepare(const NodeDesc& node) {
  const Fold f = fold_of(node);
  if (!f.ok) throw Error("cuda conv_transpose2d.cudnn_folded: the node cannot be width-folded");
  const Geometry g = geometry(node);
  const dnn::Problem& q = g.problem;
  const int64_t s = q.stride_w, F = f.F, G = f.G, Kf = f.folded.K, Cf = f.folded.C, Sf = f.folded.S;
  // Folded KRSC [K_f][R][S_f][C_f]: input channel t*CI + ci, output channel r*CO + co, folded tap kf
  // (d = P - kf) hold w[ci][co][ky][kx] with kx = r - s*t + pad - G*d, zero outside [0, S).
  std::vector<float> wf(static_cast<size_t>(Kf * q.R * Sf * Cf), 0.f);
  const float* w = node.constants[1];  // [CI][CO][KH][KW]
  for (int64_t t = 0; t < F; ++t)
    for (int64_t ci = 0; ci < q.K; ++ci)
      for (int64_t ky = 0; ky < q.R; ++ky)
        for (int64_t kf = 0; kf < Sf; ++kf)
          for (int64_t r = 0; r < G; ++r) {
            const int64_t kx = r - s * t + q.pad_w - G * (f.P - kf);
            if (kx < 0 || kx >= q.S) continue;
            for (int64_t co = 0; co < q.C; ++co)
              wf[static_cast<size_t>((((t * q.K + ci) * q.R + ky) * Sf + kf) * Cf + r * q.C + co)] =
                  w[((ci * q.C + co) * q.R + ky) * q.S + kx];
          }
  auto st = std::make_shared<FoldedState>();
  st->folded = f.folded;
  st->act = g.act;
  st->weights = upload(wf.data(), wf.size(), node.precision);
  if (g.has_bias) st->bias = dnn::repeated_channels(node, 2, q.C, G, "conv_transpose2d.cudnn_folded");
  if (g.act.kind == ActivationKind::PRelu)
    st->slope = dnn::repeated_channels(node, 3, q.C, G, "conv_transpose2d.cudnn_folded");
  st->conv = std::make_unique<dnn::Conv>(st->folded);
  return st;
}

void folded_run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda conv_transpose2d.cudnn_folded: not prepared");
  const FoldedState& st = *static_cast<const FoldedState*>(call.prepared);
  Context& ctx = context_of(call);
  st.conv->backward_data(ctx, call.inputs[0], st.weights->data(), call.outputs[0], call.workspace);
  const dnn::Problem& q = st.folded;
  bias_activation_nhwc(ctx, call.node.precision, call.outputs[0], st.bias ? st.bias->data() : nullptr,
                       q.N * q.H * q.W, q.C, st.act, nullptr, st.slope ? st.slope->data() : nullptr);
}

}  // namespace

INFER_REGISTER_KERNELS(conv_transpose2d_cudnn) {
  registry.add("cuda", {
      {.op = "conv_transpose2d", .name = "cudnn", .priority = 4, .priority_for = priority,
       .layouts = {Layout::NCHW, Layout::NHWC}, .fuses_prelu = true, .applicable = applicable,
       .workspace_bytes = workspace, .prepare = prepare, .run = run},
      {.op = "conv_transpose2d", .name = "cudnn_folded", .priority = 5, .priority_for = folded_priority,
       .layouts = {Layout::NHWC}, .requires_pass = "fold_width", .fuses_prelu = true,
       .applicable = folded_applicable, .workspace_bytes = folded_workspace, .prepare = folded_prepare, .run = folded_run},
  });
}

}  // namespace infer::cuda
