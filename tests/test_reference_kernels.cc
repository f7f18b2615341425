// Tests of the reference kernels (kernels/reference): hand-computed small cases for every op, the
// transposed-convolution example of the unified kernel-segregation paper against a brute-force formula,
// conv_transpose2d == zero-insertion + padding + conv2d with the flipped kernel on random shapes (with
// groups and dilation; hand-computed dilated and grouped cases too),
// conv_pool2d == conv2d then average pooling, and the registry adapters. Outputs are poisoned with NaN
// before every call so an unwritten element fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/kernel.h"
#include "kernels/reference/reference.h"
#include "test_util.h"

using namespace infer;
using infer::test::poison;
using infer::test::random_vector;
using infer::test::rel_error;

namespace {

std::vector<float> poisoned(const Shape& s) {
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  poison(v);
  return v;
}

std::vector<float> iota(int64_t n, float start = 1.f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + float(i);
  return v;
}

// Element-wise comparison with an absolute tolerance; 0 demands exact equality. NaN never passes.
void expect_values(const std::vector<float>& got, const std::vector<float>& want, double tol = 0) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(std::fabs(double(got[i]) - double(want[i])) <= tol);
  }
}

Padding2D pad4(int top, int left, int bottom, int right) {
  Padding2D p;
  p.top = top, p.left = left, p.bottom = bottom, p.right = right;
  return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
TEST_CASE("conv2d: hand-computed cases") {
  const std::vector<float> x = iota(9);  // [[1,2,3],[4,5,6],[7,8,9]]
  const Shape xs{1, 1, 3, 3};

  SUBCASE("2x2 kernel, stride 1, no padding, bias") {
    const std::vector<float> w{1, 2, 3, 4}, b{1};
    auto y = poisoned({1, 1, 2, 2});
    ref::conv2d({}, x.data(), xs, w.data(), {1, 1, 2, 2}, b.data(), y.data(), {1, 1, 2, 2});
    // y00 = 1*1 + 2*2 + 4*3 + 5*4 = 37, + bias
    expect_values(y, {38, 48, 68, 78});
  }
  SUBCASE("3x3 ones, stride 2, padding 1") {
    const std::vector<float> w(9, 1.f);
    Conv2DParams p;
    p.stride_h = p.stride_w = 2;
    p.pad = pad4(1, 1, 1, 1);
    auto y = poisoned({1, 1, 2, 2});
    ref::conv2d(p, x.data(), xs, w.data(), {1, 1, 3, 3}, nullptr, y.data(), {1, 1, 2, 2});
    expect_values(y, {1 + 2 + 4 + 5, 2 + 3 + 5 + 6, 4 + 5 + 7 + 8, 5 + 6 + 8 + 9});
  }
  SUBCASE("asymmetric padding: top 1, right 1") {
    const std::vector<float> w(4, 1.f);
    Conv2DParams p;
    p.pad = pad4(1, 0, 0, 1);
    auto y = poisoned({1, 1, 3, 3});
    ref::conv2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr, y.data(), {1, 1, 3, 3});
    expect_values(y, {3, 5, 3, 12, 16, 9, 24, 28, 15});
  }
  SUBCASE("two channels in and out, 1x1 kernel, fused relu") {
    std::vector<float> x2 = x;
    x2.insert(x2.end(), 9, 1.f);  // channel 1: all ones
    // out0 = x0 + 10 * x1 ; out1 = -x0 (relu -> 0)
    const std::vector<float> w{1, 10, -1, 0};
    Conv2DParams p;
    p.activation.kind = ActivationKind::Relu;
    auto y = poisoned({1, 2, 3, 3});
    ref::conv2d(p, x2.data(), {1, 2, 3, 3}, w.data(), {2, 2, 1, 1}, nullptr, y.data(), {1, 2, 3, 3});
    expect_values(y, {11, 12, 13, 14, 15, 16, 17, 18, 19, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  }
  SUBCASE("batch of 2") {
    std::vector<float> x2 = x;
    for (float v : x) x2.push_back(-v);
    const std::vector<float> w{1, 2, 3, 4};
    auto y = poisoned({2, 1, 2, 2});
    ref::conv2d({}, x2.data(), {2, 1, 3, 3}, w.data(), {1, 1, 2, 2}, nullptr, y.data(), {2, 1, 2, 2});
    expect_values(y, {37, 47, 67, 77, -37, -47, -67, -77});
  }
  SUBCASE("dilation 2, padding 1: taps two apart, edges read zeros") {
    Conv2DParams p;
    p.dilation_h = p.dilation_w = 2;
    p.pad = pad4(1, 1, 1, 1);
    const std::vector<float> w{1, 2, 3, 4};
    auto y = poisoned({1, 1, 3, 3});
    ref::conv2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr, y.data(), {1, 1, 3, 3});
    // centre: 1*x00 + 2*x02 + 3*x20 + 4*x22 = 1 + 6 + 21 + 36; corner (0,0): only 4*x11
    expect_values(y, {20, 36, 15, 36, 64, 26, 10, 16, 5});
  }
  SUBCASE("dilation 0 is an error") {
    Conv2DParams p;
    p.dilation_w = 0;
    const std::vector<float> w(4, 1.f);
    auto y = poisoned({1, 1, 2, 2});
    CHECK_THROWS_AS(
        ref::conv2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr, y.data(), {1, 1, 2, 2}),
        infer::Error);
  }
  SUBCASE("groups 2: each output channel reads only its group's input channel") {
    std::vector<float> x2 = x;
    x2.insert(x2.end(), 9, 1.f);  // channel 1: all ones
    const std::vector<float> w{2, -3}, b{0.5f, 1};
    Conv2DParams p;
    p.groups = 2;
    auto y = poisoned({1, 2, 3, 3});
    ref::conv2d(p, x2.data(), {1, 2, 3, 3}, w.data(), {2, 1, 1, 1}, b.data(), y.data(), {1, 2, 3, 3});
    expect_values(y, {2.5, 4.5, 6.5, 8.5, 10.5, 12.5, 14.5, 16.5, 18.5, -2, -2, -2, -2, -2, -2, -2, -2, -2});
  }
  SUBCASE("depthwise with channel multiplier 2: output channel co reads input channel co / 2") {
    std::vector<float> x2 = x;
    x2.insert(x2.end(), 9, 1.f);
    const std::vector<float> w{1, 2, 3, 4};
    Conv2DParams p;
    p.groups = 2;
    p.stride_h = p.stride_w = 2;
    auto y = poisoned({1, 4, 2, 2});
    ref::conv2d(p, x2.data(), {1, 2, 3, 3}, w.data(), {4, 1, 1, 1}, nullptr, y.data(), {1, 4, 2, 2});
    expect_values(y, {1, 3, 7, 9, 2, 6, 14, 18, 3, 3, 3, 3, 4, 4, 4, 4});
  }
  SUBCASE("groups that do not match the weight are an error") {
    const std::vector<float> w(4, 1.f);
    Conv2DParams p;
    p.groups = 2;
    auto y = poisoned({1, 1, 2, 2});
    CHECK_THROWS_AS(
        ref::conv2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr, y.data(), {1, 1, 2, 2}),
        infer::Error);
  }
  SUBCASE("channel mismatch is an error") {
    const std::vector<float> w(8, 1.f);
    auto y = poisoned({1, 1, 2, 2});
    CHECK_THROWS_AS(
        ref::conv2d({}, x.data(), xs, w.data(), {1, 2, 2, 2}, nullptr, y.data(), {1, 1, 2, 2}),
        infer::Error);
  }
}

