// CUDA conv2d through cuDNN (kernels/cuda/cudnn.h), two variants:
// - `cudnn`: the convolution as cuDNN runs it (the algorithm its own timing picks: on tensor cores in
//   fp16 / tf32, an implicit GEMM with no column buffer in NHWC), NCHW or NHWC, any groups
//   (cudnnSetConvolutionGroupCount) and dilation, bias + ReLU (+ a residual input: add_residual, from
//   fuse_conv_residual) fused into the call (cudnnConvolutionBiasActivationForward's z), other
//   epilogues (and their residual; a per-channel PRelu of fuse_prelu, which cuDNN has not) by
//   bias_activation after the library call.
// - `cudnn_folded`: width folding (seed 004) for convolutions with C_in <= 4 or C_out <= 4, NHWC only.
//   In NHWC, F adjacent columns of C channels are one "pixel" of F*C channels with no data movement,
//   so [N,H,W,C] is [N,H,W/F,F*C]; the convolution becomes a stride-1 convolution over the folded
//   image with F*C_in inputs, F*C_out outputs and a block-structured kernel (built once here), whose
//   channel counts meet the tensor cores' alignment where 1 or 3 channels would not. Exact: every
//   output takes the same products as unfolded (the added weights are zeros). Requires the
//   fold_width pass; stride 1 and W, W_out multiples of F. Bias and PRelu slopes repeat per fold.
#include <algorithm>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "infer/kernel.h"
#include "kernels/cuda/cudnn.h"

