// Reference 2-D padding of [N,C,H,W]: every output element (n, c, oy, ox) reads input row
// oy - top and column ox - left, mapped back into the image by the mode (constant: outside reads the
// fill value; reflect: mirror about the border element, i -> -i and H-1+k -> H-1-k; edge: clamp).
// Not in place (y != x): the output is larger.
#include <algorithm>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

int64_t pad_source_index(PadMode mode, int64_t i, int64_t size) {
  if (i >= 0 && i < size) return i;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Reflect: {
      if (size == 1) return 0;
      const int64_t period = 2 * (size - 1);  // pads < size, but any i maps into range this way
      int64_t m = i % period;
      if (m < 0) m += period;
      return m < size ? m : period - m;
    }
    case PadMode::Edge: return std::clamp<int64_t>(i, 0, size - 1);
  }
  return -1;
}

void pad2d(const Pad2DParams& p, const float* x, const Shape& x_shape, float* y, const Shape& y_shape) {
  using namespace detail;
  check_shape("pad2d", "input", x_shape, 4);
  check_shape("pad2d", "output", y_shape, 4);
  const int64_t N = x_shape[0], C = x_shape[1], H = x_shape[2], W = x_shape[3];
  const int64_t HO = y_shape[2], WO = y_shape[3];
  check_equal("pad2d", "output height", HO, H + p.pad.top + p.pad.bottom);
  check_equal("pad2d", "output width", WO, W + p.pad.left + p.pad.right);
  check_equal("pad2d", "output batch", y_shape[0], N);
  check_equal("pad2d", "output channels", y_shape[1], C);
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oy = 0; oy < HO; ++oy) {
      const int64_t iy = pad_source_index(p.mode, oy - p.pad.top, H);
      for (int64_t ox = 0; ox < WO; ++ox) {
        const int64_t ix = pad_source_index(p.mode, ox - p.pad.left, W);
        y[(nc * HO + oy) * WO + ox] = iy < 0 || ix < 0 ? p.value : x[(nc * H + iy) * W + ix];
      }
    }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_pad2d(const KernelCall& c) {
  pad2d(std::get<Pad2DParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
        c.node.output_shapes[0]);
}

}  // namespace infer::ref
