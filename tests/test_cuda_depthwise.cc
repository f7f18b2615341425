// Tests of the CUDA conv2d.depthwise variant (kernels/cuda/conv2d/depthwise.cu): its rows and tiled
// NHWC kernels (3x3 / 5x5, stride 1 and 2; rows where C is a multiple of its 16- / 8-byte vector, tiled
// otherwise and at fp16 5x5) on seeded random shapes (odd H and W, C not a multiple of the 4-channel
// vector and past one channel group, paddings 0..2 and asymmetric, batch 1..3) with bias, residual,
// every activation kind (each of the fixed epilogues and the generic one) and per-channel PRelu slopes,
// in fp32, tf32 and fp16, NHWC and NCHW; the generic kernel on what those leave (dilation 2, channel
// multiplier 2, other kernels and strides); MobileNetV2 / EfficientNet-B0 layer shapes (many tiles and
// channel groups); the heuristic (cuDNN first for fp16 5x5 NHWC from batch 8 where it is built).
// Against the cpu reference through tests/cuda_test_util.h (NaN-poisoned outputs, guard bytes, graph
// capture of every fourth case). Skipped when there is no GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "infer/kernel.h"

using namespace infer;
using infer::test::make_case;
using infer::test::OpCase;
using infer::test::scaled;
using infer::test::uniform;

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// What a depthwise case carries besides its shape.
enum class Epilogue { Plain, Residual, PRelu };

// A depthwise conv2d case: C channels, k x k kernel (kh x kw when they differ), stride sh x sw,
// padding pad, dilation d, channel multiplier m; bias when `bias` (always with a residual or PRelu,
// as the fusion passes add a zero one), activation `act` or PRelu slopes, a residual input.
OpCase depthwise_case(int64_t N, int64_t C, int64_t H, int64_t W, int kh, int kw, int sh, int sw,
                      Padding2D pad, int d, int m, bool bias, Activation act, Epilogue e, uint64_t seed) {
  Conv2DParams p;
  p.groups = static_cast<int>(C);
  p.stride_h = sh, p.stride_w = sw;
  p.dilation_h = p.dilation_w = d;
  p.pad = pad;
  p.activation = e == Epilogue::PRelu ? Activation{ActivationKind::PRelu, 0.01f, 0.f} : act;
  const int64_t CO = C * m;
  const int64_t HO = (H + pad.top + pad.bottom - (d * (kh - 1) + 1)) / sh + 1;
  const int64_t WO = (W + pad.left + pad.right - (d * (kw - 1) + 1)) / sw + 1;
  std::vector<Shape> in{{N, C, H, W}, {CO, 1, kh, kw}};
  std::vector<bool> constant{false, true};
  if (bias || e != Epilogue::Plain) in.push_back({CO}), constant.push_back(true);
  const Shape y{N, CO, HO, WO};
  if (e == Epilogue::PRelu) in.push_back({CO}), constant.push_back(true);
  OpCase c = make_case(p, in, constant, y, seed);
  if (e == Epilogue::Residual) c = test::with_residual(std::move(c));
  if (act.kind == ActivationKind::Sqrt && e != Epilogue::PRelu)
    c.fill = [](std::vector<std::vector<float>>& v) {  // sqrt's domain: every sum >= 0
      for (auto& t : v)
        for (float& x : t) x = std::fabs(x);
    };
  if (act.kind == ActivationKind::Exp && e != Epilogue::PRelu)
    c.fill = [](std::vector<std::vector<float>>& v) {  // sums well inside fp16's exp range (< 11)
      for (auto& t : v)
        for (float& x : t) x *= 0.5f;
    };
  return c;
}

// Runs c on depthwise in NHWC and NCHW; true when it ran in both.
bool check_both_layouts(const OpCase& c, Precision p, bool capture) {
  const auto nhwc = test::check_case_in_layout(c, p, Layout::NHWC, {"depthwise"}, capture);
  const auto nchw = test::check_case(c, p, {"depthwise"}, capture);
  CHECK_MESSAGE(contains(nhwc, "depthwise"), test::describe(c));
  CHECK_MESSAGE(contains(nchw, "depthwise"), test::describe(c));
  return contains(nhwc, "depthwise") && contains(nchw, "depthwise");
}

// The variant the heuristic picks for c in `layout`.
std::string pick(const OpCase& c, Layout layout, Precision p = Precision::FP16) {
  test::CaseData cd = test::make_case_data(c, p);
  cd.node.layout = layout;
  return test::default_variant("cuda", "conv2d", cd.node);
}

}  // namespace

