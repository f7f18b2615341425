// Reference element-wise addition of two equally shaped tensors (no broadcasting), then the fused
// activation. Element-wise per index, so y may be either input.
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void add(const AddParams& p, const float* a, const float* b, const Shape& shape, float* y) {
  detail::check_dims("add", "input", shape);
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i)
    y[i] = float(detail::activate(p.activation, double(a[i]) + double(b[i])));
}

}  // namespace infer::ref