// ---------------------------------------------------------------------------------------------------
TEST_CASE("conv_transpose2d: hand-computed cases") {
  const std::vector<float> x{1, 2, 3, 4};  // [[1,2],[3,4]]
  const Shape xs{1, 1, 2, 2};

  SUBCASE("stride 1, 2x2 kernel: full correlation") {
    const std::vector<float> w{1, 2, 3, 4};
    auto y = poisoned({1, 1, 3, 3});
    ref::conv_transpose2d({}, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr, y.data(), {1, 1, 3, 3});
    expect_values(y, {1, 4, 4, 6, 20, 16, 9, 24, 16});
  }
  SUBCASE("stride 2, 2x2 ones: each pixel becomes a 2x2 block") {
    const std::vector<float> w(4, 1.f);
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = 2;
    auto y = poisoned({1, 1, 4, 4});
    ref::conv_transpose2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr, y.data(), {1, 1, 4, 4});
    expect_values(y, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  }
  SUBCASE("stride 2, output_padding 1, bias: the extra row and column hold the bias") {
    const std::vector<float> w(4, 1.f), b{0.5f};
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = 2;
    p.output_padding_h = p.output_padding_w = 1;
    auto y = poisoned({1, 1, 5, 5});
    ref::conv_transpose2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, b.data(), y.data(), {1, 1, 5, 5});
    expect_values(y, {1.5, 1.5, 2.5, 2.5, 0.5,  //
                      1.5, 1.5, 2.5, 2.5, 0.5,  //
                      3.5, 3.5, 4.5, 4.5, 0.5,  //
                      3.5, 3.5, 4.5, 4.5, 0.5,  //
                      0.5, 0.5, 0.5, 0.5, 0.5});
  }
  SUBCASE("stride 2, padding 1 crops one cell on every side") {
    const std::vector<float> w(4, 1.f);
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = 2;
    p.pad = pad4(1, 1, 1, 1);
    auto y = poisoned({1, 1, 2, 2});
    ref::conv_transpose2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr, y.data(), {1, 1, 2, 2});
    expect_values(y, {1, 2, 3, 4});
  }
  SUBCASE("weight layout [C_in, C_out, KH, KW]") {
    // 2 input channels (x and 10x), 3 output channels, 1x1 kernel: y_co = w[0][co]*x0 + w[1][co]*x1
    std::vector<float> x2 = x;
    for (float v : x) x2.push_back(10 * v);
    const std::vector<float> w{1, 0, 2,   // from input channel 0 to outputs 0,1,2
                               0, 1, -1};  // from input channel 1
    ConvTranspose2DParams p;
    p.activation.kind = ActivationKind::LeakyRelu;
    p.activation.alpha = 0.5f;
    auto y = poisoned({1, 3, 2, 2});
    ref::conv_transpose2d(p, x2.data(), {1, 2, 2, 2}, w.data(), {2, 3, 1, 1}, nullptr, y.data(),
                          {1, 3, 2, 2});
    // channel 2: 2x - 10x = -8x, leaky 0.5 -> -4x
    expect_values(y, {1, 2, 3, 4, 10, 20, 30, 40, -4, -8, -12, -16});
  }
  SUBCASE("dilation 2, stride 1: each tap's copy of x lands 2 cells from the previous one") {
    // tap (ky, kx) adds w[ky][kx] * x at offset (2ky, 2kx): four disjoint 2x2 blocks
    const std::vector<float> w{1, 2, 3, 4};
    ConvTranspose2DParams p;
    p.dilation_h = p.dilation_w = 2;
    auto y = poisoned({1, 1, 4, 4});  // (2-1)*1 + 2*(2-1) + 1 = 4
    ref::conv_transpose2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr, y.data(), {1, 1, 4, 4});
    expect_values(y, {1, 2, 2, 4,  //
                      3, 4, 6, 8,  //
                      3, 6, 4, 8,  //
                      9, 12, 12, 16});
  }
  SUBCASE("dilation 2, stride 2, bias: the stride-1 full correlation on the even cells") {
    // oy = 2*iy + 2*ky: even rows and columns get the 3x3 full correlation of the first subcase,
    // odd ones only the bias
    const std::vector<float> w{1, 2, 3, 4}, b{0.5f};
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = 2;
    p.dilation_h = p.dilation_w = 2;
    auto y = poisoned({1, 1, 5, 5});  // (2-1)*2 + 2 + 1
    ref::conv_transpose2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, b.data(), y.data(), {1, 1, 5, 5});
    expect_values(y, {1.5, 0.5, 4.5, 0.5, 4.5,   //
                      0.5, 0.5, 0.5, 0.5, 0.5,   //
                      6.5, 0.5, 20.5, 0.5, 16.5,  //
                      0.5, 0.5, 0.5, 0.5, 0.5,   //
                      9.5, 0.5, 24.5, 0.5, 16.5});
  }
  SUBCASE("groups: input channel ci feeds only its group's output channels") {
    // x channels: x and 10x. Depthwise (groups 2, weight [2,1,1,1] = {2, -1}): y = {2x, -10x}.
    std::vector<float> x2 = x;
    for (float v : x) x2.push_back(10 * v);
    ConvTranspose2DParams p;
    p.groups = 2;
    const std::vector<float> dw{2, -1};
    auto y = poisoned({1, 2, 2, 2});
    ref::conv_transpose2d(p, x2.data(), {1, 2, 2, 2}, dw.data(), {2, 1, 1, 1}, nullptr, y.data(),
                          {1, 2, 2, 2});
    expect_values(y, {2, 4, 6, 8, -10, -20, -30, -40});
    // Two outputs per group (weight [2,2,1,1] = {1, 2 | 3, 4}): y = {x, 2x, 30x, 40x}.
    const std::vector<float> gw{1, 2, 3, 4};
    auto y4 = poisoned({1, 4, 2, 2});
    ref::conv_transpose2d(p, x2.data(), {1, 2, 2, 2}, gw.data(), {2, 2, 1, 1}, nullptr, y4.data(),
                          {1, 4, 2, 2});
    expect_values(y4, {1, 2, 3, 4, 2, 4, 6, 8, 30, 60, 90, 120, 40, 80, 120, 160});
  }
  SUBCASE("bad dilation or groups is an error") {
    ConvTranspose2DParams p;
    p.dilation_w = 0;
    const std::vector<float> w(4, 1.f);
    auto y = poisoned({1, 1, 3, 3});
    CHECK_THROWS_WITH_AS(ref::conv_transpose2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr,
                                               y.data(), {1, 1, 3, 3}),
                         "conv_transpose2d: dilation and groups must be > 0", infer::Error);
    p.dilation_w = 1;
    p.groups = 2;  // 1 input channel
    CHECK_THROWS_AS(ref::conv_transpose2d(p, x.data(), xs, w.data(), {1, 1, 2, 2}, nullptr, y.data(),
                                          {1, 2, 3, 3}),
                    infer::Error);
  }
}

