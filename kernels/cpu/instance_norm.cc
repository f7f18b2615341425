// CPU instance_norm "direct": one OpenMP iteration per (n, c) plane of [N,C,...]. Two passes (the mean,
// then the sum of squared deviations: the biased variance without cancellation), each summed in
// float vectors over blocks of kBlock elements (omp simd: the compiler keeps several vector
// accumulators; the mean's sum shifted by the plane's first value) whose block sums add up in double,
// so a 256x256 plane keeps the reference's accuracy at vector speed (the serial double loops ran at about 1 GFLOP/s); then y = act((x - mean) * a + bias)
// with a = scale / sqrt(var + eps), in float. Loops compiled per ISA level (isa.h). A plane is read
// completely before it is written, so it may run in place. float32, NCHW.
#include <algorithm>
#include <cmath>

#include "infer/kernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;
constexpr int64_t kBlock = 2048;  // floats summed in float before the sum joins the double total

template <class>
INFER_INLINE void plane_body(const float* xp, float* yp, int64_t inner, float scale, float bias, float epsilon,
                             const Activation& act) {
  // shifted by the plane's first value: the float sums then see the spread, not the mean (a plane of
  // values near 100 with a spread of 3 lost 1e-5 of the output's accuracy unshifted)
  const float pivot = xp[0];
  double sum = 0;
  for (int64_t i0 = 0; i0 < inner; i0 += kBlock) {
    const int64_t i1 = std::min(inner, i0 + kBlock);
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; ++i) s += xp[i] - pivot;
    sum += s;
  }
  const double mean = double(pivot) + sum / double(inner);
  const float mf = float(mean);
  double sq = 0;
  for (int64_t i0 = 0; i0 < inner; i0 += kBlock) {
    const int64_t i1 = std::min(inner, i0 + kBlock);
    float s = 0.f;
    // (x - float(mean)): the float mean's rounding (relative 6e-8 of the mean) changes the sum of
    // squares by inner * (mean - mf)^2, far below float resolution of the result
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; ++i) {
      const float d = xp[i] - mf;
      s += d * d;
    }
    sq += s;
  }
  const double inv_std = 1.0 / std::sqrt(sq / double(inner) + double(epsilon));
  // (x - mean) first: a * x + b with b = bias - mean * a cancels when the plane's spread is
  // small next to its mean.
  const float a = float(double(scale) * inv_std);
  if (act.kind == ActivationKind::Relu) {
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i) {
      const float v = (xp[i] - mf) * a + bias;
      yp[i] = v < 0.f ? 0.f : v;
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - mf) * a + bias;
    if (act.kind != ActivationKind::None)
      for (int64_t i = 0; i < inner; ++i) yp[i] = activate(act, yp[i]);
  }
}
INFER_PER_ISA(void, plane, plane_body,
              (const float* xp, float* yp, int64_t inner, float scale, float bias, float epsilon,
               const Activation& act),
              (xp, yp, inner, scale, bias, epsilon, act))

void instance_norm_run(const KernelCall& call) {
  const auto& p = std::get<InstanceNormParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  const int64_t C = s[1], planes = s[0] * C;
  const int64_t inner = planes ? shape_numel(s) / planes : 0;
  const float *x = call.inputs[0], *scale = call.inputs[1], *bias = call.inputs[2];
  float* y = call.outputs[0];
  if (inner == 0) return;
  const auto plane = plane_for(call.node.isa);
#pragma omp parallel for schedule(static) if (planes * inner >= kParallelMin)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const int64_t c = nc % C;
    plane(x + nc * inner, y + nc * inner, inner, scale[c], bias[c], p.epsilon, p.activation);
  }
}

}  // namespace

INFER_REGISTER_KERNELS(instance_norm) {
  registry.add("cpu", {{.op = "instance_norm", .name = "direct", .priority = 10,
                        .isa = KernelVariant::Isa::PerIsa, .run = instance_norm_run}});
}

}  // namespace infer::cpu