CUDA_TEST_CASE("conv2d.depthwise tiled NHWC: 3x3 / 5x5, stride 1 and 2, every epilogue, on random shapes") {
  test::require_registered("conv2d", {"depthwise"});
  struct Run {
    Precision p;
    int count;
  };
  for (const Run& run : {Run{Precision::FP32, 120}, Run{Precision::FP16, 120}, Run{Precision::TF32, 40}}) {
    CAPTURE(test::precision_label(run.p));
    std::mt19937_64 rng(20261130 + int(run.p));
    int ran = 0, k5 = 0, s2 = 0, odd_c = 0, groups = 0, asym = 0, residual = 0, prelu = 0, nobias = 0;
    int acts[test::kActivationCases] = {};
    const int n = scaled(run.count);
    for (int t = 0; t < n; ++t) {
      const int k = rng() % 2 ? 5 : 3, s = rng() % 2 ? 2 : 1;
      Padding2D pad;
      pad.top = uniform(rng, 0, 2), pad.left = uniform(rng, 0, 2);
      pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, 2) : pad.top;
      pad.right = rng() % 3 == 0 ? uniform(rng, 0, 2) : pad.left;
      // C: multiples of 4 (vector loads and stores) half the time, past one channel group (16 float
      // / 32 half channels) often, else any count (scalar edges).
      const int64_t C = rng() % 2 ? 4 * uniform(rng, 1, 20) : uniform(rng, 2, 70);  // C = 1: not grouped
      int64_t H, W;
      do {
        H = uniform(rng, 1, 37), W = uniform(rng, 1, 37);
      } while (H + pad.top + pad.bottom < k || W + pad.left + pad.right < k);
      const int64_t N = uniform(rng, 1, 3);
      const Epilogue e = t % 5 == 4 ? Epilogue::PRelu : t % 3 == 1 ? Epilogue::Residual : Epilogue::Plain;
      const Activation act = test::activation_case(t);  // every kind, incl. exp and sqrt
      const bool bias = rng() % 4 != 0;
      const OpCase c = depthwise_case(N, C, H, W, k, k, s, s, pad, 1, 1, bias, act, e, 30000 + uint64_t(t));
      ran += check_both_layouts(c, run.p, t % 4 == 3);
      CHECK_MESSAGE(pick(c, Layout::NHWC) == "depthwise", test::describe(c));
      k5 += k == 5, s2 += s == 2, odd_c += C % 4 != 0, groups += C > 32;
      asym += pad.top != pad.bottom || pad.left != pad.right;
      residual += e == Epilogue::Residual, prelu += e == Epilogue::PRelu;
      nobias += !bias && e == Epilogue::Plain;
      if (e != Epilogue::PRelu) ++acts[t % test::kActivationCases];
    }
    CHECK(ran == n);
    if (test::quick_mode()) continue;  // a handful of cases (sanitizers): no coverage counts
    // the generator covers what issue 31 lists
    CHECK(k5 >= n / 3);
    CHECK(s2 >= n / 3);
    CHECK(odd_c >= n / 4);
    CHECK(groups >= n / 4);
    CHECK(asym >= n / 6);
    CHECK(residual >= n / 4);
    CHECK(prelu >= n / 6);
    CHECK(nobias >= 1);
    for (int a = 0; a < test::kActivationCases; ++a) CHECK_MESSAGE(acts[a] > 0, "activation case " << a);
  }
}

CUDA_TEST_CASE("conv2d.depthwise generic kernels: dilation, channel multiplier, other kernels and strides") {
  std::mt19937_64 rng(20261131);
  int ran = 0;
  const int n = scaled(60);
  for (int t = 0; t < n; ++t) {
    const Precision p = test::kAllPrecisions[t % 3];
    int kh = 3, kw = 3, sh = 1, sw = 1, d = 1, m = 1;
    switch (t % 5) {
      case 0: d = 2; break;                             // dilation 2
      case 1: m = 2; break;                             // two outputs per input channel
      case 2: kh = kw = rng() % 2 ? 7 : 1; break;       // kernels the tiled kernel leaves
      case 3: sh = 1, sw = 2; break;                    // unequal strides
      default: kh = 3, kw = 5, sh = sw = 3; break;      // non-square kernel, stride 3
    }
    if (rng() % 2) kh = kh == 3 ? 5 : kh, kw = kw == 3 ? 5 : kw;
    // Paddings below the kernel's size (what the model format allows); C >= 2, so the node is grouped.
    const int ph = std::min(2, kh - 1), pw = std::min(2, kw - 1);
    Padding2D pad{uniform(rng, 0, ph), uniform(rng, 0, pw), uniform(rng, 0, ph), uniform(rng, 0, pw)};
    const int64_t C = rng() % 2 ? 4 * uniform(rng, 1, 10) : uniform(rng, 2, 41);
    int64_t H, W;
    do {
      H = uniform(rng, 1, 23), W = uniform(rng, 1, 23);
    } while (H + pad.top + pad.bottom < d * (kh - 1) + 1 || W + pad.left + pad.right < d * (kw - 1) + 1);
    const Epilogue e = t % 4 == 3 ? Epilogue::PRelu : t % 4 == 1 ? Epilogue::Residual : Epilogue::Plain;
    const int64_t N = uniform(rng, 1, 3);
    const bool bias = rng() % 2;
    const Activation act = test::activation_case(uniform(rng, 0, test::kBoundedActivationCases - 1));
    const OpCase c = depthwise_case(N, C, H, W, kh, kw, sh, sw, pad, d, m, bias, act, e, 31000 + uint64_t(t));
    ran += check_both_layouts(c, p, t % 4 == 0);
    // the generic NHWC kernel ranks below cuDNN (where cuDNN takes the node: symmetric padding)
#ifdef INFER_WITH_CUDNN
    if (pad.top == pad.bottom && pad.left == pad.right)
      CHECK_MESSAGE(pick(c, Layout::NHWC) == "cudnn", test::describe(c));
#endif
    CHECK_MESSAGE(pick(c, Layout::NCHW) == "depthwise", test::describe(c));
  }
  CHECK(ran == n);
}