// The example of the unified kernel-segregation paper (Tida et al.): 4x4 input, 5x5 kernel, stride 2,
// padding 2, so a 7x7 output. Integer data: every expected value is exact.
TEST_CASE("conv_transpose2d: segregation paper example, 4x4 input, 5x5 kernel, stride 2, padding 2") {
  const int H = 4, K = 5, S = 2, P = 2, HO = (H - 1) * S - 2 * P + K;
  REQUIRE(HO == 7);
  const std::vector<float> x = iota(H * H);  // x[i][j] = 4i + j + 1
  const std::vector<float> w = iota(K * K);  // w[ky][kx] = 5ky + kx + 1
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = S;
  p.pad = pad4(P, P, P, P);
  auto y = poisoned({1, 1, HO, HO});
  ref::conv_transpose2d(p, x.data(), {1, 1, H, H}, w.data(), {1, 1, K, K}, nullptr, y.data(),
                        {1, 1, HO, HO});

  // By hand: y[0][0] = x00*w22 + x01*w20 + x10*w02 + x11*w00 = 1*13 + 2*11 + 5*3 + 6*1.
  CHECK(y[0] == 56);
  // y[3][3] = x11*w33 + x12*w31 + x21*w13 + x22*w11 = 6*19 + 7*17 + 10*9 + 11*7.
  CHECK(y[3 * HO + 3] == 400);

  // Every element against the direct formula: y[oy][ox] = sum of x[iy][ix] * w[ky][kx] over all
  // (iy, ix, ky, kx) with oy = iy*2 - 2 + ky and ox = ix*2 - 2 + kx.
  std::vector<float> want(HO * HO, 0.f);
  for (int oy = 0; oy < HO; ++oy)
    for (int ox = 0; ox < HO; ++ox) {
      double sum = 0;
      for (int iy = 0; iy < H; ++iy)
        for (int ix = 0; ix < H; ++ix)
          for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx)
              if (oy == iy * S - P + ky && ox == ix * S - P + kx) sum += x[iy * H + ix] * w[ky * K + kx];
      want[oy * HO + ox] = float(sum);
    }
  expect_values(y, want);
}

// conv_transpose2d must equal: insert stride-1 zeros between input pixels, pad by (ek-1-p) with ek the
// dilated kernel extent d*(k-1)+1 (plus output_padding at the bottom/right), and run conv2d (stride 1,
// the same dilation and groups) with the kernel flipped spatially and each group's in/out channels
// swapped. Half the cases are grouped (depthwise among them) and half dilated.
TEST_CASE("conv_transpose2d == zero-insertion + padding + conv2d with the flipped kernel (random shapes)") {
  std::mt19937 rng(20240611);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int tested = 0, asymmetric = 0, with_output_padding = 0, grouped = 0, depthwise = 0, dilated = 0;
  for (int attempt = 0; tested < 120 && attempt < 10000; ++attempt) {
    const int G = pick(0, 1) ? 1 : pick(2, 4);
    const int CIG = pick(0, 3) == 0 ? 1 : pick(1, 5), COG = pick(1, 5);
    const int N = pick(1, 3), CI = G * CIG, CO = G * COG;
    const int H = pick(1, 9), W = pick(1, 9), KH = pick(1, 5), KW = pick(1, 5);
    ConvTranspose2DParams p;
    p.groups = G;
    p.stride_h = pick(1, 4);
    p.stride_w = pick(1, 4);
    p.dilation_h = pick(0, 1) ? 1 : pick(2, 3);
    p.dilation_w = pick(0, 2) ? p.dilation_h : pick(1, 3);
    const int EKH = p.dilation_h * (KH - 1) + 1, EKW = p.dilation_w * (KW - 1) + 1;
    p.pad = pad4(pick(0, EKH - 1), pick(0, EKW - 1), pick(0, EKH - 1), pick(0, EKW - 1));
    p.output_padding_h = pick(0, std::max(p.stride_h, p.dilation_h) - 1);
    p.output_padding_w = pick(0, std::max(p.stride_w, p.dilation_w) - 1);
    const int act = pick(0, 3);
    if (act == 1) p.activation.kind = ActivationKind::Relu;
    if (act == 2) p.activation.kind = ActivationKind::Tanh;
    const int64_t HO = int64_t(H - 1) * p.stride_h - p.pad.top - p.pad.bottom + EKH + p.output_padding_h;
    const int64_t WO = int64_t(W - 1) * p.stride_w - p.pad.left - p.pad.right + EKW + p.output_padding_w;
    if (HO < 1 || WO < 1) continue;
    const bool with_bias = pick(0, 1) == 1;
    ++tested;
    asymmetric += (p.pad.top != p.pad.bottom || p.pad.left != p.pad.right);
    with_output_padding += (p.output_padding_h + p.output_padding_w > 0);
    grouped += G > 1;
    depthwise += G > 1 && CIG == 1;
    dilated += p.dilation_h > 1 || p.dilation_w > 1;

    const Shape xs{N, CI, H, W}, ws{CI, COG, KH, KW}, ys{N, CO, HO, WO};
    const auto x = random_vector(shape_numel(xs), 1000 + tested);
    const auto w = random_vector(shape_numel(ws), 2000 + tested);
    const auto b = random_vector(CO, 3000 + tested);
    auto y = poisoned(ys);
    ref::conv_transpose2d(p, x.data(), xs, w.data(), ws, with_bias ? b.data() : nullptr, y.data(), ys);

    // the zero-inserted input
    const int64_t HU = int64_t(H - 1) * p.stride_h + 1, WU = int64_t(W - 1) * p.stride_w + 1;
    const Shape us{N, CI, HU, WU};
    std::vector<float> up(shape_numel(us), 0.f);
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < CI; ++c)
        for (int iy = 0; iy < H; ++iy)
          for (int ix = 0; ix < W; ++ix)
            up[((n * CI + c) * HU + iy * p.stride_h) * WU + ix * p.stride_w] =
                x[((n * CI + c) * H + iy) * W + ix];
    // the flipped, swapped kernel [CO, CI/G, KH, KW]: wf[g*COG + c][i] = w[g*CIG + i][c], flipped
    const Shape fs{CO, CIG, KH, KW};
    std::vector<float> wf(shape_numel(fs));
    for (int g = 0; g < G; ++g)
      for (int i = 0; i < CIG; ++i)
        for (int c = 0; c < COG; ++c)
          for (int ky = 0; ky < KH; ++ky)
            for (int kx = 0; kx < KW; ++kx)
              wf[(((g * COG + c) * CIG + i) * KH + ky) * KW + kx] =
                  w[(((g * CIG + i) * COG + c) * KH + (KH - 1 - ky)) * KW + (KW - 1 - kx)];
    Conv2DParams c;
    c.groups = G;
    c.dilation_h = p.dilation_h;
    c.dilation_w = p.dilation_w;
    c.pad = pad4(EKH - 1 - p.pad.top, EKW - 1 - p.pad.left, EKH - 1 - p.pad.bottom + p.output_padding_h,
                 EKW - 1 - p.pad.right + p.output_padding_w);
    c.activation = p.activation;
    auto want = poisoned(ys);
    ref::conv2d(c, up.data(), us, wf.data(), fs, with_bias ? b.data() : nullptr, want.data(), ys);

    INFO("case " << tested << ": x " << shape_str(xs) << ", w " << shape_str(ws) << ", stride "
                 << p.stride_h << "x" << p.stride_w << ", pad " << p.pad.top << "," << p.pad.left << ","
                 << p.pad.bottom << "," << p.pad.right << ", output_padding " << p.output_padding_h
                 << "x" << p.output_padding_w << ", groups " << G << ", dilation " << p.dilation_h
                 << "x" << p.dilation_w);
    CHECK(rel_error(y, want) <= 1e-6);
  }
  CHECK(tested == 120);
  CHECK(asymmetric >= 20);
  CHECK(with_output_padding >= 20);
  CHECK(grouped >= 30);
  CHECK(depthwise >= 8);
  CHECK(dilated >= 30);
}

