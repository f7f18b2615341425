// Reference element-wise binary ops (add, sub, mul, div) with NumPy broadcasting, then the fused
// activation: for every output index (row-major NCHW), each input is read at the same index with its
// broadcast (size-1 or missing leading) dims pinned to 0. Arithmetic in double, rounded once.
#include <vector>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

double binary_apply(BinaryKind kind, double a, double b) {
  switch (kind) {
    case BinaryKind::Add: return a + b;
    case BinaryKind::Sub: return a - b;
    case BinaryKind::Mul: return a * b;
    case BinaryKind::Div: return a / b;
  }
  return a + b;
}

void binary(const BinaryParams& p, const float* a, const Shape& a_shape, const float* b,
            const Shape& b_shape, float* y, const Shape& y_shape) {
  detail::check_dims("binary", "input 0", a_shape);
  detail::check_dims("binary", "input 1", b_shape);
  detail::check_dims("binary", "output", y_shape);
  const size_t rank = y_shape.size();
  // Each input's row-major strides over the output's dims (0 where it broadcasts or is missing).
  auto strides = [&](const Shape& s, const char* what) {
    if (s.size() > rank)
      throw Error(std::string("binary: ") + what + " " + shape_str(s) + " has more dims than the output " +
                  shape_str(y_shape));
    std::vector<int64_t> st(rank, 0);
    int64_t step = 1;
    for (size_t k = s.size(); k-- > 0;) {
      const size_t d = rank - s.size() + k;
      if (s[k] != 1 && s[k] != y_shape[d])
        throw Error(std::string("binary: ") + what + " " + shape_str(s) + " does not broadcast to " +
                    shape_str(y_shape));
      st[d] = s[k] == 1 ? 0 : step;
      step *= s[k];
    }
    return st;
  };
  const std::vector<int64_t> sa = strides(a_shape, "input 0"), sb = strides(b_shape, "input 1");
  const int64_t n = shape_numel(y_shape);
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < rank; ++d) {
      ia += index[d] * sa[d];
      ib += index[d] * sb[d];
    }
    y[i] = float(detail::activate(p.activation, binary_apply(p.kind, double(a[ia]), double(b[ib]))));
    for (size_t d = rank; d-- > 0;) {  // next row-major index
      if (++index[d] < y_shape[d]) break;
      index[d] = 0;
    }
  }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_binary(const KernelCall& c) {
  const auto& s = c.node.input_shapes;
  binary(std::get<BinaryParams>(c.node.params), c.inputs[0], s[0], c.inputs[1], s[1], c.outputs[0],
         c.node.output_shapes[0]);
}

}  // namespace infer::ref
