// CUDA dense "gemm" (x [N,F_in], weight [F_out,F_in] as PyTorch, optional bias [F_out], fused
// activation), in the session precision: one cuBLAS GEMM y [N,F_out] = x W^T (cuda::gemm with
// trans_b, so the weight is used as stored), then the shared bias + activation epilogue with one
// "channel" per output feature (inner = 1). F_in = 0 writes zeros (then bias + activation).
#include <climits>
#include <string>
#include <variant>

#include "infer/error.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/gemm.h"

namespace infer::cuda {
namespace {

bool dense_applicable(const NodeDesc& node) {
  if (!std::holds_alternative<DenseParams>(node.params) || node.input_shapes.size() < 2 ||
      node.input_shapes.size() > 3 || node.output_shapes.size() != 1)
    return false;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1];
  return x.size() == 2 && w.size() == 2 && x[1] <= INT_MAX && w[0] <= INT_MAX;
}

void run_dense(const KernelCall& call) {
  if (!std::holds_alternative<DenseParams>(call.node.params))
    throw Error(std::string("cuda dense: node parameters are for op '") +
                op_name(op_type(call.node.params)) + "'");
  const size_t n_in = call.inputs.size();
  if (n_in < 2 || n_in > 3 || call.node.input_shapes.size() != n_in || call.outputs.size() != 1 ||
      call.node.output_shapes.size() != 1)
    throw Error("cuda dense: expected 2 or 3 inputs and 1 output (got " + std::to_string(n_in) +
                " inputs, " + std::to_string(call.node.input_shapes.size()) + " input shapes, " +
                std::to_string(call.outputs.size()) + " outputs)");
  for (size_t i = 0; i < n_in; ++i)
    if (!call.inputs[i]) throw Error("cuda dense: input " + std::to_string(i) + " is null");
  if (!call.outputs[0]) throw Error("cuda dense: output 0 is null");
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const Shape& ys = call.node.output_shapes[0];
  if (xs.size() != 2 || ws.size() != 2 || ys.size() != 2 || ws[1] != xs[1] || ys[0] != xs[0] ||
      ys[1] != ws[0])
    throw Error("cuda dense: inconsistent shapes input " + shape_str(xs) + ", weight " + shape_str(ws) +
                ", output " + shape_str(ys));
  for (const Shape* s : {&xs, &ws})
    for (int64_t d : *s)
      if (d < 0) throw Error("cuda dense: shape " + shape_str(*s) + " has a negative dimension");
  const int64_t N = xs[0], FI = xs[1], FO = ws[0];
  if (n_in == 3 && shape_numel(call.node.input_shapes[2]) != FO)
    throw Error("cuda dense: bias has shape " + shape_str(call.node.input_shapes[2]) + ", expected " +
                std::to_string(FO) + " elements");

  Context& ctx = context_of(call);
  const Precision p = call.node.precision;
  if (N == 0 || FO == 0) return;
  if (FI == 0) {  // an empty dot product: cuBLAS would not reliably write y
    INFER_CUDA_CHECK(cudaMemsetAsync(call.outputs[0], 0, static_cast<size_t>(N * FO) * element_size(p),
                                     ctx.stream));
  } else {
    GemmArgs g;
    g.m = N;
    g.n = FO;
    g.k = FI;
    g.a = call.inputs[0];
    g.lda = FI;
    g.b = call.inputs[1];  // W [FO, FI] read as W^T
    g.ldb = FI;
    g.trans_b = true;
    g.c = call.outputs[0];
    g.ldc = FO;
    gemm(ctx, p, g);
  }
  bias_activation(ctx, p, call.outputs[0], n_in == 3 ? call.inputs[2] : nullptr, N, FO, 1,
                  fused_activation(call.node.params));
}

}  // namespace

void register_dense(KernelRegistry& registry) {
  KernelVariant v;
  v.op = "dense";
  v.name = "gemm";
  v.backend = "cuda";
  v.priority = 10;
  v.applicable = dense_applicable;
  v.run = run_dense;
  registry.add(std::move(v));
}

}  // namespace infer::cuda
