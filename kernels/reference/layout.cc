// Reference layout conversion: copies a 4-D tensor [N,C,H,W] between NCHW and NHWC memory order (the
// engine-internal `layout` node of the channels_last pass). Same values, other order; the CUDA
// conversion kernels are checked against it. Never in place (the planner gives distinct buffers).
#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void layout(const LayoutParams& p, const float* x, const Shape& shape, float* y) {
  detail::check_dims("layout", "input", shape);
  detail::check_equal("layout", "rank", int64_t(shape.size()), int64_t(4));
  const int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const int64_t nchw = ((n * C + c) * H + h) * W + w;
          const int64_t nhwc = ((n * H + h) * W + w) * C + c;
          const int64_t in = p.from == Layout::NHWC ? nhwc : nchw;
          const int64_t out = p.to == Layout::NHWC ? nhwc : nchw;
          y[out] = x[in];
        }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_layout(const KernelCall& c) {
  layout(std::get<LayoutParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0]);
}

}  // namespace infer::ref
