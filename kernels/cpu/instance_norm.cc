// CPU instance_norm "direct": one OpenMP iteration per (n, c) plane of [N,C,...]. Two passes in
// double (the mean, then the sum of squared deviations: the biased variance without cancellation),
// then y = act((x - mean) * a + bias) with a = scale / sqrt(var + eps), in float. A plane is
// read completely before it is written, so it may run in place. float32, NCHW.
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;

void instance_norm_run(const KernelCall& call) {
  const auto& p = std::get<InstanceNormParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  const int64_t C = s[1], planes = s[0] * C;
  const int64_t inner = planes ? shape_numel(s) / planes : 0;
  const float *x = call.inputs[0], *scale = call.inputs[1], *bias = call.inputs[2];
  float* y = call.outputs[0];
  if (inner == 0) return;
#pragma omp parallel for schedule(static) if (planes * inner >= kParallelMin)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const int64_t c = nc % C;
    const float* xp = x + nc * inner;
    float* yp = y + nc * inner;
    double sum = 0;
    for (int64_t i = 0; i < inner; ++i) sum += xp[i];
    const double mean = sum / double(inner);
    double sq = 0;
    for (int64_t i = 0; i < inner; ++i) {
      const double d = xp[i] - mean;
      sq += d * d;
    }
    const double inv_std = 1.0 / std::sqrt(sq / double(inner) + double(p.epsilon));
    // (x - mean) first: a * x + b with b = bias - mean * a cancels when the plane's spread is
    // small next to its mean.
    const float a = float(double(scale[c]) * inv_std), m = float(mean), b = bias[c];
    for (int64_t i = 0; i < inner; ++i) yp[i] = activate(p.activation, (xp[i] - m) * a + b);
  }
}

}  // namespace

void register_instance_norm(KernelRegistry& registry) {
  registry.add("cpu", {{.op = "instance_norm", .name = "direct", .priority = 10,
                        .run = instance_norm_run}});
}

}  // namespace infer::cpu
