// Reference squeeze-excitation (the engine-internal squeeze_excite node of the fuse_squeeze_excite
// pass): per sample, the channel means of x, the two 1x1 convolutions with their activations, then
// every element of x times its channel's gate, all in double. The oracle for the fast kernels.
#include <vector>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void squeeze_excite(const SqueezeExciteParams& p, const float* x, const Shape& x_shape, const float* w1,
                    const float* b1, const float* w2, const float* b2, int64_t reduced, float* y) {
  detail::check_shape("squeeze_excite", "input", x_shape, 4);
  const int64_t N = x_shape[0], C = x_shape[1], HW = x_shape[2] * x_shape[3];
  std::vector<double> mean(static_cast<size_t>(C)), hidden(static_cast<size_t>(reduced));
  for (int64_t n = 0; n < N; ++n) {
    const float* xn = x + n * C * HW;
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t i = 0; i < HW; ++i) s += xn[c * HW + i];
      mean[static_cast<size_t>(c)] = HW ? s / double(HW) : 0.0;
    }
    for (int64_t r = 0; r < reduced; ++r) {
      double s = b1[r];
      for (int64_t c = 0; c < C; ++c) s += double(w1[r * C + c]) * mean[static_cast<size_t>(c)];
      hidden[static_cast<size_t>(r)] = detail::activate(p.hidden_activation, s);
    }
    for (int64_t c = 0; c < C; ++c) {
      double s = b2[c];
      for (int64_t r = 0; r < reduced; ++r) s += double(w2[c * reduced + r]) * hidden[static_cast<size_t>(r)];
      const double gate = detail::activate(p.gate_activation, s);
      for (int64_t i = 0; i < HW; ++i)
        y[(n * C + c) * HW + i] = float(detail::activate(p.activation, double(xn[c * HW + i]) * gate));
    }
  }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_squeeze_excite(const KernelCall& c) {  // x, w1, b1, w2, b2
  squeeze_excite(std::get<SqueezeExciteParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.inputs[1],
                 c.inputs[2], c.inputs[3], c.inputs[4], c.node.input_shapes[1][0], c.outputs[0]);
}

}  // namespace infer::ref
