// Reference fully connected layer: y[n][o] = bias[o] + sum_i x[n][i] * w[o][i] (weight [F_out,F_in],
// PyTorch's layout), each dot product accumulated in double, then the fused activation.
#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void dense(const DenseParams& p, const float* x, const Shape& x_shape, const float* w,
           const Shape& w_shape, const float* bias, float* y, const Shape& y_shape,
           const float* slope) {
  using namespace detail;
  check_shape("dense", "input", x_shape, 2);
  check_shape("dense", "weight", w_shape, 2);
  check_shape("dense", "output", y_shape, 2);
  check_equal("dense", "weight input features", w_shape[1], x_shape[1]);
  check_equal("dense", "output batch", y_shape[0], x_shape[0]);
  check_equal("dense", "output features", y_shape[1], w_shape[0]);

  const int64_t N = x_shape[0], FI = x_shape[1], FO = w_shape[0];
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * FI;
    for (int64_t o = 0; o < FO; ++o) {
      const float* wr = w + o * FI;
      double acc = bias ? double(bias[o]) : 0.0;
      for (int64_t i = 0; i < FI; ++i) acc += double(xr[i]) * double(wr[i]);
      y[n * FO + o] = float(activate(channel_act(p.activation, slope, o), acc));
    }
  }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_dense(const KernelCall& c) {  // x, weight, optional bias (, slope with a prelu)
  const auto& s = c.node.input_shapes;
  dense(std::get<DenseParams>(c.node.params), c.inputs[0], s[0], c.inputs[1], s[1], detail::optional_input(c, 2),
        c.outputs[0], c.node.output_shapes[0], prelu_slope(c));
}

}  // namespace infer::ref
