// Reference transposed 2-D convolution (weight [C_in,C_out/groups,KH,KW]) in scatter form, the
// definition: every input pixel x[ci][iy][ix] adds x * w[ci][c][ky][kx] to output channel
// co = (ci / (C_in/groups)) * (C_out/groups) + c at (iy*s_h - pad_top + ky*d_h, ix*s_w - pad_left +
// kx*d_w) when that lies inside the output; cells no input reaches hold the bias. Sums are double,
// channels-last, with the weights copied to [KH][KW][C_in][C_out/groups] so the innermost loop runs
// contiguously over the group's output channels (fast enough for whole GAN generators).
#include <algorithm>
#include <vector>

#include "engine/ops/op_def.h"
#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void conv_transpose2d(const ConvTranspose2DParams& p, const float* x, const Shape& x_shape,
                      const float* w, const Shape& w_shape, const float* bias, float* y,
                      const Shape& y_shape, const float* slope) {
  using namespace detail;
  check_conv_params("conv_transpose2d", p.stride_h, p.stride_w, p.pad, 1, 1);
  if (p.dilation_h <= 0 || p.dilation_w <= 0 || p.groups <= 0)
    throw Error("conv_transpose2d: dilation and groups must be > 0");
  check_shape("conv_transpose2d", "input", x_shape, 4);
  check_shape("conv_transpose2d", "weight", w_shape, 4);
  check_shape("conv_transpose2d", "output", y_shape, 4);
  check_equal("conv_transpose2d", "weight input channels", w_shape[0], x_shape[1]);
  if (x_shape[1] % p.groups != 0) throw Error("conv_transpose2d: groups must divide the input channels");
  check_equal("conv_transpose2d", "output batch", y_shape[0], x_shape[0]);
  check_equal("conv_transpose2d", "output channels", y_shape[1], w_shape[1] * p.groups);

  const int64_t N = x_shape[0], CI = x_shape[1], H = x_shape[2], W = x_shape[3];
  const int64_t COG = w_shape[1], KH = w_shape[2], KW = w_shape[3];
  const int64_t G = p.groups, CIG = CI / G, CO = COG * G;
  const int64_t HO = y_shape[2], WO = y_shape[3];
  const int64_t dh = p.dilation_h, dw = p.dilation_w;

  // wt[ky][kx][ci][c] = w[ci][c][ky][kx]
  std::vector<float> wt(static_cast<size_t>(KH * KW * CI * COG));
  for (int64_t ci = 0; ci < CI; ++ci)
    for (int64_t c = 0; c < COG; ++c)
      for (int64_t ky = 0; ky < KH; ++ky)
        for (int64_t kx = 0; kx < KW; ++kx)
          wt[((ky * KW + kx) * CI + ci) * COG + c] = w[((ci * COG + c) * KH + ky) * KW + kx];

  std::vector<double> acc(static_cast<size_t>(HO * WO * CO));  // [HO][WO][CO]
  for (int64_t n = 0; n < N; ++n) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t iy = 0; iy < H; ++iy)
      for (int64_t ix = 0; ix < W; ++ix)
        for (int64_t ky = 0; ky < KH; ++ky) {
          const int64_t oy = iy * p.stride_h - p.pad.top + ky * dh;
          if (oy < 0 || oy >= HO) continue;
          for (int64_t kx = 0; kx < KW; ++kx) {
            const int64_t ox = ix * p.stride_w - p.pad.left + kx * dw;
            if (ox < 0 || ox >= WO) continue;
            double* a = acc.data() + (oy * WO + ox) * CO;
            const float* wk = wt.data() + (ky * KW + kx) * CI * COG;
            for (int64_t ci = 0; ci < CI; ++ci) {
              const double xv = x[((n * CI + ci) * H + iy) * W + ix];
              const float* wr = wk + ci * COG;
              double* ag = a + (ci / CIG) * COG;  // the output channels of ci's group
              for (int64_t c = 0; c < COG; ++c) ag[c] += xv * double(wr[c]);
            }
          }
        }
    for (int64_t co = 0; co < CO; ++co) {
      const double b = bias ? double(bias[co]) : 0.0;
      const Activation act = channel_act(p.activation, slope, co);
      float* yp = y + (n * CO + co) * HO * WO;
      for (int64_t i = 0; i < HO * WO; ++i) yp[i] = float(activate(act, acc[i * CO + co] + b));
    }
  }
}


// The reference variant (ref::run_<op>, engine/ops/op_def.h): the KernelCall unpacked into the
// function above; registered from the op table by register.cc.
void run_conv_transpose2d(const KernelCall& c) {  // x, weight, optional bias (, slope with a prelu)
  const auto& s = c.node.input_shapes;
  conv_transpose2d(std::get<ConvTranspose2DParams>(c.node.params), c.inputs[0], s[0], c.inputs[1], s[1],
                   detail::optional_input(c, 2), c.outputs[0], c.node.output_shapes[0], prelu_slope(c));
}

}  // namespace infer::ref
