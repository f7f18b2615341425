// infer::Tensor: a dense float32 host tensor (shape + contiguous row-major data), the type of session
// inputs and outputs. Deliberately plain: apps fill `data` and read it back. TensorView / TensorSpan:
// the same over memory the caller owns (Session::run_into), so a server reuses its buffers.
#pragma once

#include <vector>

#include "infer/ops.h"

namespace infer {

struct Tensor {
  Shape shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(Shape s) : shape(std::move(s)), data(static_cast<size_t>(shape_numel(shape))) {}
  Tensor(Shape s, std::vector<float> d) : shape(std::move(s)), data(std::move(d)) {}

  int64_t numel() const { return shape_numel(shape); }
};

// A dense float32 host tensor someone else owns: shape_numel(shape) floats at `data`, row-major.
struct TensorView {
  Shape shape;
  const float* data = nullptr;
};
// The writable form (outputs written in place).
struct TensorSpan {
  Shape shape;
  float* data = nullptr;
};

}  // namespace infer
