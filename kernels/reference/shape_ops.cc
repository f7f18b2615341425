// Reference flatten and reshape: both only relabel the shape of a contiguous tensor, so both copy the
// element sequence unchanged (memmove: the executor may hand the same buffer as input and output).
// The element counts must agree; the target shape itself is the shape inference's business.
#include <cstring>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {
namespace {

void copy_relabelled(const char* op, const float* x, const Shape& x_shape, float* y,
                     const Shape& y_shape) {
  detail::check_dims(op, "input", x_shape);
  detail::check_dims(op, "output", y_shape);
  detail::check_equal(op, "output element count", shape_numel(y_shape), shape_numel(x_shape));
  const int64_t n = shape_numel(x_shape);
  if (n > 0 && x != y) std::memmove(y, x, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

void flatten(const FlattenParams&, const float* x, const Shape& x_shape, float* y,
             const Shape& y_shape) {
  copy_relabelled("flatten", x, x_shape, y, y_shape);
}

void reshape(const ReshapeParams&, const float* x, const Shape& x_shape, float* y,
             const Shape& y_shape) {
  copy_relabelled("reshape", x, x_shape, y, y_shape);
}


// The reference variants (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// functions above; registered from the op table by register.cc.
void run_flatten(const KernelCall& c) {
  flatten(std::get<FlattenParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
          c.node.output_shapes[0]);
}

void run_reshape(const KernelCall& c) {
  reshape(std::get<ReshapeParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
          c.node.output_shapes[0]);
}

}  // namespace infer::ref
