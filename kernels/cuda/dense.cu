// CUDA dense (x [N,F_in], weight [F_out,F_in] as PyTorch, optional bias [F_out], fused activation), in
// the session precision, float sums. "gemm": one cuBLAS GEMM y [N,F_out] = x W^T (cuda::gemm_x_wt: the
// weight is used as stored), then the shared bias + activation epilogue with one "channel" per output
// feature (inner = 1); F_in = 0 writes zeros (then bias + activation). "gemv": batch <= 4, where the
// layer is a stream of its weights (VGG-16's fc1: 205 MB in fp16 for one 4096-vector): gemv.h's
// gemv_rows, one warp per output feature, bias and activation in the same kernel.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <variant>

#include "infer/error.h"
#include "kernels/cuda/context.h"
#include "infer/kernel.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemv.h"

namespace infer::cuda {
namespace {

// cuBLAS takes int dimensions.
bool dense_applicable(const NodeDesc& node) {
  return node.input_shapes[0][1] <= INT_MAX && node.input_shapes[1][0] <= INT_MAX;
}

void run_dense(const KernelCall& call) {
  const size_t n_in = call.inputs.size();
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const int64_t N = xs[0], FI = xs[1], FO = ws[0];

  Context& ctx = context_of(call);
  const Precision p = call.node.precision;
  if (N == 0 || FO == 0) return;
  gemm_x_wt(ctx, p, call.inputs[0], call.inputs[1], call.outputs[0], N, FI, FO);
  bias_activation(ctx, p, call.outputs[0], n_in >= 3 ? call.inputs[2] : nullptr, N, FO, 1,
                  fused_activation(call.node.params), nullptr, prelu_slope(call));
}

bool gemv_applicable(const NodeDesc& node) {
  return node.input_shapes[0][0] <= kGemvMaxRows && dense_applicable(node);
}

void run_gemv(const KernelCall& call) {
  const int64_t N = call.node.input_shapes[0][0], FI = call.node.input_shapes[0][1];
  const int64_t FO = call.node.input_shapes[1][0];
  if (N > kGemvMaxRows) throw Error("cuda dense.gemv: at most 4 rows");
  if (N == 0 || FO == 0) return;
  Context& ctx = context_of(call);
  GemvEpilogue ep;
  ep.bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  ep.bias_mod = FO;
  ep.act = fused_activation(call.node.params);  // PRelu: an identity in activate(), then the slopes' select
  ep.slope = prelu_slope(call);
  gemv_rows(ctx, call.node.precision, call.inputs[0], call.inputs[1], call.outputs[0], N, FI, FO, ep);
}

}  // namespace

INFER_REGISTER_KERNELS(dense) {
  registry.add("cuda", {
      {.op = "dense", .name = "gemm", .priority = 10, .fuses_prelu = true, .applicable = dense_applicable,
       .run = run_dense},
      {.op = "dense", .name = "gemv", .priority = 20, .fuses_prelu = true, .applicable = gemv_applicable,
       .run = run_gemv},
  });
}

}  // namespace infer::cuda
