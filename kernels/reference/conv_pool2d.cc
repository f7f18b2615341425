// Reference fused convolution + average pooling, computed as its definition says: the convolution
// (without activation) into a double plane, then pool x pool averages at stride pool (floor: a partial
// last window is dropped, no padding), then the activation. No rounding to float between the steps.
#include <vector>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {
namespace {

// Output size of the convolution along one axis (0 when the kernel does not fit).
int64_t conv_out(int64_t in, int pad_a, int pad_b, int64_t k, int stride) {
  const int64_t span = in + pad_a + pad_b - k;
  return span < 0 ? 0 : span / stride + 1;
}

}  // namespace

void conv_pool2d(const ConvPool2DParams& p, const float* x, const Shape& x_shape, const float* w,
                 const Shape& w_shape, const float* bias, float* y, const Shape& y_shape) {
  using namespace detail;
  const Conv2DParams& c = p.conv;
  check_conv_params("conv_pool2d", c.stride_h, c.stride_w, c.pad, c.dilation_h, c.dilation_w);
  if (c.groups != 1) throw Error("conv_pool2d: groups other than 1 is not supported");
  if (p.pool <= 0) throw Error("conv_pool2d: pool must be > 0 (got " + std::to_string(p.pool) + ")");
  check_shape("conv_pool2d", "input", x_shape, 4);
  check_shape("conv_pool2d", "weight", w_shape, 4);
  check_shape("conv_pool2d", "output", y_shape, 4);
  check_equal("conv_pool2d", "weight input channels", w_shape[1], x_shape[1]);
  check_equal("conv_pool2d", "output batch", y_shape[0], x_shape[0]);
  check_equal("conv_pool2d", "output channels", y_shape[1], w_shape[0]);

  // the convolution's own output size; the pooled output must be its floor division by pool
  const int64_t HC = conv_out(x_shape[2], c.pad.top, c.pad.bottom, w_shape[2], c.stride_h);
  const int64_t WC = conv_out(x_shape[3], c.pad.left, c.pad.right, w_shape[3], c.stride_w);
  check_equal("conv_pool2d", "output height", y_shape[2], HC / p.pool);
  check_equal("conv_pool2d", "output width", y_shape[3], WC / p.pool);

  const int64_t N = x_shape[0], CO = w_shape[0], HO = y_shape[2], WO = y_shape[3];
  const double area = double(p.pool) * double(p.pool);
  std::vector<double> conv(static_cast<size_t>(HC * WC));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < CO; ++co) {
      conv2d_plane(c, x, x_shape, w, w_shape, bias, n, co, conv.data(), HC, WC);
      float* yp = y + (n * CO + co) * HO * WO;
      for (int64_t oy = 0; oy < HO; ++oy)
        for (int64_t ox = 0; ox < WO; ++ox) {
          double sum = 0;
          for (int64_t dy = 0; dy < p.pool; ++dy)
            for (int64_t dx = 0; dx < p.pool; ++dx)
              sum += conv[(oy * p.pool + dy) * WC + ox * p.pool + dx];
          yp[oy * WO + ox] = float(activate(c.activation, sum / area));
        }
    }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_conv_pool2d(const KernelCall& c) {  // x, weight, optional bias
  const auto& s = c.node.input_shapes;
  conv_pool2d(std::get<ConvPool2DParams>(c.node.params), c.inputs[0], s[0], c.inputs[1], s[1],
              detail::optional_input(c, 2), c.outputs[0], c.node.output_shapes[0]);
}

}  // namespace infer::ref
