// Reference max / average pooling over NCHW with stride and asymmetric padding. A window is clipped to
// the image for reading; padded cells never win a max. Average divides by the window clipped to the
// padded image (count_include_pad, as PyTorch/ONNX) or by the number of real cells read.
// ceil_mode needs nothing here: its extra last window is clipped the same way (shape inference sizes it).
#include <algorithm>
#include <limits>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void pool2d(const Pool2DParams& p, const float* x, const Shape& x_shape, float* y,
            const Shape& y_shape) {
  using namespace detail;
  if (p.kernel_h <= 0 || p.kernel_w <= 0 || p.stride_h <= 0 || p.stride_w <= 0)
    throw Error("pool2d: kernel and stride must be > 0");
  if (p.pad.top < 0 || p.pad.left < 0 || p.pad.bottom < 0 || p.pad.right < 0)
    throw Error("pool2d: padding must be >= 0");
  check_shape("pool2d", "input", x_shape, 4);
  check_shape("pool2d", "output", y_shape, 4);
  check_equal("pool2d", "output batch", y_shape[0], x_shape[0]);
  check_equal("pool2d", "output channels", y_shape[1], x_shape[1]);

  const int64_t NC = x_shape[0] * x_shape[1], H = x_shape[2], W = x_shape[3];
  const int64_t HO = y_shape[2], WO = y_shape[3];
  for (int64_t c = 0; c < NC; ++c) {
    const float* xp = x + c * H * W;
    float* yp = y + c * HO * WO;
    for (int64_t oy = 0; oy < HO; ++oy)
      for (int64_t ox = 0; ox < WO; ++ox) {
        // window [y0, y0+KH) x [x0, x0+KW) in image coordinates; padding is outside [0,H) x [0,W)
        const int64_t y0 = oy * p.stride_h - p.pad.top, x0 = ox * p.stride_w - p.pad.left;
        const int64_t y_begin = std::max<int64_t>(y0, 0), y_end = std::min<int64_t>(y0 + p.kernel_h, H);
        const int64_t x_begin = std::max<int64_t>(x0, 0), x_end = std::min<int64_t>(x0 + p.kernel_w, W);

        double max = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t cells = 0;
        for (int64_t iy = y_begin; iy < y_end; ++iy)
          for (int64_t ix = x_begin; ix < x_end; ++ix) {
            const double v = xp[iy * W + ix];
            max = std::max(max, v);
            sum += v;
            ++cells;
          }

        double out;
        if (cells == 0) {
          out = 0;  // a window entirely in the padding: impossible when padding < kernel
        } else if (p.kind == PoolKind::Max) {
          out = max;
        } else {
          int64_t divisor = cells;
          if (p.count_include_pad) {
            const int64_t py = std::min<int64_t>(y0 + p.kernel_h, H + p.pad.bottom) - y0;
            const int64_t px = std::min<int64_t>(x0 + p.kernel_w, W + p.pad.right) - x0;
            divisor = py * px;
          }
          out = sum / double(divisor);
        }
        yp[oy * WO + ox] = float(out);
      }
  }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_pool2d(const KernelCall& c) {
  pool2d(std::get<Pool2DParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
         c.node.output_shapes[0]);
}

}  // namespace infer::ref