namespace infer::cuda {
namespace {

// The node as cuDNN's forward problem; nullopt-like `ok = false` when it is not one cuDNN takes.
struct Geometry {
  bool ok = false;
  dnn::Problem problem;
  bool has_bias = false;
  bool residual = false;  // input 3 is added before the activation (add_residual)
  bool prelu = false;     // input 3 holds per-channel PRelu slopes (fuse_prelu)
  Activation act;
};

Geometry geometry(const NodeDesc& node) {
  Geometry g;
  const auto* p = std::get_if<Conv2DParams>(&node.params);
  // a 4th input: the residual (add_residual) or the PRelu slopes (ActivationKind::PRelu), never both
  const bool prelu = p && p->activation.kind == ActivationKind::PRelu;
  if (!p || node.input_shapes.size() < 2 || node.input_shapes.size() > (p->add_residual || prelu ? 4u : 3u) ||
      node.output_shapes.size() != 1)
    return g;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return g;
  for (const Shape* s : {&x, &w, &y})
    for (int64_t d : *s)
      if (d <= 0 || d > INT32_MAX) return g;
  if (p->groups < 1 || w[1] * p->groups != x[1] || y[1] != w[0] || w[0] % p->groups != 0 ||
      y[0] != x[0])
    return g;
  if (node.input_shapes.size() >= 3 && shape_numel(node.input_shapes[2]) != w[0]) return g;
  // cuDNN's legacy descriptors: symmetric padding.
  if (p->dilation_h < 1 || p->dilation_w < 1 || p->stride_h <= 0 || p->stride_w <= 0 ||
      p->pad.top != p->pad.bottom || p->pad.left != p->pad.right || p->pad.top < 0 || p->pad.left < 0)
    return g;
  const int64_t kh = int64_t(p->dilation_h) * (w[2] - 1) + 1, kw = int64_t(p->dilation_w) * (w[3] - 1) + 1;
  if ((x[2] + 2 * p->pad.top - kh) / p->stride_h + 1 != y[2] ||
      (x[3] + 2 * p->pad.left - kw) / p->stride_w + 1 != y[3])
    return g;
  dnn::Problem& q = g.problem;
  q.precision = node.precision;
  q.layout = node.layout;
  q.N = x[0], q.C = x[1], q.H = x[2], q.W = x[3], q.K = w[0], q.R = w[2], q.S = w[3], q.P = y[2], q.Q = y[3];
  q.pad_h = p->pad.top, q.pad_w = p->pad.left, q.stride_h = p->stride_h, q.stride_w = p->stride_w;
  q.groups = p->groups, q.dilation_h = p->dilation_h, q.dilation_w = p->dilation_w;
  g.has_bias = node.input_shapes.size() >= 3;
  g.residual = p->add_residual;
  g.prelu = prelu;
  g.act = p->activation;
  g.ok = true;
  return g;
}

bool cudnn_applicable(const NodeDesc& node) {
  // NHWC needs the weights on the host to re-lay them out once.
  // Any groups and dilation (cuDNN takes them), and a residual input.
  return geometry(node).ok &&
         (node.layout == Layout::NCHW || has_constant_weight(node));
}

// Channels-last on tensor cores (where cuDNN's implicit GEMM outruns im2col + cuBLAS, whose column
// buffer costs C_in*KH*KW times the input); NCHW is left to the tuned im2col path and reachable through
// --autotune or --kernel. From batch 4, and below it in fp16 for convolutions of >= 0.2 GMAC an image
// (cudnn_priority). On the H100 of 2026-11-24 (an older cuDNN) batch 1 had gone the other way for
// all of VGG-16 (its 13 convolutions 0.39 ms im2col vs 1.09 ms cudnn).
constexpr int64_t kFp32MinBatch = 8;
constexpr int64_t kHalfSmallBatchMinMacs = 200'000'000;  // fp16 below batch 4: cudnn from here (per image)
constexpr int64_t kDepthwise5x5MinBatch = 8;  // fp16 5x5 depthwise in NHWC: cuDNN first from this batch

int cudnn_priority(const NodeDesc& node) {
  const Geometry g = geometry(node);
  if (!g.ok) return 0;
  // depthwise: an --autotune candidate beside conv2d.depthwise (20), not the default, but for fp16 5x5
  // in NHWC from batch 8: EfficientNet-B0 fp16 batch 64 (H200, 2026-11-29, infer-bench, three
  // interleaved rounds) ran in 2.947 ms with its nine 5x5 depthwise nodes on cuDNN and 2.994 with
  // only the two stride-2 ones (the tiled kernel on the rest); per layer cuDNN won both stride-2 layers
  // and one of four stride-1 shapes (bench/results/depthwise-2026-11-29-h200). Above 20, so that the
  // layout plan keeps the node in NHWC instead of taking the NCHW depthwise kernel's 20 (5x slower).
  if (g.problem.groups > 1 && g.problem.groups == g.problem.C) {
    const bool half_5x5_batched = node.layout == Layout::NHWC && node.precision == Precision::FP16 &&
                                  g.problem.R == 5 && g.problem.S == 5 && g.problem.N >= kDepthwise5x5MinBatch;
    return half_5x5_batched ? 25 : 2;
  }
  // Strict fp32 in NCHW from batch 8: cuDNN's Winograd / FFT / implicit GEMM beat im2col + SGEMM
  // (H100, the convolutions' profile sums: VGG-16 batch 64 34.9 vs 57.7 ms, batch 8 5.25 vs 8.03 ms,
  // AlexNet batch 64 1.24 vs 2.96 ms), not at batch 1 (VGG-16 2.07 vs 1.36 ms). 1x1 convolutions keep
  // gemm_1x1 (20), C_out <= 8 direct_small_cout (30).
  if (node.precision == Precision::FP32) return g.problem.N >= kFp32MinBatch ? 15 : 4;
  if (node.layout == Layout::NCHW) return 4;
  const int64_t a = dnn::channel_alignment(node.precision);
  const bool aligned = g.problem.C % a == 0 && g.problem.K % a == 0;
  if (!aligned) return 2;
  if (g.problem.N >= 4) return 50;
  // fp16 below batch 4: only the heavy convolutions (tf32 there: not measured). H200, cuDNN 9.19
  // (2026-11-30, infer-bench, batch 1): VGG-16 0.262 ms with every conv on cudnn against 0.410 on
  // im2col_gemm, VGG-11 0.196 vs 0.254, AlexNet 0.108 vs 0.148; but a torchvision ResNet-50 2.13 ms
  // with every conv on cudnn against 0.55 in NCHW: its 1x1 layers and its 3x3 ones of 0.116 GMAC took
  // 0.09-0.23 ms each. VGG's convolutions are >= 0.46 GMAC an image, AlexNet's 5x5 one 0.22.
  const bool heavy = g.problem.R * g.problem.S > 1 &&
                     g.problem.K * g.problem.P * g.problem.Q * (g.problem.C / g.problem.groups) * g.problem.R *
                             g.problem.S >= kHalfSmallBatchMinMacs;
  return node.precision == Precision::FP16 && heavy ? 50 : 8;
}

struct State {
  std::unique_ptr<dnn::Conv> conv;
  std::unique_ptr<DeviceArray> weights;  // KRSC (NHWC) or folded; null: the node's own weight (NCHW)
  std::unique_ptr<DeviceArray> bias;     // folded bias; null: the node's own
  std::unique_ptr<DeviceArray> slope;    // folded PRelu slopes; null: the node's own (input 3), if any
  dnn::Problem problem;                  // what runs (folded for cudnn_folded)
  Activation act;
  bool has_bias = false;
  bool residual = false;
  bool prelu = false;
};

std::shared_ptr<void> cudnn_prepare(const NodeDesc& node) {
  const Geometry g = geometry(node);
  if (!g.ok) throw Error("cuda conv2d.cudnn: the node is not a convolution cuDNN takes (symmetric padding)");
  auto st = std::make_shared<State>();
  st->problem = g.problem;
  st->act = g.act;
  st->has_bias = g.has_bias;
  st->residual = g.residual;
  st->prelu = g.prelu;
  if (node.layout == Layout::NHWC) {
    if (!has_constant_weight(node)) throw Error("cuda conv2d.cudnn: NHWC needs a constant weight");
    const dnn::Problem& q = g.problem;
    const int64_t cg = q.C / q.groups;  // the filter's channels
    std::vector<float> krsc(static_cast<size_t>(q.K * cg * q.R * q.S));
    krsc_from_kcrs(node.constants[1], q.K, cg, q.R, q.S, krsc.data());
    st->weights = upload(krsc.data(), krsc.size(), node.precision);
  }
  st->conv = std::make_unique<dnn::Conv>(st->problem);
  return st;
}

size_t cudnn_workspace(const NodeDesc& node) {
  const Geometry g = geometry(node);
  return g.ok ? dnn::workspace_bytes(g.problem) : 0;
}

// Shared by both variants: the convolution (ReLU and bias fused when both are there), then any other
// epilogue (a per-channel PRelu's too) in the node's layout.
void run_prepared(const KernelCall& call, const char* variant) {
  if (!call.prepared) throw Error(std::string("cuda ") + variant + ": not prepared");
  const State& st = *static_cast<const State*>(call.prepared);
  Context& ctx = context_of(call);
  const void* w = st.weights ? st.weights->data() : call.inputs[1];
  const void* bias = st.bias ? st.bias->data() : st.has_bias ? call.inputs[2] : nullptr;
  const void* residual = st.residual ? call.inputs.at(3) : nullptr;
  const void* slope = st.slope ? st.slope->data() : st.prelu ? call.inputs.at(3) : nullptr;
  dnn::forward_epilogue(ctx, *st.conv, call.inputs[0], w, bias, st.act, call.outputs[0], call.workspace, residual,
                        slope);
}

void cudnn_run(const KernelCall& call) { run_prepared(call, "conv2d.cudnn"); }

// ---- width folding --------------------------------------------------------------------------------

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

struct Fold {
  bool ok = false;
  int64_t F = 1, lo = 0, S_f = 0;
  dnn::Problem folded;
};

// The smallest fold factor that aligns the folded channels and keeps the folded padding symmetric.
Fold fold_of(const NodeDesc& node) {
  Fold f;
  const Geometry g = geometry(node);
  if (!g.ok || node.layout != Layout::NHWC || node.precision == Precision::FP32 || !has_constant_weight(node))
    return f;
  const dnn::Problem& q = g.problem;
  if (q.groups != 1 || q.dilation_h != 1 || q.dilation_w != 1) return f;  // the fold assumes a plain conv
  if (q.stride_w != 1 || q.stride_h != 1 || (q.C > 4 && q.K > 4)) return f;
  const int64_t a = dnn::channel_alignment(node.precision);
  for (int64_t F : {4, 8, 16}) {
    if ((F * q.C) % a != 0 || (F * q.K) % a != 0 || q.W % F != 0 || q.Q % F != 0) continue;
    const int64_t lo = floor_div(-q.pad_w, F), hi = floor_div(F - 1 - q.pad_w + q.S - 1, F);
    const int64_t S_f = hi - lo + 1, W_f = q.W / F, Q_f = q.Q / F, pl = -lo;
    const int64_t pr = Q_f - W_f - pl + S_f - 1;
    if (pl < 0 || pr != pl) continue;
    f.ok = true;
    f.F = F;
    f.lo = lo;
    f.S_f = S_f;
    f.folded = q;
    f.folded.C = q.C * F, f.folded.K = q.K * F, f.folded.W = W_f, f.folded.Q = Q_f, f.folded.S = S_f;
    f.folded.pad_w = static_cast<int>(pl);
    return f;
  }
  return f;
}

bool folded_applicable(const NodeDesc& node) { return conv2d_plain(node) && fold_of(node).ok; }

// Ahead of cudnn for batched work: a 1- or 3-channel convolution leaves the tensor cores idle, which
// folding fixes (H100, VGG-16 conv1_1 at batch 64 fp16 inside the model: 0.409 ms folded, 0.758 ms
// unfolded). At small batches the NCHW kernels stay ahead: folding a single layer there costs two
// layout conversions and lost 0.459 -> 0.515 ms on VGG-16 at batch 1 fp16 (2026-11-24 runs).
int folded_priority(const NodeDesc& node) {
  const Fold f = fold_of(node);
  if (!f.ok) return 0;
  return f.folded.N >= 4 ? 60 : 5;
}

size_t folded_workspace(const NodeDesc& node) {
  const Fold f = fold_of(node);
  return f.ok ? dnn::workspace_bytes(f.folded) : 0;
}

std::shared_ptr<void> folded_prepare(const NodeDesc& node) {
  const Fold f = fold_of(node);
  if (!f.ok) throw Error("cuda conv2d.cudnn_folded: the node cannot be width-folded");
  const Geometry g = geometry(node);
  const dnn::Problem& q = g.problem;
  const int64_t F = f.F, Kf = q.K * F, Cf = q.C * F, R = q.R, Sf = f.S_f;
  // Folded KRSC weights: output channel r*K + k (output column F*j + r), input channel s*C + c (input
  // column F*(j + lo + kf) + s); the original tap kx = F*(lo + kf) + s - r + pad, zero outside [0, S).
  std::vector<float> wf(static_cast<size_t>(Kf * R * Sf * Cf), 0.f);
  const float* w = node.constants[1];
  for (int64_t r = 0; r < F; ++r)
    for (int64_t k = 0; k < q.K; ++k)
      for (int64_t ky = 0; ky < R; ++ky)
        for (int64_t kf = 0; kf < Sf; ++kf)
          for (int64_t s = 0; s < F; ++s) {
            const int64_t kx = F * (f.lo + kf) + s - r + q.pad_w;
            if (kx < 0 || kx >= q.S) continue;
            for (int64_t c = 0; c < q.C; ++c)
              wf[static_cast<size_t>((((r * q.K + k) * R + ky) * Sf + kf) * Cf + s * q.C + c)] =
                  w[((k * q.C + c) * R + ky) * q.S + kx];
          }
  auto st = std::make_shared<State>();
  st->problem = f.folded;
  st->act = g.act;
  st->has_bias = g.has_bias;
  st->prelu = g.prelu;
  st->weights = upload(wf.data(), wf.size(), node.precision);
  if (g.has_bias) st->bias = dnn::repeated_channels(node, 2, q.K, F, "conv2d.cudnn_folded");
  if (g.prelu) st->slope = dnn::repeated_channels(node, 3, q.K, F, "conv2d.cudnn_folded");
  st->conv = std::make_unique<dnn::Conv>(st->problem);
  return st;
}

void folded_run(const KernelCall& call) { run_prepared(call, "conv2d.cudnn_folded"); }

}  // namespace

INFER_REGISTER_KERNELS(conv2d_cudnn) {
  registry.add("cuda", {
      {.op = "conv2d", .name = "cudnn", .priority = 4, .priority_for = cudnn_priority,
       .layouts = {Layout::NCHW, Layout::NHWC}, .fuses_prelu = true, .applicable = cudnn_applicable,
       .workspace_bytes = cudnn_workspace, .prepare = cudnn_prepare, .run = cudnn_run},
      {.op = "conv2d", .name = "cudnn_folded", .priority = 60, .priority_for = folded_priority,
       .layouts = {Layout::NHWC}, .requires_pass = "fold_width", .fuses_prelu = true,
       .applicable = folded_applicable,
       .workspace_bytes = folded_workspace, .prepare = folded_prepare, .run = folded_run},
  });
}

}  // namespace infer::cuda
