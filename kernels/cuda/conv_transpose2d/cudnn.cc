// CUDA conv_transpose2d through cuDNN (kernels/cuda/cudnn.h): `cudnn` runs the transposed convolution
// as the backward-data pass of the forward convolution from its output to its input. For stride 2 that
// is what CUTLASS calls "strided dgrad": cuDNN decomposes it by output phase like the unified
// kernel-segregation method (Tida et al.), each phase an implicit GEMM on tensor cores in fp16 / tf32,
// no zero-upsampled buffer and no column buffer. NCHW or NHWC (weights re-laid out to KRSC once);
// bias + activation by infer's epilogue after (cuDNN fuses none into backward data).
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/cuda_kernels.h"
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
  g.has_bias = node.input_shapes.size() == 3;
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
int priority(const NodeDesc& node) {
  const Geometry g = geometry(node);
  if (!g.ok) return 0;
  if (node.layout == Layout::NCHW || node.precision == Precision::FP32) return 4;
  const int64_t a = dnn::channel_alignment(node.precision);
  if (g.problem.C % a != 0) return 2;
  return g.problem.N >= 8 ? 50 : 8;
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
  if (q.layout == Layout::NHWC)
    bias_activation_nhwc(ctx, call.node.precision, call.outputs[0], bias, q.N * q.H * q.W, q.C, st.g.act);
  else
    bias_activation(ctx, call.node.precision, call.outputs[0], bias, q.N, q.C, q.H * q.W, st.g.act);
}

}  // namespace

void register_conv_transpose2d_cudnn(KernelRegistry& registry) {
  registry.add("cuda", {
      {.op = "conv_transpose2d", .name = "cudnn", .priority = 4, .priority_for = priority,
       .layouts = {Layout::NCHW, Layout::NHWC}, .applicable = applicable,
       .workspace_bytes = workspace, .prepare = prepare, .run = run},
  });
}

}  // namespace infer::cuda
