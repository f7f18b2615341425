// CPU element-wise kernels, all "direct" OpenMP loops over contiguous float32 data: activation (every
// ActivationKind through activation_simd.h's activate_row, compiled per ISA level, in chunks of
// kActChunk floats; none copies), add (equal shapes, then the fused activation) and inference
// batchnorm over axis 1 (when the fold pass did not remove it): per channel, scale and shift are
// precomputed as a = scale / sqrt(var + eps), b = bias - mean * a, so y = act(a * x + b). Each output
// depends only on the input at the same index, so every kernel may run in place (y == x).
#include <cmath>
#include <string>
#include <algorithm>

#include "kernels/cpu/activation_simd.h"
#include "infer/kernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"

namespace infer::cpu {
namespace {

// Loops smaller than this many elements run on one thread: waking a thread team costs more than they
// do (and far more on a loaded machine).
constexpr int64_t kParallelMin = int64_t(1) << 15;


INFER_PER_ISA(void, act_row, activate_row, (float* y, const float* x, int64_t n, const Activation& act),
              (y, x, n, act))

// Elements per OpenMP iteration: a multiple of every level's vector width.
constexpr int64_t kActChunk = 4096;

void activation_run(const KernelCall& call) {
  const Activation act = std::get<ActivationParams>(call.node.params).activation;
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const auto row = act_row_for(call.node.isa);
  const int64_t chunks = (n + kActChunk - 1) / kActChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c)
    row(y + c * kActChunk, x + c * kActChunk, std::min(kActChunk, n - c * kActChunk), act);
}

void add_run(const KernelCall& call) {
  const Activation act = std::get<AddParams>(call.node.params).activation;
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  const float *a = call.inputs[0], *b = call.inputs[1];
  float* y = call.outputs[0];
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  activate_inplace(y, n, act);
}

void batchnorm_run(const KernelCall& call) {
  const auto& p = std::get<BatchNormParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  const int64_t N = s[0], C = s[1], inner = shape_numel(s) / std::max<int64_t>(N * C, 1);
  const float *x = call.inputs[0], *scale = call.inputs[1], *bias = call.inputs[2],
              *mean = call.inputs[3], *var = call.inputs[4];
  float* y = call.outputs[0];
  // One plane per iteration; its channel's a and b are computed there (in double, rounded once), which
  // costs one sqrt per plane and needs no scratch memory.
#pragma omp parallel for schedule(static) if (N * C * inner >= kParallelMin)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const int64_t c = nc % C;
    const double inv_std = 1.0 / std::sqrt(double(var[c]) + double(p.epsilon));
    const float a = float(double(scale[c]) * inv_std);
    const float b = float(double(bias[c]) - double(mean[c]) * double(scale[c]) * inv_std);
    const float* xp = x + nc * inner;
    float* yp = y + nc * inner;
    for (int64_t i = 0; i < inner; ++i) yp[i] = activate(p.activation, a * xp[i] + b);
  }
}

}  // namespace

INFER_REGISTER_KERNELS(elementwise) {
  registry.add("cpu", {
      // element by element (add: equal shapes, so equal layouts): either layout
      {.op = "activation", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .run = activation_run},
      {.op = "add", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC}, .run = add_run},
      {.op = "batchnorm", .name = "direct", .priority = 10, .run = batchnorm_run},
  });
}

}  // namespace infer::cpu
