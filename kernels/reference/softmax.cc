// Reference softmax and log_softmax along any axis, numerically stable: per line, subtract the maximum
// before exp and normalise by the double sum (log_softmax: x - max - log(sum), never the log of a
// rounded softmax). Reads a line's inputs before writing each of its outputs at the same index, so it
// may run in place.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

namespace {

template <bool Log>
void softmax_lines(const char* op, int p_axis, const float* x, const Shape& shape, float* y) {
  using namespace detail;
  check_dims(op, "input", shape);
  const int rank = static_cast<int>(shape.size());
  const int axis = p_axis < 0 ? p_axis + rank : p_axis;
  if (axis < 0 || axis >= rank)
    throw Error(std::string(op) + ": axis " + std::to_string(p_axis) + " is out of range for shape " +
                shape_str(shape));

  // the tensor as [outer, len, inner] with the softmax running along len
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int d = axis + 1; d < rank; ++d) inner *= shape[d];
  const int64_t len = shape[axis];

  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * len * inner + i;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < len; ++k) max = std::max(max, double(x[base + k * inner]));
      double sum = 0;
      for (int64_t k = 0; k < len; ++k) sum += std::exp(double(x[base + k * inner]) - max);
      if constexpr (Log) {
        const double log_sum = std::log(sum);
        for (int64_t k = 0; k < len; ++k)
          y[base + k * inner] = float((double(x[base + k * inner]) - max) - log_sum);
      } else {
        for (int64_t k = 0; k < len; ++k)
          y[base + k * inner] = float(std::exp(double(x[base + k * inner]) - max) / sum);
      }
    }
}

}  // namespace

void softmax(const SoftmaxParams& p, const float* x, const Shape& shape, float* y) {
  softmax_lines<false>("softmax", p.axis, x, shape, y);
}


// The reference variants (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// functions above; registered from the op table by register.cc.
void run_softmax(const KernelCall& c) {
  softmax(std::get<SoftmaxParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0]);
}

void run_log_softmax(const KernelCall& c) {
  softmax_lines<true>("log_softmax", std::get<LogSoftmaxParams>(c.node.params).axis, c.inputs[0],
                      c.node.input_shapes[0], c.outputs[0]);
}

}  // namespace infer::ref
