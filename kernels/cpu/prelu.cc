// CPU PRelu, "direct", float32, either layout: y = x < 0 ? slope * x : x (a select, so NaN passes and
// the float product equals the reference's double one rounded once). NCHW: one slope per (n, c) plane,
// the plane a vectorisable loop; NHWC: per pixel, the C slopes read as a vector beside the C values.
// OpenMP over planes / pixels above kParallelMin elements; may run in place.
#include <algorithm>

#include "infer/kernel.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // below this, one thread (waking a team costs more)

void prelu_run(const KernelCall& call) {
  const Shape& s = call.node.input_shapes[0];
  const int64_t n = shape_numel(s), C = s[1];
  const bool per_channel = shape_numel(call.node.input_shapes[1]) != 1;
  const float* x = call.inputs[0];
  const float* slope = call.inputs[1];
  float* y = call.outputs[0];
  if (n == 0) return;
  if (!per_channel) {
    const float a = slope[0];
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? a * x[i] : x[i];
  } else if (call.node.layout == Layout::NHWC && s.size() == 4) {
    const int64_t pixels = n / C;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t p = 0; p < pixels; ++p) {
      const float* xp = x + p * C;
      float* yp = y + p * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) yp[c] = xp[c] < 0 ? slope[c] * xp[c] : xp[c];
    }
  } else {
    const int64_t planes = s[0] * C, inner = n / planes;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t p = 0; p < planes; ++p) {
      const float a = slope[p % C];
      const float* xp = x + p * inner;
      float* yp = y + p * inner;
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] < 0 ? a * xp[i] : xp[i];
    }
  }
}

}  // namespace

INFER_REGISTER_KERNELS(prelu) {
  registry.add("cpu", {
      {.op = "prelu", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .run = prelu_run},
  });
}

}  // namespace infer::cpu