// ---------------------------------------------------------------------------------------------------
TEST_CASE("pool2d: hand-computed cases") {
  SUBCASE("max and average, 2x2 stride 2") {
    const auto x = iota(16);  // 4x4, 1..16
    Pool2DParams p;
    auto y = poisoned({1, 1, 2, 2});
    ref::pool2d(p, x.data(), {1, 1, 4, 4}, y.data(), {1, 1, 2, 2});
    expect_values(y, {6, 8, 14, 16});
    p.kind = PoolKind::Average;
    poison(y);
    ref::pool2d(p, x.data(), {1, 1, 4, 4}, y.data(), {1, 1, 2, 2});
    expect_values(y, {3.5, 5.5, 11.5, 13.5});
  }
  SUBCASE("ceil_mode: 3x3 stride 2 padding 1 on 4x4 gives 3x3 (values from PyTorch)") {
    const auto x16 = iota(16);  // 4x4, 1..16
    Pool2DParams p;
    p.kernel_h = p.kernel_w = 3;
    p.pad = pad4(1, 1, 1, 1);
    p.ceil_mode = true;
    auto y = poisoned({1, 1, 3, 3});
    ref::pool2d(p, x16.data(), {1, 1, 4, 4}, y.data(), {1, 1, 3, 3});
    expect_values(y, {6, 8, 8, 14, 16, 16, 14, 16, 16});
    // Rows/columns read: {0,1}, {1,2,3}, {3}. The last window [3, 6) is clipped to the padded border 5,
    // so with count_include_pad its divisor is 2 (rows) x 3 or 2 (columns), not 3 x 3.
    p.kind = PoolKind::Average;
    p.count_include_pad = true;
    poison(y);
    ref::pool2d(p, x16.data(), {1, 1, 4, 4}, y.data(), {1, 1, 3, 3});
    expect_values(y, {56 / 36.f, 120 / 36.f, 72 / 36.f, 228 / 36.f, 396 / 36.f, 216 / 36.f, 162 / 36.f,
                      270 / 36.f, 144 / 36.f}, 1e-6);
    p.count_include_pad = false;
    poison(y);
    ref::pool2d(p, x16.data(), {1, 1, 4, 4}, y.data(), {1, 1, 3, 3});
    expect_values(y, {3.5, 5, 6, 9.5, 11, 12, 13.5, 15, 16}, 1e-6);
  }
  const auto x = iota(9);  // 3x3, 1..9
  SUBCASE("average 3x3 stride 1 padding 1, count_include_pad false: divide by real cells") {
    Pool2DParams p;
    p.kind = PoolKind::Average;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 1;
    p.pad = pad4(1, 1, 1, 1);
    p.count_include_pad = false;
    auto y = poisoned({1, 1, 3, 3});
    ref::pool2d(p, x.data(), {1, 1, 3, 3}, y.data(), {1, 1, 3, 3});
    expect_values(y, {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7}, 1e-6);
  }
  SUBCASE("average 3x3 stride 1 padding 1, count_include_pad true: divide by 9") {
    Pool2DParams p;
    p.kind = PoolKind::Average;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 1;
    p.pad = pad4(1, 1, 1, 1);
    p.count_include_pad = true;
    auto y = poisoned({1, 1, 3, 3});
    ref::pool2d(p, x.data(), {1, 1, 3, 3}, y.data(), {1, 1, 3, 3});
    expect_values(y, {12 / 9.f, 21 / 9.f, 16 / 9.f, 27 / 9.f, 45 / 9.f, 33 / 9.f, 24 / 9.f, 39 / 9.f, 28 / 9.f},
                  1e-6);
  }
  SUBCASE("average with asymmetric padding (bottom, right), both divisors") {
    Pool2DParams p;
    p.kind = PoolKind::Average;
    p.pad = pad4(0, 0, 1, 1);
    auto y = poisoned({1, 1, 2, 2});
    ref::pool2d(p, x.data(), {1, 1, 3, 3}, y.data(), {1, 1, 2, 2});
    expect_values(y, {3, 4.5, 7.5, 9}, 1e-6);  // (1+2+4+5)/4, (3+6)/2, (7+8)/2, 9/1
    p.count_include_pad = true;
    poison(y);
    ref::pool2d(p, x.data(), {1, 1, 3, 3}, y.data(), {1, 1, 2, 2});
    expect_values(y, {3, 2.25, 3.75, 2.25}, 1e-6);  // every window counts 4 cells
  }
  SUBCASE("average 2x2 stride 1 with only bottom or only right padding") {
    Pool2DParams p;
    p.kind = PoolKind::Average;
    p.stride_h = p.stride_w = 1;
    p.pad = pad4(0, 0, 1, 0);  // bottom only: output 3x2
    auto y = poisoned({1, 1, 3, 2});
    ref::pool2d(p, x.data(), {1, 1, 3, 3}, y.data(), {1, 1, 3, 2});
    expect_values(y, {3, 4, 6, 7, 7.5, 8.5}, 1e-6);
    p.count_include_pad = true;
    poison(y);
    ref::pool2d(p, x.data(), {1, 1, 3, 3}, y.data(), {1, 1, 3, 2});
    expect_values(y, {3, 4, 6, 7, 3.75, 4.25}, 1e-6);

    p.pad = pad4(0, 0, 0, 1);  // right only: output 2x3
    p.count_include_pad = false;
    y = poisoned({1, 1, 2, 3});
    ref::pool2d(p, x.data(), {1, 1, 3, 3}, y.data(), {1, 1, 2, 3});
    expect_values(y, {3, 4, 4.5, 6, 7, 7.5}, 1e-6);
    p.count_include_pad = true;
    poison(y);
    ref::pool2d(p, x.data(), {1, 1, 3, 3}, y.data(), {1, 1, 2, 3});
    expect_values(y, {3, 4, 2.25, 6, 7, 3.75}, 1e-6);
  }
  SUBCASE("max ignores padded cells (all inputs negative)") {
    std::vector<float> neg = x;
    for (auto& v : neg) v = -v;  // -1..-9
    Pool2DParams p;
    p.stride_h = p.stride_w = 1;
    p.pad = pad4(1, 1, 1, 1);
    auto y = poisoned({1, 1, 4, 4});
    ref::pool2d(p, neg.data(), {1, 1, 3, 3}, y.data(), {1, 1, 4, 4});
    expect_values(y, {-1, -1, -2, -3, -1, -1, -2, -3, -4, -4, -5, -6, -7, -7, -8, -9});
  }
  SUBCASE("channels and batch are independent planes") {
    const auto x4 = iota(2 * 3 * 2 * 2);  // [2,3,2,2]
    Pool2DParams p;
    auto y = poisoned({2, 3, 1, 1});
    ref::pool2d(p, x4.data(), {2, 3, 2, 2}, y.data(), {2, 3, 1, 1});
    expect_values(y, {4, 8, 12, 16, 20, 24});
  }
}

// ---------------------------------------------------------------------------------------------------
TEST_CASE("dense: hand-computed cases") {
  const std::vector<float> x{1, 2, 3, 4, 5, 6};        // [2,3]
  const std::vector<float> w{1, 0, -1, .5f, .5f, .5f};  // [2,3]
  const std::vector<float> b{1, -1};
  auto y = poisoned({2, 2});
  ref::dense({}, x.data(), {2, 3}, w.data(), {2, 3}, b.data(), y.data(), {2, 2});
  expect_values(y, {-1, 2, -1, 6.5});
  poison(y);
  ref::dense({}, x.data(), {2, 3}, w.data(), {2, 3}, nullptr, y.data(), {2, 2});
  expect_values(y, {-2, 3, -2, 7.5});
  DenseParams p;
  p.activation.kind = ActivationKind::Relu;
  poison(y);
  ref::dense(p, x.data(), {2, 3}, w.data(), {2, 3}, b.data(), y.data(), {2, 2});
  expect_values(y, {0, 2, 0, 6.5});
}

