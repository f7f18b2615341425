// Reference PRelu over x [N,C,...] in NCHW order: y = x < 0 ? slope * x : x in double (LeakyRelu's
// formula in common.h, so a NaN passes through and a PRelu folded into a LeakyRelu epilogue computes
// the same), slope[c] for a [C] slope or slope[0] for a [1] one. May run in place.
#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"

namespace infer::ref {

// The reference variant (ref::run_<op>, engine/ops/op_def.h); registered from the op table by register.cc.
void run_prelu(const KernelCall& c) {
  using namespace detail;
  const Shape& s = c.node.input_shapes[0];
  check_dims("prelu", "input", s);
  if (s.size() < 2) throw Error("prelu: input shape " + shape_str(s) + " has rank below 2");
  const int64_t N = s[0], C = s[1], inner = shape_numel(s) / std::max<int64_t>(N * C, 1);
  const bool per_channel = shape_numel(c.node.input_shapes[1]) != 1;
  const float* x = c.inputs[0];
  const float* slope = c.inputs[1];
  float* y = c.outputs[0];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) {
      const double a = slope[per_channel ? ch : 0];
      const int64_t base = (n * C + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const double v = x[base + i];
        y[base + i] = float(v < 0 ? a * v : v);
      }
    }
}

}  // namespace infer::ref
