// Reference element-wise addition of two equally shaped tensors (no broadcasting), then the fused
// activation. Element-wise per index, so y may be either input.
#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void add(const AddParams& p, const float* a, const float* b, const Shape& shape, float* y) {
  detail::check_dims("add", "input", shape);
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i)
    y[i] = float(detail::activate(p.activation, double(a[i]) + double(b[i])));
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_add(const KernelCall& c) {
  add(std::get<AddParams>(c.node.params), c.inputs[0], c.inputs[1], c.node.input_shapes[0], c.outputs[0]);
}

}  // namespace infer::ref
