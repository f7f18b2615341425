// Reference concatenation of any number of inputs along any axis. Viewing each tensor as
// [outer, dim(axis) * inner], the output is, per outer index, the inputs' blocks one after another.
// Shapes are checked against the output first so no copy can leave a buffer.
#include <algorithm>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void concat(const ConcatParams& p, const std::vector<const float*>& xs,
            const std::vector<Shape>& x_shapes, float* y, const Shape& y_shape) {
  using namespace detail;
  if (xs.empty() || xs.size() != x_shapes.size())
    throw Error("concat: expected one shape per input and at least one input (got " +
                std::to_string(xs.size()) + " inputs, " + std::to_string(x_shapes.size()) + " shapes)");
  check_dims("concat", "output", y_shape);
  const int rank = static_cast<int>(y_shape.size());
  const int axis = p.axis < 0 ? p.axis + rank : p.axis;
  if (axis < 0 || axis >= rank)
    throw Error("concat: axis " + std::to_string(p.axis) + " is out of range for shape " +
                shape_str(y_shape));

  int64_t axis_total = 0;
  for (size_t k = 0; k < x_shapes.size(); ++k) {
    const Shape& s = x_shapes[k];
    const std::string what = "input " + std::to_string(k);
    check_shape("concat", what.c_str(), s, y_shape.size());
    for (int d = 0; d < rank; ++d)
      if (d != axis && s[d] != y_shape[d])
        throw Error("concat: " + what + " has shape " + shape_str(s) + ", incompatible with output " +
                    shape_str(y_shape) + " along axis " + std::to_string(axis));
    axis_total += s[axis];
  }
  check_equal("concat", "output size along the axis", y_shape[axis], axis_total);

  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= y_shape[d];
  for (int d = axis + 1; d < rank; ++d) inner *= y_shape[d];

  float* out = y;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < xs.size(); ++k) {
      const int64_t block = x_shapes[k][axis] * inner;
      const float* src = xs[k] + o * block;
      out = std::copy(src, src + block, out);
    }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_concat(const KernelCall& c) {
  concat(std::get<ConcatParams>(c.node.params), c.inputs, c.node.input_shapes, c.outputs[0],
         c.node.output_shapes[0]);
}

}  // namespace infer::ref
