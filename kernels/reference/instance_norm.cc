// Reference instance normalisation over [N,C,...] (rank >= 3): per (n, c) plane, mean and the biased
// variance in double (two passes), then y = scale[c] * (x - mean) / sqrt(var + epsilon) + bias[c] and
// the fused activation, rounded once. Each plane is read completely before it is written: y may be x.
#include <cmath>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void instance_norm(const InstanceNormParams& p, const float* x, const Shape& shape,
                   const float* scale, const float* bias, float* y) {
  using namespace detail;
  if (shape.size() < 3)
    throw Error("instance_norm: input has shape " + shape_str(shape) + ", expected rank >= 3");
  check_dims("instance_norm", "input", shape);
  const int64_t N = shape[0], C = shape[1];
  int64_t inner = 1;
  for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t base = (n * C + c) * inner;
      double sum = 0;
      for (int64_t i = 0; i < inner; ++i) sum += x[base + i];
      const double mean = inner ? sum / double(inner) : 0.0;
      double sq = 0;
      for (int64_t i = 0; i < inner; ++i) sq += (x[base + i] - mean) * (x[base + i] - mean);
      const double var = inner ? sq / double(inner) : 0.0;
      const double a = double(scale[c]) / std::sqrt(var + double(p.epsilon));
      for (int64_t i = 0; i < inner; ++i)
        y[base + i] = float(activate(p.activation, (double(x[base + i]) - mean) * a + double(bias[c])));
    }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_instance_norm(const KernelCall& c) {  // x, scale, bias
  instance_norm(std::get<InstanceNormParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.inputs[1],
                c.inputs[2], c.outputs[0]);
}

}  // namespace infer::ref
