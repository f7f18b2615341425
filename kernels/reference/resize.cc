// Reference resize (nearest / bilinear) over NCHW: every output pixel maps its row and column to
// source coordinates with kernels/resize_coords.h (in float, as PyTorch, so every backend picks the
// same pixels), then copies the nearest pixel or blends the four neighbours in double.
#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"
#include "kernels/resize_coords.h"

namespace infer::ref {

void resize(const ResizeParams& p, const float* x, const Shape& x_shape, float* y, const Shape& y_shape) {
  using namespace detail;
  check_shape("resize", "input", x_shape, 4);
  check_shape("resize", "output", y_shape, 4);
  check_equal("resize", "output batch", y_shape[0], x_shape[0]);
  check_equal("resize", "output channels", y_shape[1], x_shape[1]);
  const int64_t NC = x_shape[0] * x_shape[1], H = x_shape[2], W = x_shape[3];
  const int64_t HO = y_shape[2], WO = y_shape[3];
  const auto ay = resize::make_axis(H, HO, p.coord, p.scale_h);
  const auto ax = resize::make_axis(W, WO, p.coord, p.scale_w);
  for (int64_t c = 0; c < NC; ++c) {
    const float* xp = x + c * H * W;
    float* yp = y + c * HO * WO;
    for (int oy = 0; oy < HO; ++oy)
      for (int ox = 0; ox < WO; ++ox) {
        double v;
        if (p.mode == ResizeMode::Nearest) {
          v = xp[resize::nearest(ay, oy, p.nearest) * W + resize::nearest(ax, ox, p.nearest)];
        } else {
          const auto ty = resize::linear(ay, oy), tx = resize::linear(ax, ox);
          const double top = (1 - tx.w1) * double(xp[ty.i0 * W + tx.i0]) + tx.w1 * double(xp[ty.i0 * W + tx.i1]);
          const double bot = (1 - tx.w1) * double(xp[ty.i1 * W + tx.i0]) + tx.w1 * double(xp[ty.i1 * W + tx.i1]);
          v = (1 - ty.w1) * top + ty.w1 * bot;
        }
        yp[oy * WO + ox] = float(v);
      }
  }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_resize(const KernelCall& c) {
  resize(std::get<ResizeParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
         c.node.output_shapes[0]);
}

}  // namespace infer::ref
