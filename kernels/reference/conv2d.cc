// Reference 2-D convolution (NCHW, weight [C_out,C_in/groups,KH,KW], any groups and dilation): for each
// output plane, a double accumulator plane gets bias + sum over (c_in of its group, ky, kx) of w * the
// shifted input rows (tap ky reads input row oy*stride - pad_top + ky*dilation). Each output is
// an exact double sum of its terms; the plane order keeps rows contiguous so whole models stay fast.
#include <algorithm>
#include <vector>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {
namespace detail {

void check_conv_params(const char* op, int stride_h, int stride_w, const Padding2D& pad,
                       int dilation_h, int dilation_w) {
  if (dilation_h != 1 || dilation_w != 1)
    throw Error(std::string(op) + ": dilation other than 1 is not supported");
  if (stride_h <= 0 || stride_w <= 0)
    throw Error(std::string(op) + ": stride must be > 0 (got " + std::to_string(stride_h) + "x" +
                std::to_string(stride_w) + ")");
  if (pad.top < 0 || pad.left < 0 || pad.bottom < 0 || pad.right < 0)
    throw Error(std::string(op) + ": padding must be >= 0");
}

void conv2d_plane(const Conv2DParams& p, const float* x, const Shape& x_shape, const float* w,
                  const Shape& w_shape, const float* bias, int64_t n, int64_t co, double* acc,
                  int64_t h_out, int64_t w_out) {
  const int64_t C = x_shape[1], H = x_shape[2], W = x_shape[3];
  const int64_t CG = w_shape[1], KH = w_shape[2], KW = w_shape[3];  // CG input channels per group
  const int64_t CO = p.groups > 0 ? w_shape[0] / p.groups : w_shape[0];  // output channels per group
  const int64_t c0 = (co / CO) * CG;  // first input channel of co's group
  const int64_t dh = p.dilation_h, dw = p.dilation_w;
  // For each kernel row ky, the output rows oy whose input row iy = oy*stride - pad_top + ky lies
  // inside the image; likewise per kernel column. The same for every input channel.
  std::vector<Range> rows(static_cast<size_t>(KH)), cols(static_cast<size_t>(KW));
  for (int64_t ky = 0; ky < KH; ++ky)
    rows[ky] = valid_range(h_out, p.stride_h, ky * dh - p.pad.top, H);
  for (int64_t kx = 0; kx < KW; ++kx)
    cols[kx] = valid_range(w_out, p.stride_w, kx * dw - p.pad.left, W);

  std::fill(acc, acc + h_out * w_out, bias ? double(bias[co]) : 0.0);
  for (int64_t ci = 0; ci < CG; ++ci) {
    const float* xp = x + (n * C + c0 + ci) * H * W;
    const float* wp = w + (co * CG + ci) * KH * KW;
    for (int64_t ky = 0; ky < KH; ++ky)
      for (int64_t kx = 0; kx < KW; ++kx) {
        const double wv = wp[ky * KW + kx];
        for (int64_t oy = rows[ky].lo; oy < rows[ky].hi; ++oy) {
          const float* xrow = xp + (oy * p.stride_h - p.pad.top + ky * dh) * W;
          double* arow = acc + oy * w_out;
          for (int64_t ox = cols[kx].lo; ox < cols[kx].hi; ++ox)
            arow[ox] += wv * double(xrow[ox * p.stride_w - p.pad.left + kx * dw]);
        }
      }
  }
}

}  // namespace detail

void conv2d(const Conv2DParams& p, const float* x, const Shape& x_shape, const float* w,
            const Shape& w_shape, const float* bias, float* y, const Shape& y_shape,
            const float* residual, const float* slope) {
  using namespace detail;
  check_conv_params("conv2d", p.stride_h, p.stride_w, p.pad, 1, 1);
  if (p.dilation_h <= 0 || p.dilation_w <= 0 || p.groups <= 0)
    throw Error("conv2d: dilation and groups must be > 0");
  check_shape("conv2d", "input", x_shape, 4);
  check_shape("conv2d", "weight", w_shape, 4);
  check_shape("conv2d", "output", y_shape, 4);
  if (w_shape[0] % p.groups != 0) throw Error("conv2d: groups must divide the output channels");
  check_equal("conv2d", "weight input channels times groups", w_shape[1] * p.groups, x_shape[1]);
  check_equal("conv2d", "output batch", y_shape[0], x_shape[0]);
  check_equal("conv2d", "output channels", y_shape[1], w_shape[0]);

  const int64_t N = x_shape[0], CO = w_shape[0], HO = y_shape[2], WO = y_shape[3];
  std::vector<double> acc(static_cast<size_t>(HO * WO));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < CO; ++co) {
      const Activation act = channel_act(p.activation, slope, co);
      conv2d_plane(p, x, x_shape, w, w_shape, bias, n, co, acc.data(), HO, WO);
      float* yp = y + (n * CO + co) * HO * WO;
      if (residual) {  // added in double before the activation, like the fused kernels
        const float* rp = residual + (n * CO + co) * HO * WO;
        for (int64_t i = 0; i < HO * WO; ++i) acc[i] += double(rp[i]);
      }
      for (int64_t i = 0; i < HO * WO; ++i) yp[i] = float(activate(act, acc[i]));
    }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
// conv2d: x, weight, optional bias; with add_residual (the fuse_conv_residual pass) always x, weight,
// bias and the residual of the output's shape; with a prelu epilogue (fuse_prelu) x, weight, bias and
// the slope; with an input epilogue (fuse_input_epilogue) x, weight, bias and b_in [C_in], the input
// read as input_activation(x + b_in[c]), computed here into a copy first (shape inference checks
// every form).
void run_conv2d(const KernelCall& c) {
  const auto& p = std::get<Conv2DParams>(c.node.params);
  const auto& s = c.node.input_shapes;
  const float* x = c.inputs[0];
  std::vector<float> xe;
  if (p.input_epilogue) {
    const int64_t N = s[0][0], C = s[0][1], plane = s[0][2] * s[0][3];
    xe.resize(static_cast<size_t>(N * C * plane));
    for (int64_t i = 0; i < N * C; ++i)
      for (int64_t k = 0; k < plane; ++k)
        xe[static_cast<size_t>(i * plane + k)] =
            float(detail::activate(p.input_activation, double(x[i * plane + k]) + double(c.inputs[3][i % C])));
    x = xe.data();
  }
  conv2d(p, x, s[0], c.inputs[1], s[1], detail::optional_input(c, 2), c.outputs[0],
         c.node.output_shapes[0], p.add_residual ? c.inputs[3] : nullptr, prelu_slope(c));
}

}  // namespace infer::ref
