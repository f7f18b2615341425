// CUDA conv_transpose2d `projection`: a generator's first layer, z [N,C_in,1,1] -> [N,C_out,KH,KW]
// (stride any, padding 0, output_padding 0). With a 1x1 input every output element is one dot product
// y[n][co][ky][kx] = sum_ci z[n][ci] w[ci][co][ky][kx], so the layer is ONE GEMM over the batch,
// Y [N x C_out*KH*KW] = Z [N x C_in] . W [C_in x C_out*KH*KW], which reads the weights once for all
// images (gemm_col2im ran a GEMM per image, re-reading them: 31% of DCGAN's batch-64 fp16 time).
// NCHW uses the weight as stored; NHWC a copy re-laid out once as [C_in][KH][KW][C_out], so the GEMM
// writes channels-last directly. Bias + activation (or per-channel PRelu) by the shared epilogue. At
// batch <= 4 the layer is a stream of its weights: gemv.h's gemv_cols instead (one thread per output,
// the epilogue fused).
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "infer/kernel.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemv.h"

namespace infer::cuda {
namespace {

bool applicable(const NodeDesc& node) {
  if (!conv_transpose2d_plain(node)) return false;  // groups 1, dilation 1
  const ConvTranspose2DDims d = conv_transpose2d_dims(node, "cuda");
  return d.H == 1 && d.W == 1 && d.pt == 0 && d.pl == 0 && d.pb == 0 && d.pr == 0 && d.HO == d.KH &&
         d.WO == d.KW && d.p->dilation_h == 1 && d.p->dilation_w == 1 &&
         (node.layout == Layout::NCHW || has_constant_weight(node));
}

int priority(const NodeDesc& node) { return applicable(node) ? 60 : 0; }

struct State {
  std::unique_ptr<DeviceArray> weights;  // NHWC: [C_in][KH][KW][C_out]; NCHW: null (the node's own)
};

std::shared_ptr<void> prepare(const NodeDesc& node) {
  if (!applicable(node)) throw Error("cuda conv_transpose2d.projection: needs a 1x1 input, no padding");
  auto st = std::make_shared<State>();
  if (node.layout == Layout::NHWC) {
    const ConvTranspose2DDims d = conv_transpose2d_dims(node, "cuda");
    const float* w = node.constants[1];
    std::vector<float> t(static_cast<size_t>(d.CI * d.CO * d.KH * d.KW));
    for (int64_t ci = 0; ci < d.CI; ++ci)
      for (int64_t co = 0; co < d.CO; ++co)
        for (int64_t k = 0; k < d.KH * d.KW; ++k)
          t[static_cast<size_t>((ci * d.KH * d.KW + k) * d.CO + co)] = w[(ci * d.CO + co) * d.KH * d.KW + k];
    st->weights = upload(t.data(), t.size(), node.precision);
  }
  return st;
}

void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda conv_transpose2d.projection: not prepared");
  if (!applicable(call.node))
    throw Error("cuda conv_transpose2d.projection: needs a 1x1 input, no padding");
  const ConvTranspose2DDims d = conv_transpose2d_dims(call.node, "cuda");
  const State& st = *static_cast<const State*>(call.prepared);
  Context& ctx = context_of(call);
  const int64_t cols = d.CO * d.KH * d.KW;
  const void* w = st.weights ? st.weights->data() : call.inputs[1];
  const void* bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  const void* slope = prelu_slope(call);
  if (d.N <= kGemvMaxRows) {  // batch <= 4: a stream of the weights, bias + activation in the same kernel
    GemvEpilogue ep;
    ep.bias = bias;
    ep.bias_div = call.node.layout == Layout::NHWC ? 1 : d.KH * d.KW;  // channel of output column j
    ep.bias_mod = d.CO;
    ep.act = d.act;
    ep.slope = slope;
    gemv_cols(ctx, call.node.precision, call.inputs[0], w, call.outputs[0], d.N, d.CI, cols, ep);
    return;
  }
  GemmArgs g;
  g.m = d.N, g.n = cols, g.k = d.CI;
  g.a = call.inputs[0], g.lda = d.CI;
  g.b = w, g.ldb = cols;
  g.c = call.outputs[0], g.ldc = cols;
  gemm(ctx, call.node.precision, g);
  if (call.node.layout == Layout::NHWC)
    bias_activation_nhwc(ctx, call.node.precision, call.outputs[0], bias, d.N * d.KH * d.KW, d.CO, d.act,
                         nullptr, slope);
  else
    bias_activation(ctx, call.node.precision, call.outputs[0], bias, d.N, d.CO, d.KH * d.KW, d.act, nullptr,
                    slope);
}

}  // namespace

INFER_REGISTER_KERNELS(conv_transpose2d_projection) {
  registry.add("cuda", {
      {.op = "conv_transpose2d", .name = "projection", .priority = 60, .priority_for = priority,
       .layouts = {Layout::NCHW, Layout::NHWC}, .fuses_prelu = true, .applicable = applicable,
       .prepare = prepare, .run = run},
  });
}

}  // namespace infer::cuda
