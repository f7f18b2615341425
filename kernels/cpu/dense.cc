// CPU dense "gemm" (x [N,F_in], weight [F_out,F_in] as PyTorch, float32): y is first filled with the
// bias (or zeros), then BLAS accumulates into it with beta = 1 -- cblas_sgemv y += W x for one sample,
// cblas_sgemm y += x W^T for a batch -- and the activation runs as an OpenMP loop. Filling y first
// makes the result independent of whatever the output buffer held (BLAS beta = 0 is not relied on).
#include <algorithm>
#include <climits>
#include <string>

#include <cblas.h>

#include "kernels/cpu/call_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {
namespace {

bool dense_applicable(const NodeDesc& node) {
  if (!std::holds_alternative<DenseParams>(node.params) || node.input_shapes.size() < 2 ||
      node.input_shapes.size() > 3 || node.output_shapes.size() != 1)
    return false;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1];
  return x.size() == 2 && w.size() == 2 && x[1] <= INT_MAX && w[0] <= INT_MAX;
}

void dense_run(const KernelCall& call) {
  check_call(call, "dense", 2, 3);
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const Shape& ys = call.node.output_shapes[0];
  if (xs.size() != 2 || ws.size() != 2 || ys.size() != 2 || ws[1] != xs[1] || ys[0] != xs[0] ||
      ys[1] != ws[0])
    throw Error("cpu dense: inconsistent shapes input " + shape_str(xs) + ", weight " + shape_str(ws) +
                ", output " + shape_str(ys));
  for (const Shape* s : {&xs, &ws}) check_dims("dense", *s);
  const int64_t N = xs[0], FI = xs[1], FO = ws[0];
  if (call.inputs.size() == 3 && shape_numel(call.node.input_shapes[2]) != FO)
    throw Error("cpu dense: bias has shape " + shape_str(call.node.input_shapes[2]) + ", expected " +
                std::to_string(FO) + " elements");
  const float* x = call.inputs[0];
  const float* w = call.inputs[1];
  const float* bias = call.inputs.size() == 3 ? call.inputs[2] : nullptr;
  float* y = call.outputs[0];

#pragma omp parallel for schedule(static) if (N * FO >= int64_t(1) << 15)
  for (int64_t n = 0; n < N; ++n) {
    float* row = y + n * FO;
    if (bias) std::copy(bias, bias + FO, row);
    else std::fill(row, row + FO, 0.f);
  }
  if (N == 1 && FO > 0 && FI > 0)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, int(FO), int(FI), 1.f, w, int(FI), x, 1, 1.f, y, 1);
  else
    sgemm(false, true, N, FO, FI, 1.f, x, FI, w, FI, 1.f, y, FO);
  activate_inplace(y, N * FO, fused_activation(call.node.params));
}

}  // namespace

void register_dense(KernelRegistry& registry) {
  KernelVariant v;
  v.op = "dense";
  v.name = "gemm";
  v.backend = "cpu";
  v.priority = 10;
  v.applicable = dense_applicable;
  v.run = dense_run;
  registry.add(std::move(v));
}

}  // namespace infer::cpu
