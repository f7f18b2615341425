// Reference channel_shuffle and slice: plain index loops that copy elements (no arithmetic).
// channel_shuffle: output channel j*g + i of [N,C,H,W] is input channel i*(C/g) + j. slice: the
// tensor viewed as [outer, dim, inner] keeps rows start..end-1 of the middle axis. Not in place.
#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void channel_shuffle(const ChannelShuffleParams& p, const float* x, const Shape& shape, float* y) {
  using namespace detail;
  check_shape("channel_shuffle", "input", shape, 4);
  const int64_t N = shape[0], C = shape[1], HW = shape[2] * shape[3], g = p.groups;
  if (g < 1 || C % g != 0) throw Error("channel_shuffle: groups must divide the channels");
  const int64_t per = C / g;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < g; ++i)
      for (int64_t j = 0; j < per; ++j) {
        const float* src = x + (n * C + i * per + j) * HW;
        float* dst = y + (n * C + j * g + i) * HW;
        for (int64_t k = 0; k < HW; ++k) dst[k] = src[k];
      }
}

void slice(const SliceParams& p, const float* x, const Shape& x_shape, float* y, const Shape& y_shape) {
  using namespace detail;
  check_dims("slice", "input", x_shape);
  if (p.axis < 1 || p.axis >= static_cast<int>(x_shape.size()) || p.start < 0 || p.start >= p.end ||
      p.end > x_shape[static_cast<size_t>(p.axis)])
    throw Error("slice: axis, start or end out of range for " + shape_str(x_shape));
  check_equal("slice", "output axis size", y_shape[static_cast<size_t>(p.axis)], p.end - p.start);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < p.axis; ++d) outer *= x_shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(p.axis) + 1; d < x_shape.size(); ++d) inner *= x_shape[d];
  const int64_t dim = x_shape[static_cast<size_t>(p.axis)], len = p.end - p.start;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < len; ++r)
      for (int64_t k = 0; k < inner; ++k)
        y[(o * len + r) * inner + k] = x[(o * dim + p.start + r) * inner + k];
}


// The reference variants (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// functions above; registered from the op table by register.cc.
void run_channel_shuffle(const KernelCall& c) {
  channel_shuffle(std::get<ChannelShuffleParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
                  c.outputs[0]);
}

void run_slice(const KernelCall& c) {
  slice(std::get<SliceParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
        c.node.output_shapes[0]);
}

}  // namespace infer::ref