TEST_CASE("batchnorm: (x - mean) / sqrt(var + eps) * scale + bias over axis 1") {
  const std::vector<float> scale{2, -1}, bias{.5f, 0}, mean{1, 0}, var{3, 3};
  BatchNormParams p;
  p.epsilon = 1;  // sqrt(3 + 1) = 2
  SUBCASE("rank 4") {
    const std::vector<float> x{5, -1, 2, 4};  // [1,2,1,2]: channel 0 {5,-1}, channel 1 {2,4}
    auto y = poisoned({1, 2, 1, 2});
    ref::batchnorm(p, x.data(), {1, 2, 1, 2}, scale.data(), bias.data(), mean.data(), var.data(), y.data());
    expect_values(y, {4.5, -1.5, -1, -2});
  }
  SUBCASE("rank 2, fused relu") {
    const std::vector<float> x{5, 2, -1, 4};  // [2,2]: rows are samples
    p.activation.kind = ActivationKind::Relu;
    auto y = poisoned({2, 2});
    ref::batchnorm(p, x.data(), {2, 2}, scale.data(), bias.data(), mean.data(), var.data(), y.data());
    expect_values(y, {4.5, 0, 0, 0});
  }
  SUBCASE("rank 1 is an error") {
    const std::vector<float> x{1, 2};
    auto y = poisoned({2});
    CHECK_THROWS_AS(
        ref::batchnorm(p, x.data(), {2}, scale.data(), bias.data(), mean.data(), var.data(), y.data()),
        infer::Error);
  }
}

TEST_CASE("activation: clip, hard_sigmoid, hard_swish, silu, elu, exp, sqrt, neg, abs, softplus") {
  const std::vector<float> x{-4, -2, -0.5f, 0, 0.5f, 3, 7};
  auto run = [](ActivationKind kind, float alpha, float beta, std::vector<float> in) {
    ActivationParams p;
    p.activation = {kind, alpha, beta};
    const Shape s{1, int64_t(in.size())};
    auto y = poisoned(s);
    ref::activation(p, in.data(), s, y.data());
    return y;
  };
  // ReLU6 = Clip(0, 6): both bounds reached, values on a bound kept; a general clip.
  expect_values(run(ActivationKind::Clip, 0, 6, x), {0, 0, 0, 0, 0.5f, 3, 6});
  expect_values(run(ActivationKind::Clip, -1, 0.25f, {-1.5f, -1, 0, 0.25f, 9}), {-1, -1, 0, 0.25f, 0.25f});
  expect_values(run(ActivationKind::Clip, 2, 2, x), std::vector<float>(7, 2));  // min == max is allowed
  // ONNX's default HardSigmoid(0.2, 0.5): saturates at 0 below x = -2.5 and at 1 above 2.5.
  expect_values(run(ActivationKind::HardSigmoid, 0.2f, 0.5f, x), {0, 0.1f, 0.4f, 0.5f, 0.6f, 1, 1}, 1e-7);
  expect_values(run(ActivationKind::HardSigmoid, 1.f / 6, 0.5f, {-3, -3.5f, 3, 4, 0}), {0, 0, 1, 1, 0.5f}, 1e-7);
  // HardSwish: 0 up to -3, x from 3 on.
  expect_values(run(ActivationKind::HardSwish, 0, 0, x),
                {0, -0.3333333333333333f, -0.20833333333333334f, 0, 0.2916666666666667f, 3, 7}, 1e-7);
  expect_values(run(ActivationKind::Silu, 0, 0, x),
                {-0.07194483984836623f, -0.2384058440442351f, -0.1887703343990727f, 0, 0.3112296656009273f,
                 2.8577223804672998f, 6.993622641639196f},
                1e-7);
  expect_values(run(ActivationKind::Elu, 0.7f, 0, x),
                {-0.687179052777886f, -0.6052653017343711f, -0.2754285382011566f, 0, 0.5f, 3, 7}, 1e-7);
  expect_values(run(ActivationKind::Softplus, 0, 0, x),
                {0.018149927917809738f, 0.1269280110429725f, 0.4740769841801067f, 0.6931471805599453f,
                 0.9740769841801067f, 3.048587351573742f, 7.000911466453774f},
                1e-7);
  // softplus of large magnitudes: no overflow to inf, no loss to 0 where the value is representable
  expect_values(run(ActivationKind::Softplus, 0, 0, {100, -100}), {100, 3.720075976020836e-44f});
  expect_values(run(ActivationKind::Neg, 0, 0, x), {4, 2, 0.5f, 0, -0.5f, -3, -7});
  expect_values(run(ActivationKind::Abs, 0, 0, x), {4, 2, 0.5f, 0, 0.5f, 3, 7});
  expect_values(run(ActivationKind::Sqrt, 0, 0, {0, 0.25f, 4, 2}), {0, 0.5f, 2, 1.4142135623730951f}, 1e-7);
  CHECK(std::isnan(run(ActivationKind::Sqrt, 0, 0, {-1})[0]));
  // exp: tiny results stay (subnormal) floats; e^88 is the largest finite float power; e^89 is inf.
  const auto e = run(ActivationKind::Exp, 0, 0, {-100, 0, 1, 88, 89});
  CHECK(e[0] == 3.720075976020836e-44f);  // the double result rounded once, as the literal is
  CHECK(e[1] == 1.f);
  CHECK(e[2] == doctest::Approx(2.718281828459045).epsilon(1e-7));
  CHECK(e[3] == doctest::Approx(1.6516362549940018e+38).epsilon(1e-7));
  CHECK(std::isinf(e[4]));

  SUBCASE("NaN in, NaN out for every kind") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int k = 0; k < kNumActivationKinds; ++k) {
      const ActivationKind kind = static_cast<ActivationKind>(k);
      CAPTURE(activation_name(kind));
      CHECK(std::isnan(run(kind, 0, 6, {nan})[0]));
    }
  }
  SUBCASE("every kind has its own stable name") {
    std::set<std::string> names;
    for (int k = 0; k < kNumActivationKinds; ++k) names.insert(activation_name(static_cast<ActivationKind>(k)));
    CHECK(names.size() == size_t(kNumActivationKinds));
    CHECK(names.count("unknown") == 0);
    CHECK(std::string(activation_name(ActivationKind::Clip)) == "clip");
    CHECK(std::string(activation_name(ActivationKind::HardSigmoid)) == "hard_sigmoid");
    CHECK(std::string(activation_name(ActivationKind::HardSwish)) == "hard_swish");
    CHECK(std::string(activation_name(ActivationKind::Silu)) == "silu");
    CHECK(std::string(activation_name(ActivationKind::Softplus)) == "softplus");
  }
}

TEST_CASE("activation: relu, leaky_relu, tanh, sigmoid, none") {
  const std::vector<float> x{-2, 0, 0.5f, 3};
  const Shape s{1, 4};
  auto run = [&](ActivationKind kind, float alpha = 0.01f) {
    ActivationParams p;
    p.activation = {kind, alpha};
    auto y = poisoned(s);
    ref::activation(p, x.data(), s, y.data());
    return y;
  };
  expect_values(run(ActivationKind::Relu), {0, 0, 0.5, 3});
  expect_values(run(ActivationKind::LeakyRelu, 0.1f), {-0.2f, 0, 0.5, 3}, 1e-7);
  expect_values(run(ActivationKind::Tanh), {-0.9640275800758169f, 0, 0.46211715726000974f, 0.9950547536867305f}, 1e-7);
  expect_values(run(ActivationKind::Sigmoid), {0.11920292202211755f, 0.5, 0.6224593312018546f, 0.9525741268224334f}, 1e-7);
  expect_values(run(ActivationKind::None), x);

  SUBCASE("in place") {
    std::vector<float> v = x;
    ActivationParams p;  // relu
    ref::activation(p, v.data(), s, v.data());
    expect_values(v, {0, 0, 0.5, 3});
  }
}

