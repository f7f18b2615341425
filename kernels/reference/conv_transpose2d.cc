// Reference transposed 2-D convolution (weight [C_in,C_out,KH,KW]) in scatter form, the definition:
// every input pixel x[ci][iy][ix] adds x * w[ci][co][ky][kx] to output (co, iy*s - pad_top + ky,
// ix*s - pad_left + kx) when that lies inside the output; cells no input reaches hold the bias. Sums
// are double, channels-last, with the weights copied to [KH][KW][C_in][C_out] so the innermost loop
// runs contiguously over output channels (fast enough for whole GAN generators).
#include <algorithm>
#include <vector>

#include "kernels/reference/common.h"
#include "kernels/reference/reference.h"

namespace infer::ref {

void conv_transpose2d(const ConvTranspose2DParams& p, const float* x, const Shape& x_shape,
                      const float* w, const Shape& w_shape, const float* bias, float* y,
                      const Shape& y_shape) {
  using namespace detail;
  check_conv_params("conv_transpose2d", p.stride_h, p.stride_w, p.pad, p.dilation_h, p.dilation_w);
  check_shape("conv_transpose2d", "input", x_shape, 4);
  check_shape("conv_transpose2d", "weight", w_shape, 4);
  check_shape("conv_transpose2d", "output", y_shape, 4);
  check_equal("conv_transpose2d", "weight input channels", w_shape[0], x_shape[1]);
  check_equal("conv_transpose2d", "output batch", y_shape[0], x_shape[0]);
  check_equal("conv_transpose2d", "output channels", y_shape[1], w_shape[1]);

  const int64_t N = x_shape[0], CI = x_shape[1], H = x_shape[2], W = x_shape[3];
  const int64_t CO = w_shape[1], KH = w_shape[2], KW = w_shape[3];
  const int64_t HO = y_shape[2], WO = y_shape[3];

  // wt[ky][kx][ci][co] = w[ci][co][ky][kx]
  std::vector<float> wt(static_cast<size_t>(KH * KW * CI * CO));
  for (int64_t ci = 0; ci < CI; ++ci)
    for (int64_t co = 0; co < CO; ++co)
      for (int64_t ky = 0; ky < KH; ++ky)
        for (int64_t kx = 0; kx < KW; ++kx)
          wt[((ky * KW + kx) * CI + ci) * CO + co] = w[((ci * CO + co) * KH + ky) * KW + kx];

  std::vector<double> acc(static_cast<size_t>(HO * WO * CO));  // [HO][WO][CO]
  for (int64_t n = 0; n < N; ++n) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t iy = 0; iy < H; ++iy)
      for (int64_t ix = 0; ix < W; ++ix)
        for (int64_t ky = 0; ky < KH; ++ky) {
          const int64_t oy = iy * p.stride_h - p.pad.top + ky;
          if (oy < 0 || oy >= HO) continue;
          for (int64_t kx = 0; kx < KW; ++kx) {
            const int64_t ox = ix * p.stride_w - p.pad.left + kx;
            if (ox < 0 || ox >= WO) continue;
            double* a = acc.data() + (oy * WO + ox) * CO;
            const float* wk = wt.data() + (ky * KW + kx) * CI * CO;
            for (int64_t ci = 0; ci < CI; ++ci) {
              const double xv = x[((n * CI + ci) * H + iy) * W + ix];
              const float* wr = wk + ci * CO;
              for (int64_t co = 0; co < CO; ++co) a[co] += xv * double(wr[co]);
            }
          }
        }
    for (int64_t co = 0; co < CO; ++co) {
      const double b = bias ? double(bias[co]) : 0.0;
      float* yp = y + (n * CO + co) * HO * WO;
      for (int64_t i = 0; i < HO * WO; ++i) yp[i] = float(activate(p.activation, acc[i * CO + co] + b));
    }
  }
}

}  // namespace infer::ref
