// Reference element-wise activation (every ActivationKind of infer/ops.h, with its formula there; none
// copies), evaluated in double and rounded once. Element-wise per index, so it may run in place.
#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void activation(const ActivationParams& p, const float* x, const Shape& shape, float* y) {
  detail::check_dims("activation", "input", shape);
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i) y[i] = float(detail::activate(p.activation, x[i]));
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_activation(const KernelCall& c) {
  activation(std::get<ActivationParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0]);
}

}  // namespace infer::ref