TEST_CASE("flatten and reshape copy the elements unchanged") {
  const auto x = iota(24);
  auto y = poisoned({2, 12});
  ref::flatten({}, x.data(), {2, 3, 2, 2}, y.data(), {2, 12});
  expect_values(y, x);
  ReshapeParams rp;
  rp.shape = {4, 3};
  poison(y);
  ref::reshape(rp, x.data(), {2, 12}, y.data(), {2, 4, 3});
  expect_values(y, x);
  CHECK_THROWS_AS(ref::reshape(rp, x.data(), {2, 12}, y.data(), {2, 4, 4}), infer::Error);
}

TEST_CASE("softmax: values, any axis, numerically stable") {
  const float s0 = 0.09003057317038046f, s1 = 0.24472847105479764f, s2 = 0.6652409557748219f;
  SUBCASE("axis 1 of [1,3,2]; the second column is 1000s") {
    const std::vector<float> x{1, 1000, 2, 1000, 3, 1000};
    auto y = poisoned({1, 3, 2});
    SoftmaxParams p;
    p.axis = 1;
    ref::softmax(p, x.data(), {1, 3, 2}, y.data());
    expect_values(y, {s0, 1 / 3.f, s1, 1 / 3.f, s2, 1 / 3.f}, 1e-7);
  }
  SUBCASE("last axis (-1) of [2,3]") {
    const std::vector<float> x{1, 2, 3, -5, -5, -5};
    auto y = poisoned({2, 3});
    SoftmaxParams p;
    p.axis = -1;
    ref::softmax(p, x.data(), {2, 3}, y.data());
    expect_values(y, {s0, s1, s2, 1 / 3.f, 1 / 3.f, 1 / 3.f}, 1e-7);
  }
  SUBCASE("axis 0 of [2,1]") {
    const std::vector<float> x{0, std::log(3.f)};
    auto y = poisoned({2, 1});
    SoftmaxParams p;
    p.axis = 0;
    ref::softmax(p, x.data(), {2, 1}, y.data());
    expect_values(y, {0.25, 0.75}, 1e-7);
  }
  SUBCASE("axis out of range is an error") {
    const std::vector<float> x{1, 2};
    auto y = poisoned({1, 2});
    SoftmaxParams p;
    p.axis = 2;
    CHECK_THROWS_AS(ref::softmax(p, x.data(), {1, 2}, y.data()), infer::Error);
  }
}

TEST_CASE("add: element-wise sum and fused activation") {
  const std::vector<float> a{1, 2, 3}, b{10, 20, -30};
  auto y = poisoned({1, 3});
  ref::add({}, a.data(), b.data(), {1, 3}, y.data());
  expect_values(y, {11, 22, -27});
  AddParams p;
  p.activation.kind = ActivationKind::Relu;
  poison(y);
  ref::add(p, a.data(), b.data(), {1, 3}, y.data());
  expect_values(y, {11, 22, 0});
}

TEST_CASE("concat: along axis 0, 1 and 2") {
  SUBCASE("axis 1") {
    const auto a = iota(4);      // [2,1,2]: {1,2 | 3,4}
    const auto b = iota(8, 5);   // [2,2,2]: {5,6,7,8 | 9,10,11,12}
    ConcatParams p;
    p.axis = 1;
    auto y = poisoned({2, 3, 2});
    ref::concat(p, {a.data(), b.data()}, {{2, 1, 2}, {2, 2, 2}}, y.data(), {2, 3, 2});
    expect_values(y, {1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12});
  }
  SUBCASE("axis 2") {
    const auto a = iota(4);     // [2,2,1]
    const auto b = iota(8, 5);  // [2,2,2]
    ConcatParams p;
    p.axis = 2;
    auto y = poisoned({2, 2, 3});
    ref::concat(p, {a.data(), b.data()}, {{2, 2, 1}, {2, 2, 2}}, y.data(), {2, 2, 3});
    expect_values(y, {1, 5, 6, 2, 7, 8, 3, 9, 10, 4, 11, 12});
  }
  SUBCASE("three inputs along axis 0") {
    const std::vector<float> a{1, 2}, b{3, 4, 5, 6}, c{7, 8};
    ConcatParams p;
    p.axis = 0;
    auto y = poisoned({4, 2});
    ref::concat(p, {a.data(), b.data(), c.data()}, {{1, 2}, {2, 2}, {1, 2}}, y.data(), {4, 2});
    expect_values(y, {1, 2, 3, 4, 5, 6, 7, 8});
  }
  SUBCASE("mismatched shapes are an error") {
    const std::vector<float> a{1, 2}, b{3, 4, 5};
    ConcatParams p;
    p.axis = 0;
    auto y = poisoned({2, 2});
    CHECK_THROWS_AS(ref::concat(p, {a.data(), b.data()}, {{1, 2}, {1, 3}}, y.data(), {2, 2}),
                    infer::Error);
  }
}

// ---------------------------------------------------------------------------------------------------
TEST_CASE("conv_pool2d: hand-computed, activation after the pooling") {
  const auto x = iota(16);  // 4x4, 1..16; 2x2 block averages 3.5, 5.5, 11.5, 13.5
  ConvPool2DParams p;
  p.pool = 2;
  auto y = poisoned({1, 1, 2, 2});
  const std::vector<float> w{2}, b{1};
  ref::conv_pool2d(p, x.data(), {1, 1, 4, 4}, w.data(), {1, 1, 1, 1}, b.data(), y.data(), {1, 1, 2, 2});
  expect_values(y, {8, 12, 24, 28});

  // -x + 10 then relu: the block {9,10,13,14} averages to -1.5 -> 0 (relu before pooling would give 0.25)
  const std::vector<float> wn{-1}, bn{10};
  p.conv.activation.kind = ActivationKind::Relu;
  poison(y);
  ref::conv_pool2d(p, x.data(), {1, 1, 4, 4}, wn.data(), {1, 1, 1, 1}, bn.data(), y.data(), {1, 1, 2, 2});
  expect_values(y, {6.5, 4.5, 0, 0});

  // an output size that is not floor(conv / pool) is an error
  auto big = poisoned({1, 1, 3, 3});
  CHECK_THROWS_AS(ref::conv_pool2d(p, x.data(), {1, 1, 4, 4}, wn.data(), {1, 1, 1, 1}, bn.data(),
                                   big.data(), {1, 1, 3, 3}),
                  infer::Error);
}

