// CPU dense "gemm" (x [N,F_in], weight [F_out,F_in] as PyTorch, float32): y is first filled with the
// bias (or zeros), then BLAS accumulates into it with beta = 1 -- cblas_sgemv y += W x for one sample,
// cblas_sgemm y += x W^T for a batch -- and the activation runs as an OpenMP loop. Filling y first
// makes the result independent of whatever the output buffer held (BLAS beta = 0 is not relied on).
// A per-channel PRelu epilogue (fuse_prelu) is one select per element with feature f's slope.
#include <algorithm>
#include <climits>
#include <string>

#include <cblas.h>

#include "infer/kernel.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {
namespace {

// BLAS takes int dimensions.
bool dense_applicable(const NodeDesc& node) {
  return node.input_shapes[0][1] <= INT_MAX && node.input_shapes[1][0] <= INT_MAX;
}

void dense_run(const KernelCall& call) {
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const int64_t N = xs[0], FI = xs[1], FO = ws[0];
  const float* x = call.inputs[0];
  const float* w = call.inputs[1];
  const float* bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
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
  if (const float* slope = prelu_slope(call)) {
#pragma omp parallel for schedule(static) if (N * FO >= int64_t(1) << 15)
    for (int64_t n = 0; n < N; ++n) {
      float* row = y + n * FO;
#pragma omp simd
      for (int64_t f = 0; f < FO; ++f) row[f] = row[f] < 0.f ? slope[f] * row[f] : row[f];
    }
    return;
  }
  activate_inplace(y, N * FO, fused_activation(call.node.params));
}

}  // namespace

INFER_REGISTER_KERNELS(dense) {
  registry.add("cpu", {
      {.op = "dense", .name = "gemm", .priority = 10, .isa = KernelVariant::Isa::OpenBlas,
       .fuses_prelu = true, .applicable = dense_applicable,
       .run = dense_run},
  });
}

}  // namespace infer::cpu
