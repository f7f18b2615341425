// Reference element-wise addition of two equally shaped tensors (no broadcasting), then the fused
// activation; an input with input_qdq on goes through quantize_linear -> dequantize_linear first.
// Element-wise per index, so y may be either input.
#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

// An input read through its QDQ pair (AddParams::input_qdq): quantize_linear then dequantize_linear,
// the reference kernels' arithmetic (float(q - zero point) * scale).
float through_qdq(const AddInputQDQ& q, float x) {
  if (!q.on) return x;
  const float z = float(q.zero_point);
  return static_cast<float>(double(detail::quantize_value(x, q.scale, z, q.dtype)) - double(z)) * q.scale;
}

void add(const AddParams& p, const float* a, const float* b, const Shape& shape, float* y) {
  detail::check_dims("add", "input", shape);
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i)
    y[i] = float(detail::activate(p.activation, double(through_qdq(p.input_qdq[0], a[i])) +
                                                    double(through_qdq(p.input_qdq[1], b[i]))));
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_add(const KernelCall& c) {
  add(std::get<AddParams>(c.node.params), c.inputs[0], c.inputs[1], c.node.input_shapes[0], c.outputs[0]);
}

}  // namespace infer::ref