TEST_CASE("conv_pool2d == conv2d, then average pool2d, then the activation (random shapes)") {
  std::mt19937 rng(777);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int tested = 0;
  for (int attempt = 0; tested < 40 && attempt < 10000; ++attempt) {
    const int N = pick(1, 2), CI = pick(1, 5), CO = pick(1, 5), H = pick(2, 13), W = pick(2, 13);
    const int KH = pick(1, 5), KW = pick(1, 5);
    ConvPool2DParams p;
    p.pool = pick(1, 3);
    p.conv.stride_h = pick(1, 2);
    p.conv.stride_w = pick(1, 2);
    p.conv.pad = pad4(pick(0, KH - 1), pick(0, KW - 1), pick(0, KH - 1), pick(0, KW - 1));
    p.conv.activation.kind = static_cast<ActivationKind>(pick(0, 4));
    const int64_t HC = (H + p.conv.pad.top + p.conv.pad.bottom - KH);
    const int64_t WC = (W + p.conv.pad.left + p.conv.pad.right - KW);
    if (HC < 0 || WC < 0) continue;
    const int64_t hc = HC / p.conv.stride_h + 1, wc = WC / p.conv.stride_w + 1;
    if (hc < p.pool || wc < p.pool) continue;
    ++tested;

    const Shape xs{N, CI, H, W}, ws{CO, CI, KH, KW}, cs{N, CO, hc, wc}, ys{N, CO, hc / p.pool, wc / p.pool};
    const auto x = random_vector(shape_numel(xs), 10 + tested);
    const auto w = random_vector(shape_numel(ws), 20 + tested);
    const auto b = random_vector(CO, 30 + tested);
    auto y = poisoned(ys);
    ref::conv_pool2d(p, x.data(), xs, w.data(), ws, b.data(), y.data(), ys);

    Conv2DParams c = p.conv;
    c.activation = {};
    auto conv = poisoned(cs);
    ref::conv2d(c, x.data(), xs, w.data(), ws, b.data(), conv.data(), cs);
    Pool2DParams pp;
    pp.kind = PoolKind::Average;
    pp.kernel_h = pp.kernel_w = pp.stride_h = pp.stride_w = p.pool;
    auto pooled = poisoned(ys);
    ref::pool2d(pp, conv.data(), cs, pooled.data(), ys);
    ActivationParams ap;
    ap.activation = p.conv.activation;
    auto want = poisoned(ys);
    ref::activation(ap, pooled.data(), ys, want.data());

    INFO("case " << tested << ": x " << shape_str(xs) << ", w " << shape_str(ws) << ", pool " << p.pool);
    CHECK(rel_error(y, want) <= 1e-6);
  }
  CHECK(tested == 40);
}

// ---------------------------------------------------------------------------------------------------
TEST_CASE("registry: every op has a cpu 'reference' variant at priority 0") {
  const KernelRegistry& registry = KernelRegistry::global();
  for (int i = 0; i < kNumOpTypes; ++i) {
    const char* op = op_name(static_cast<OpType>(i));
    INFO("op " << op);
    const KernelVariant* v = registry.find("cpu", op, "reference");
    REQUIRE(v != nullptr);
    CHECK(v->op == op);
    CHECK(v->backend == "cpu");
    CHECK(v->priority == 0);
    CHECK(static_cast<bool>(v->run));
  }
}

TEST_CASE("registry adapters run the reference functions") {
  const KernelRegistry& registry = KernelRegistry::global();

  SUBCASE("conv2d with and without bias equals the direct call") {
    const KernelVariant* v = registry.find("cpu", "conv2d", "reference");
    REQUIRE(v != nullptr);
    Conv2DParams p;
    p.stride_h = 2;
    p.pad = pad4(1, 2, 0, 1);
    p.activation.kind = ActivationKind::Sigmoid;
    const Shape xs{2, 3, 7, 6}, ws{4, 3, 3, 3}, ys{2, 4, 3, 7};
    const auto x = random_vector(shape_numel(xs), 1), w = random_vector(shape_numel(ws), 2);
    const auto b = random_vector(4, 3);
    for (bool with_bias : {true, false}) {
      NodeDesc node{p, {xs, ws}, {ys}, {nullptr, w.data()}};
      std::vector<const float*> inputs{x.data(), w.data()};
      if (with_bias) {
        node.input_shapes.push_back({4});
        node.constants.push_back(b.data());
        inputs.push_back(b.data());
      }
      auto y = poisoned(ys);
      v->run(KernelCall{node, inputs, {y.data()}});
      auto want = poisoned(ys);
      ref::conv2d(p, x.data(), xs, w.data(), ws, with_bias ? b.data() : nullptr, want.data(), ys);
      expect_values(y, want);
    }
  }
  SUBCASE("concat with three inputs") {
    const KernelVariant* v = registry.find("cpu", "concat", "reference");
    REQUIRE(v != nullptr);
    ConcatParams p;
    p.axis = 1;
    const std::vector<float> a{1, 2}, b{3}, c{4, 5, 6};
    NodeDesc node{p, {{1, 2}, {1, 1}, {1, 3}}, {{1, 6}}, {nullptr, nullptr, nullptr}};
    auto y = poisoned({1, 6});
    v->run(KernelCall{node, {a.data(), b.data(), c.data()}, {y.data()}});
    expect_values(y, {1, 2, 3, 4, 5, 6});
  }
  SUBCASE("batchnorm takes x, scale, bias, mean, var in that order") {
    const KernelVariant* v = registry.find("cpu", "batchnorm", "reference");
    REQUIRE(v != nullptr);
    BatchNormParams p;
    p.epsilon = 1;
    const std::vector<float> x{5, -1, 2, 4}, scale{2, -1}, bias{.5f, 0}, mean{1, 0}, var{3, 3};
    NodeDesc node{p, {{1, 2, 1, 2}, {2}, {2}, {2}, {2}}, {{1, 2, 1, 2}}, {}};
    auto y = poisoned({1, 2, 1, 2});
    v->run(KernelCall{node, {x.data(), scale.data(), bias.data(), mean.data(), var.data()}, {y.data()}});
    expect_values(y, {4.5, -1.5, -1, -2});
  }
  SUBCASE("a malformed call is an infer::Error") {
    const KernelVariant* v = registry.find("cpu", "conv2d", "reference");
    REQUIRE(v != nullptr);
    const std::vector<float> x(9, 1.f);
    auto y = poisoned({1, 1, 3, 3});
    NodeDesc one_input{Conv2DParams{}, {{1, 1, 3, 3}}, {{1, 1, 3, 3}}, {nullptr}};
    CHECK_THROWS_AS(v->run(KernelCall{one_input, {x.data()}, {y.data()}}), infer::Error);
    NodeDesc wrong_op{AddParams{}, {{1, 1, 3, 3}, {1, 1, 1, 1}}, {{1, 1, 3, 3}}, {nullptr, nullptr}};
    CHECK_THROWS_AS(v->run(KernelCall{wrong_op, {x.data(), x.data()}, {y.data()}}), infer::Error);
  }
}

// ---------------------------------------------------------------------------------------------------
namespace {
std::vector<float> run_resize(const ResizeParams& p, const std::vector<float>& x, const Shape& xs,
                              const Shape& ys) {
  auto y = poisoned(ys);
  ref::resize(p, x.data(), xs, y.data(), ys);
  return y;
}
ResizeParams resize_params(ResizeMode mode, ResizeCoord coord, int out_h, int out_w,
                           ResizeNearest nearest = ResizeNearest::Floor) {
  ResizeParams p;
  p.mode = mode;
  p.coord = coord;
  p.nearest = nearest;
  p.out_h = out_h;
  p.out_w = out_w;
  return p;
}
}  // namespace

