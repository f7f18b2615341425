// CPU conv2d "depthwise_nhwc": a depthwise conv2d (groups == C_in == C_out, weight [C,1,KH,KW], any
// kernel, stride, padding and dilation) on NHWC activations, vectorised along the channels: an output
// pixel's kLanes channels (16 on AVX-512, 8 on AVX2, 4 on baseline) are one vector, and each tap is
// one FMA of the input pixel's channel vector with the tap's weight vector. The weight is re-laid out
// once in prepare() as [KH*KW][C rounded up to kLanes] (zeros past C) with the bias beside it, so the
// taps' weights are whole-vector loads; a channel count that is not a multiple of the vector (24, 40
// at AVX-512) ends in one masked vector of inputs and outputs (nhwc.h). 3x3 and 5x5 at stride 1 or 2
// (the common case, compile-time kernel and stride): the KH*KW weight vectors stay in registers while
// one output row of one channel vector is computed, U output columns at a time (8 on AVX-512 3x3,
// else 4) as a sliding window, each input vector loaded once and multiplied into every accumulator
// that needs it; the border columns two at a time, taps outside the image reading a zero vector.
// Other kernels, strides, dilations: one output at a time, taps clipped. Bias and the fused
// activation at the store (ReLU, Clip, HardSigmoid, HardSwish in registers; others per element after
// the row). The row kernel is depthwise_nhwc.cc's, shared with depthwise_pointwise.fused_nhwc.
// Threads: the kernels' team (thread_pool.h) over (image, output row, group of up to 4 channel
// vectors), guided; one thread below kParallelMin multiply-adds.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "infer/kernel.h"
#include "kernels/cpu/depthwise_nhwc.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

// Multiply-adds below which one thread runs the node (docs/kernels.md "CPU: the channels-last path").
constexpr int64_t kParallelMin = int64_t(1) << 19;
using namespace dwk;

DwDims dw_dims(const NodeDesc& node) {
  return dwk::dw_dims(std::get<Conv2DParams>(node.params), node.input_shapes[0], node.input_shapes[1],
                      node.output_shapes[0][2], node.output_shapes[0][3], node.isa);
}

std::shared_ptr<void> dw_prepare(const NodeDesc& node) {
  const DwDims d = dw_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv2d.depthwise_nhwc: the weight must be a constant");
  auto prep = std::make_shared<DwPrepared>();
  dw_pack(d, w, node.constants.size() >= 3 ? node.constants[2] : nullptr, *prep);
  return prep;
}

void dw_run(const KernelCall& call) {
  const DwDims d = dw_dims(call.node);
  const auto* prep = static_cast<const DwPrepared*>(call.prepared);
  if (!prep) throw Error("cpu conv2d.depthwise_nhwc: not prepared for this node");
  const Activation act = fused_activation(call.node.params);
  const float* slope = prelu_slope(call);
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const int64_t tasks = d.N * d.HO * d.groups;
  const bool parallel = d.N * d.HO * d.WO * d.C * d.KH * d.KW >= kParallelMin;
  const DwRowFn row_fn = dw_row_fn(call.node.isa, d, act.kind);
  const float *w = prep->w.data(), *bias = prep->bias.data();
  parallel_for(tasks, parallel, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {  // task t: channel group g of output row oy of image n
      const int64_t g = t % d.groups, row = t / d.groups, n = row / d.HO, oy = row % d.HO;
      const int64_t c0 = g * d.group, c1 = std::min(d.C, c0 + d.group);
      row_fn(d, x, w, bias, y + (n * d.HO + oy) * d.WO * d.C, n, oy, c0, c1, act, slope);
    }
  });
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

INFER_REGISTER_KERNELS(conv2d_depthwise_nhwc) {
  // Priority 25, above the NCHW depthwise (20): the channels_last pass switches a graph to NHWC at its
  // first depthwise convolution (docs/kernels.md "CPU: the channels-last path": measured faster).
  registry.add("cpu", {
      {.op = "conv2d", .name = "depthwise_nhwc", .priority = 25, .layouts = {Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .fuses_prelu = true, .applicable = dw_applicable,
       .prepare = dw_prepare, .run = dw_run},
  });
}

}  // namespace infer::cpu
