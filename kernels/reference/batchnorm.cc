// Reference inference batch norm over axis 1 of any rank >= 2 tensor:
// y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c], in double, then the fused
// activation. Element-wise per index, so it may run in place.
#include <cmath>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void batchnorm(const BatchNormParams& p, const float* x, const Shape& shape, const float* scale,
               const float* bias, const float* mean, const float* var, float* y) {
  using namespace detail;
  if (shape.size() < 2)
    throw Error("batchnorm: input has shape " + shape_str(shape) + ", expected rank >= 2");
  check_dims("batchnorm", "input", shape);
  const int64_t N = shape[0], C = shape[1];
  int64_t inner = 1;  // product of the dims after the channel axis
  for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double inv_std = 1.0 / std::sqrt(double(var[c]) + double(p.epsilon));
      const double m = mean[c], s = scale[c], b = bias[c];
      const int64_t base = (n * C + c) * inner;
      for (int64_t i = 0; i < inner; ++i)
        y[base + i] = float(activate(p.activation, (double(x[base + i]) - m) * inv_std * s + b));
    }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_batchnorm(const KernelCall& c) {  // x, scale, bias, mean, var
  batchnorm(std::get<BatchNormParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.inputs[1],
            c.inputs[2], c.inputs[3], c.inputs[4], c.outputs[0]);
}

}  // namespace infer::ref