TEST_CASE("resize: 2x2 -> 4x4 in every mode PyTorch exports (values from PyTorch)") {
  const std::vector<float> x{1, 2, 3, 4};
  const Shape xs{1, 1, 2, 2}, ys{1, 1, 4, 4};
  ResizeParams p = resize_params(ResizeMode::Nearest, ResizeCoord::Asymmetric, 0, 0);
  p.scale_h = p.scale_w = 2;  // nn.Upsample(scale_factor=2): asymmetric, floor
  expect_values(run_resize(p, x, xs, ys), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  p.mode = ResizeMode::Linear;  // bilinear, align_corners=False
  p.coord = ResizeCoord::HalfPixel;
  expect_values(run_resize(p, x, xs, ys),
                {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}, 1e-6);
  p.coord = ResizeCoord::PytorchHalfPixel;  // the same while the output is longer than 1
  expect_values(run_resize(p, x, xs, ys),
                {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}, 1e-6);
  p.coord = ResizeCoord::AlignCorners;  // steps of 1/3
  expect_values(run_resize(p, x, xs, ys),
                {1, 4 / 3.f, 5 / 3.f, 2, 5 / 3.f, 2, 7 / 3.f, 8 / 3.f, 7 / 3.f, 8 / 3.f, 3, 10 / 3.f, 3,
                 10 / 3.f, 11 / 3.f, 4},
                1e-6);
  p.coord = ResizeCoord::Asymmetric;  // x = o / 2: 0, 0.5, 1, 1.5 -> clamped to 1
  expect_values(run_resize(p, x, xs, ys),
                {1, 1.5, 2, 2, 2, 2.5, 3, 3, 3, 3.5, 4, 4, 3, 3.5, 4, 4}, 1e-6);
}

TEST_CASE("resize: 3x3 -> 5x7, each coordinate mode by hand") {
  // x[r][c] = 3r + c + 1 is linear, so bilinear gives 3 * sy + sx + 1 at the clamped source coordinates.
  const auto x = iota(9);
  const Shape xs{1, 1, 3, 3}, ys{1, 1, 5, 7};
  const auto clamp2 = [](double v) { return std::min(std::max(v, 0.0), 2.0); };
  struct Mode {
    ResizeCoord coord;
    double (*sy)(int), (*sx)(int);
  };
  const Mode modes[] = {
      {ResizeCoord::HalfPixel, [](int o) { return (o + 0.5) * 3 / 5 - 0.5; }, [](int o) { return (o + 0.5) * 3 / 7 - 0.5; }},
      {ResizeCoord::PytorchHalfPixel, [](int o) { return (o + 0.5) * 3 / 5 - 0.5; }, [](int o) { return (o + 0.5) * 3 / 7 - 0.5; }},
      {ResizeCoord::AlignCorners, [](int o) { return o * 2 / 4.0; }, [](int o) { return o * 2 / 6.0; }},
      {ResizeCoord::Asymmetric, [](int o) { return o * 3 / 5.0; }, [](int o) { return o * 3 / 7.0; }},
  };
  for (const Mode& m : modes) {
    CAPTURE(int(m.coord));
    std::vector<float> want;
    for (int oy = 0; oy < 5; ++oy)
      for (int ox = 0; ox < 7; ++ox) want.push_back(float(3 * clamp2(m.sy(oy)) + clamp2(m.sx(ox)) + 1));
    expect_values(run_resize(resize_params(ResizeMode::Linear, m.coord, 5, 7), x, xs, ys), want, 1e-6);
  }
  // F.interpolate(size=(5, 7), mode="nearest") (asymmetric, floor), from PyTorch
  expect_values(run_resize(resize_params(ResizeMode::Nearest, ResizeCoord::Asymmetric, 5, 7), x, xs, ys),
                {1, 1, 1, 2, 2, 3, 3, 1, 1, 1, 2, 2, 3, 3, 4, 4, 4, 5, 5, 6, 6,
                 4, 4, 4, 5, 5, 6, 6, 7, 7, 7, 8, 8, 9, 9});
  // A 1x1 output: half_pixel samples the centre (row 1, column 1), pytorch_half_pixel the corner.
  expect_values(run_resize(resize_params(ResizeMode::Linear, ResizeCoord::HalfPixel, 1, 1), x, xs, {1, 1, 1, 1}), {5});
  expect_values(run_resize(resize_params(ResizeMode::Linear, ResizeCoord::PytorchHalfPixel, 1, 1), x, xs, {1, 1, 1, 1}),
                {1});
  expect_values(run_resize(resize_params(ResizeMode::Linear, ResizeCoord::AlignCorners, 1, 1), x, xs, {1, 1, 1, 1}), {1});
}

TEST_CASE("resize: nearest rounding modes, ties and downscaling") {
  const std::vector<float> x{10, 20, 30};
  const Shape xs{1, 1, 1, 3};
  ResizeParams p = resize_params(ResizeMode::Nearest, ResizeCoord::Asymmetric, 0, 0);
  p.scale_h = 1;
  p.scale_w = 2;  // x = o / 2 = 0, 0.5, 1, 1.5, 2, 2.5: ties
  const Shape ys{1, 1, 1, 6};
  p.nearest = ResizeNearest::Floor;
  expect_values(run_resize(p, x, xs, ys), {10, 10, 20, 20, 30, 30});
  p.nearest = ResizeNearest::RoundPreferFloor;
  expect_values(run_resize(p, x, xs, ys), {10, 10, 20, 20, 30, 30});
  p.nearest = ResizeNearest::RoundPreferCeil;
  expect_values(run_resize(p, x, xs, ys), {10, 20, 20, 30, 30, 30});  // 2.5 -> 3, clamped to 2
  p.nearest = ResizeNearest::Ceil;
  expect_values(run_resize(p, x, xs, ys), {10, 20, 20, 30, 30, 30});
  p.scale_w = 3;  // x = o / 3 = 0, 1/3, 2/3, 1, 4/3, 5/3, 2, 7/3, 8/3: no ties
  const Shape y9{1, 1, 1, 9};
  p.nearest = ResizeNearest::Ceil;
  expect_values(run_resize(p, x, xs, y9), {10, 20, 20, 20, 30, 30, 30, 30, 30});
  p.nearest = ResizeNearest::RoundPreferCeil;
  expect_values(run_resize(p, x, xs, y9), {10, 10, 20, 20, 20, 30, 30, 30, 30});
  // half_pixel downscale 3 -> 1 (scale 1/3): the centre, (0.5) * 3 - 0.5 = 1
  p = resize_params(ResizeMode::Nearest, ResizeCoord::HalfPixel, 1, 1);
  expect_values(run_resize(p, x, xs, {1, 1, 1, 1}), {20});
  // bilinear downscale by 2 (half_pixel) averages neighbour pairs: 4 -> 2 gives x = 0.5, 2.5
  p = resize_params(ResizeMode::Linear, ResizeCoord::HalfPixel, 0, 0);
  p.scale_h = 1;
  p.scale_w = 0.5f;
  expect_values(run_resize(p, {1, 3, 5, 9}, {1, 1, 1, 4}, {1, 1, 1, 2}), {2, 7}, 1e-6);
}

TEST_CASE("depth_to_space: DCR and CRD by hand") {
  const auto x = iota(16);  // [1, 8, 1, 2]: channel k holds 2k+1, 2k+2
  const Shape xs{1, 8, 1, 2}, ys{1, 2, 2, 4};
  auto y = poisoned(ys);
  // CRD (PixelShuffle): output channel c, phase (i, j) reads channel 4c + 2i + j.
  ref::depth_to_space({2, DepthToSpaceMode::CRD}, x.data(), xs, y.data(), ys);
  expect_values(y, {1, 3, 2, 4, 5, 7, 6, 8, 9, 11, 10, 12, 13, 15, 14, 16});
  // DCR: channel (2i + j) * 2 + c.
  poison(y);
  ref::depth_to_space({2, DepthToSpaceMode::DCR}, x.data(), xs, y.data(), ys);
  expect_values(y, {1, 5, 2, 6, 9, 13, 10, 14, 3, 7, 4, 8, 11, 15, 12, 16});
}