CUDA_TEST_CASE("conv2d.depthwise: MobileNetV2 and EfficientNet-B0 layer shapes (many tiles and channel groups)") {
  struct Layer {
    int64_t C, H, W;
    int k, s;
  };
  // (C, H, W, k, stride) of torchvision's models at 224x224, some cut to keep the reference quick; the
  // last two: a 5x5 stride-2 tile whose rows are cut to fit 48 KiB (output width <= 4), and a 7x7 map.
  const Layer layers[] = {{32, 112, 112, 3, 1}, {96, 112, 56, 3, 2}, {144, 56, 56, 3, 1}, {144, 56, 56, 5, 2},
                          {240, 28, 28, 5, 1},  {672, 14, 14, 5, 2}, {960, 7, 7, 3, 1},   {40, 70, 7, 5, 2},
                          {1152, 7, 7, 5, 1}};
  int i = 0;
  for (const Layer& l : layers)
    for (Precision p : test::kAllPrecisions) {
      const int pad = l.k / 2;
      Activation act = test::activation_case(i % 2 ? 5 : 8);  // ReLU6 (MobileNetV2), SiLU (EfficientNet)
      const Epilogue e = i % 3 == 2 ? Epilogue::Residual : Epilogue::Plain;
      const OpCase c = depthwise_case(2, l.C, l.H, l.W, l.k, l.k, l.s, l.s, {pad, pad, pad, pad}, 1, 1, true,
                                      act, e, 32000 + uint64_t(i));
      CHECK(contains(test::check_case_in_layout(c, p, Layout::NHWC, {"depthwise"}, i % 4 == 1), "depthwise"));
      CHECK(pick(c, Layout::NHWC) == "depthwise");
      ++i;
    }
}

CUDA_TEST_CASE("conv2d.depthwise: fp16 5x5 in NHWC from batch 8 goes to cuDNN where it is built") {
  // EfficientNet-B0 at batch 64 fp16 ran faster with its 5x5 layers on cuDNN's NHWC kernels than on
  // the tiled one (H200, 2026-11-29); 3x3, batch 2 and fp32 / tf32 stay on depthwise.
  for (int64_t N : {2, 8}) {
    for (int k : {3, 5}) {
      for (int s : {1, 2}) {
        const OpCase c = depthwise_case(N, 48, 14, 14, k, k, s, s, {k / 2, k / 2, k / 2, k / 2}, 1, 1, true,
                                        test::activation_case(8), Epilogue::Plain, 33000 + uint64_t(N * 100 + k * 10 + s));
        CAPTURE(N);
        CAPTURE(k);
        CAPTURE(s);
#ifdef INFER_WITH_CUDNN
        CHECK(pick(c, Layout::NHWC, Precision::FP16) == (N >= 8 && k == 5 ? "cudnn" : "depthwise"));
#else
        CHECK(pick(c, Layout::NHWC, Precision::FP16) == "depthwise");
#endif
        CHECK(pick(c, Layout::NHWC, Precision::TF32) == "depthwise");
      }
    }
  }
}

CUDA_TEST_CASE("conv2d.depthwise: bad calls are errors") {
  const OpCase c = depthwise_case(2, 24, 9, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true, {}, Epilogue::Plain, 1);
  for (Layout layout : {Layout::NHWC, Layout::NCHW}) {
    test::CaseData cd = test::make_case_data(c, Precision::FP16);
    cd.node.layout = layout;
    CHECK(test::check_bad_calls(cd.node) >= 1);
  }
}
