// Reference element-wise activation (every ActivationKind of infer/ops.h, with its formula there; none
// copies), evaluated in double and rounded once. Element-wise per index, so it may run in place.
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void activation(const ActivationParams& p, const float* x, const Shape& shape, float* y) {
  detail::check_dims("activation", "input", shape);
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i) y[i] = float(detail::activate(p.activation, x[i]));
}

}  // namespace infer::ref
