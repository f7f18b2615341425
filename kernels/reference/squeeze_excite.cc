// Reference squeeze-excitation (the engine-internal squeeze_excite node of the fuse_squeeze_excite
// pass): per sample, the channel means of x, the two 1x1 convolutions with their activations, then
// every element of x times its channel's gate, all in double. The oracle for the fast kernels.
#include <vector>

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

}  // namespace infer::ref
