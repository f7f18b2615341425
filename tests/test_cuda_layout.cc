// The CUDA channels-last path: the layout conversion kernel, every variant that runs in NHWC (cuDNN
// conv2d and conv_transpose2d, width-folded conv2d, pool2d, element-wise ops, concat, depth_to_space) against the NCHW
// reference on random shapes (odd C, H, W; C not a multiple of 8; padding and stride edges; outputs
// poisoned; inside a CUDA graph replayed twice), and the channels_last / fold_width passes through
// whole sessions: zoo models in fp16 and tf32 within 1e-2 of the reference in both layouts, the plan
// showing each node's layout. Skipped (one line on stdout) when there is no CUDA device.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "infer/infer.h"
#include "infer/kernel.h"
#include "plan.h"
#include "test_util.h"
#include "zoo.h"

using namespace infer;
using infer::test::check_case;
using infer::test::check_case_in_layout;
using infer::test::make_case;
using infer::test::OpCase;
using infer::test::random_activation;
using infer::test::scaled;
using infer::test::uniform;

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A conv2d with symmetric padding (what cuDNN's descriptors take): kernel 1-5, stride 1-3, channels
// 1..40 (odd ones and multiples of 8 alike), batch 1..3, images 1..15.
OpCase random_conv(std::mt19937_64& rng, uint64_t seed) {
  Conv2DParams p;
  const int kh = uniform(rng, 1, 5), kw = rng() % 3 == 0 ? uniform(rng, 1, 5) : kh;
  p.stride_h = uniform(rng, 1, 3);
  p.stride_w = rng() % 3 == 0 ? uniform(rng, 1, 3) : p.stride_h;
  p.pad.top = p.pad.bottom = uniform(rng, 0, kh - 1);
  p.pad.left = p.pad.right = uniform(rng, 0, kw - 1);
  p.activation = random_activation(rng);
  const int64_t N = uniform(rng, 1, 3);
  const int64_t CI = rng() % 3 == 0 ? 8 * uniform(rng, 1, 4) : uniform(rng, 1, 40);
  const int64_t CO = rng() % 3 == 0 ? 8 * uniform(rng, 1, 4) : uniform(rng, 1, 40);
  int64_t H, W;
  do {
    H = uniform(rng, 1, 15), W = uniform(rng, 1, 15);
  } while (H + 2 * p.pad.top < kh || W + 2 * p.pad.left < kw);
  const int64_t HO = (H + 2 * p.pad.top - kh) / p.stride_h + 1, WO = (W + 2 * p.pad.left - kw) / p.stride_w + 1;
  std::vector<Shape> in{{N, CI, H, W}, {CO, CI, kh, kw}};
  if (rng() % 4 != 0) in.push_back({CO});
  return make_case(p, in, {false, true, true}, {N, CO, HO, WO}, seed);
}

// A transposed convolution with symmetric padding < kernel, stride 1-3, output_padding < stride.
OpCase random_tconv(std::mt19937_64& rng, uint64_t seed) {
  ConvTranspose2DParams p;
  const int k = uniform(rng, 1, 5);
  p.stride_h = p.stride_w = uniform(rng, 1, 3);
  p.pad.top = p.pad.bottom = p.pad.left = p.pad.right = uniform(rng, 0, k - 1);
  p.output_padding_h = uniform(rng, 0, p.stride_h - 1);
  p.output_padding_w = uniform(rng, 0, p.stride_w - 1);
  p.activation = random_activation(rng);
  const int64_t N = uniform(rng, 1, 3);
  const int64_t CI = rng() % 3 == 0 ? 8 * uniform(rng, 1, 4) : uniform(rng, 1, 40);
  const int64_t CO = rng() % 3 == 0 ? 8 * uniform(rng, 1, 4) : uniform(rng, 1, 40);
  int64_t H, W, HO, WO;
  do {
    H = uniform(rng, 1, 9), W = uniform(rng, 1, 9);
    HO = (H - 1) * p.stride_h - 2 * p.pad.top + k + p.output_padding_h;
    WO = (W - 1) * p.stride_w - 2 * p.pad.left + k + p.output_padding_w;
  } while (HO < 1 || WO < 1);
  std::vector<Shape> in{{N, CI, H, W}, {CI, CO, k, k}};
  if (rng() % 4 != 0) in.push_back({CO});
  return make_case(p, in, {false, true, true}, {N, CO, HO, WO}, seed);
}

const Precision kPrecisions[] = {Precision::FP32, Precision::TF32, Precision::FP16};

// An NHWC 1x1 conv2d node, N x C_in x 7 x 7 -> C_out, with parameters p (for priority checks); stride 2
// gives the 4 x 4 output of a strided 1x1 (not one GEMM over the pixels).
NodeDesc nhwc_1x1_node(const Conv2DParams& p, int64_t n, int64_t ci, int64_t co, Precision prec) {
  const int64_t ho = p.stride_h == 1 ? 7 : 4;
  NodeDesc d = test::make_case_data(make_case(p, {{n, ci, 7, 7}, {co, ci, 1, 1}}, {false, true}, {n, co, ho, ho}, 1),
                                    prec).node;
  d.layout = Layout::NHWC;
  return d;
}

}  // namespace

CUDA_TEST_CASE("layout: NCHW <-> NHWC copies match the reference (odd sizes, C = 1, HW = 1, graph)") {
  test::require_registered("layout", {"transpose_tiled"});
  std::mt19937_64 rng(20261124);
  // fp16 with even C and H x W takes the 64x64 half2 tile: whole and partial tiles both ways
  const std::vector<Shape> fixed = {{1, 1, 1, 1}, {2, 1, 5, 7}, {1, 3, 1, 1}, {3, 33, 31, 1},
                                    {2, 64, 17, 19}, {1, 40, 65, 3}, {2, 128, 32, 32}, {1, 66, 10, 14},
                                    {3, 130, 9, 14}, {1, 10, 2, 1}};
  std::vector<Shape> shapes = fixed;
  for (int t = 0; t < scaled(30); ++t)
    shapes.push_back({uniform(rng, 1, 4), uniform(rng, 1, 70), uniform(rng, 1, 40), uniform(rng, 1, 40)});
  int ran = 0;
  for (const Shape& s : shapes)
    for (Precision p : {Precision::FP32, Precision::FP16})
      for (Layout from : {Layout::NCHW, Layout::NHWC}) {
        LayoutParams lp{from, from == Layout::NCHW ? Layout::NHWC : Layout::NCHW};
        const OpCase c = make_case(lp, {s}, {false}, s, 11 + ran);
        // The reference permutes raw memory the same way: compare without relayout.
        const auto names = check_case(c, p, {}, /*capture=*/ran % 2 == 0);
        CHECK(contains(names, "transpose_tiled"));
        ++ran;
      }
}

#ifdef INFER_WITH_CUDNN
CUDA_TEST_CASE("conv2d.cudnn matches the reference in NCHW and NHWC on random shapes (residual inputs too)") {
  test::require_registered("conv2d", {"cudnn", "cudnn_folded"});
  std::mt19937_64 rng(424242);
  int nhwc = 0, nchw = 0;
  int residual = 0;
  for (int t = 0; t < scaled(40); ++t) {
    OpCase c = random_conv(rng, 3000 + t);
    if (t % 4 == 1) c = test::with_residual(std::move(c)), ++residual;  // y = act(conv + bias + r)
    const Precision p = kPrecisions[t % 3];
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      const auto names = check_case_in_layout(c, p, layout, {"cudnn"}, /*capture=*/t % 2 == 0);
      CHECK_MESSAGE(contains(names, "cudnn"), test::describe(c));
      (layout == Layout::NHWC ? nhwc : nchw) += !names.empty();
    }
  }
  CHECK(nhwc == scaled(40));
  CHECK(nchw == scaled(40));
  CHECK(residual >= scaled(40) / 5);
}

// 1x1 stride-1 unpadded convolutions in NHWC as one GEMM over all pixels: odd and aligned channel
// counts, batches 1-5, bias or none, residual inputs, every activation kind; the default for aligned
// channels at batch >= 4 (where cudnn would run NHWC) unless the activation is ReLU (cudnn fuses it),
// below the NCHW variants otherwise.
CUDA_TEST_CASE("conv2d.gemm_1x1_nhwc matches the reference in NHWC (residual inputs too); its priority") {
  test::require_registered("conv2d", {"gemm_1x1_nhwc"});
  std::mt19937_64 rng(77);
  int residual = 0;
  for (int t = 0; t < scaled(60); ++t) {
    Conv2DParams p;
    p.activation = random_activation(rng);
    const int64_t N = uniform(rng, 1, 5);
    const int64_t CI = rng() % 2 ? 8 * uniform(rng, 1, 8) : uniform(rng, 1, 70);
    const int64_t CO = rng() % 2 ? 8 * uniform(rng, 1, 8) : uniform(rng, 1, 70);
    const int64_t H = uniform(rng, 1, 17), W = uniform(rng, 1, 17);
    std::vector<Shape> in{{N, CI, H, W}, {CO, CI, 1, 1}};
    if (rng() % 4 != 0) in.push_back({CO});
    OpCase c = make_case(p, in, {false, true, true}, {N, CO, H, W}, 7000 + t);
    if (t % 3 == 1) c = test::with_residual(std::move(c)), ++residual;
    const Precision prec = kPrecisions[t % 3];
    CHECK_MESSAGE(contains(check_case_in_layout(c, prec, Layout::NHWC, {"gemm_1x1_nhwc"}, t % 2 == 0),
                           "gemm_1x1_nhwc"),
                  test::describe(c));
  }
  CHECK(residual >= scaled(60) / 4);
  const KernelVariant* v = KernelRegistry::global().find("cuda", "conv2d", "gemm_1x1_nhwc");
  REQUIRE(v);
  Conv2DParams p;
  auto node = [&](int64_t n, int64_t ci, int64_t co, Precision prec) { return nhwc_1x1_node(p, n, ci, co, prec); };
  CHECK(v->priority_for(node(64, 96, 24, Precision::FP16)) == 55);
  p.activation.kind = ActivationKind::Relu;  // cudnn fuses bias + ReLU (+ residual): it stays ahead
  CHECK(v->priority_for(node(64, 96, 24, Precision::FP16)) == 45);
  p.activation.kind = ActivationKind::Clip;
  CHECK(v->priority_for(node(64, 96, 24, Precision::FP16)) == 55);
  p.activation.kind = ActivationKind::None;
  CHECK(v->priority_for(node(4, 32, 16, Precision::TF32)) == 55);
  CHECK(v->priority_for(node(2, 96, 24, Precision::FP16)) == 3);   // batch < 4
  CHECK(v->priority_for(node(64, 90, 24, Precision::FP16)) == 3);  // C_in not a multiple of 8
  CHECK(variant_applies(*v, node(64, 96, 24, Precision::FP16)));
  p.stride_h = p.stride_w = 2;  // stride 2: not one GEMM over the pixels
  CHECK_FALSE(variant_applies(*v, node(4, 8, 8, Precision::FP16)));
}

CUDA_TEST_CASE("conv2d.cudnn: grouped, depthwise and dilated convolutions in NCHW and NHWC") {
  std::mt19937_64 rng(20261128);
  int ran = 0, cases = 0;
  for (int t = 0; ran < scaled(40) && t < 4000; ++t) {
    const OpCase c = test::random_grouped_conv2d(rng, t % 3 == 0, 9000 + t);
    const auto& p = std::get<Conv2DParams>(c.params);
    if (p.pad.top != p.pad.bottom || p.pad.left != p.pad.right) continue;  // cuDNN: symmetric only
    ++ran;
    const Precision prec = kPrecisions[ran % 3];
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      const auto names = check_case_in_layout(c, prec, layout, {"cudnn"}, /*capture=*/ran % 2 == 0);
      CHECK_MESSAGE(contains(names, "cudnn"), test::describe(c));
      cases += !names.empty();
    }
  }
  CHECK(cases == 2 * scaled(40));
}

CUDA_TEST_CASE("conv2d.cudnn_folded: width folding is exact for C_in <= 4 and C_out <= 4 (NHWC)") {
  // (C_in, C_out, kernel, pad, H, W): VGG conv1_1-like, 1-channel input, generator output layers,
  // 5x5 kernels with pad 2, a 1x1 kernel, a valid (unpadded) 3x3.
  struct Geo {
    int64_t ci, co, k, pad, h, w;
  };
  const Geo geos[] = {{3, 64, 3, 1, 9, 16},  {3, 16, 3, 1, 5, 32}, {1, 8, 5, 2, 7, 16}, {64, 3, 3, 1, 6, 16},
                      {32, 1, 3, 1, 3, 8},   {3, 24, 1, 0, 4, 8},  {4, 40, 5, 2, 3, 24}, {2, 3, 3, 1, 5, 8}};
  int ran = 0;
  for (const Geo& g : geos)
    for (Precision p : {Precision::FP16, Precision::TF32})
      // relu, tanh, none, then ReLU6 (clip), hard_swish and silu (test_util.h's activation cases)
      for (int act_case : {1, 3, 0, 5, 7, 8}) {
        const ActivationKind act = test::activation_case(act_case).kind;
        Conv2DParams cp;
        cp.pad = {int(g.pad), int(g.pad), int(g.pad), int(g.pad)};
        cp.activation = test::activation_case(act_case);
        const int64_t HO = g.h + 2 * g.pad - g.k + 1, WO = g.w + 2 * g.pad - g.k + 1;
        std::vector<Shape> in{{2, g.ci, g.h, g.w}, {g.co, g.ci, g.k, g.k}};
        if (act != ActivationKind::None) in.push_back({g.co});
        const OpCase c = make_case(cp, in, {false, true, true}, {2, g.co, HO, WO}, 900 + ran);
        const auto names = check_case_in_layout(c, p, Layout::NHWC, {"cudnn_folded"}, ran % 2 == 0);
        CHECK_MESSAGE(contains(names, "cudnn_folded"), test::describe(c));
        ++ran;
      }
  // Not applicable: strided, W not a multiple of any fold, wide channels, NCHW, strict fp32.
  Conv2DParams s2;
  s2.stride_h = s2.stride_w = 2;
  s2.pad = {1, 1, 1, 1};
  const KernelVariant* f = KernelRegistry::global().find("cuda", "conv2d", "cudnn_folded");
  REQUIRE(f);
  CHECK(f->requires_pass == "fold_width");
  auto node_for = [](OpParams params, Shape x, Shape w, Shape y, Precision p, Layout l,
                     std::vector<float>& weights) {
    NodeDesc n{params, {x, w}, {y}, {nullptr, nullptr}, p, l};
    weights.assign(static_cast<size_t>(shape_numel(w)), 0.5f);
    n.constants[1] = weights.data();
    return n;
  };
  std::vector<float> wbuf;
  Conv2DParams p1;
  p1.pad = {1, 1, 1, 1};
  CHECK(variant_applies(*f, node_for(p1, {1, 3, 8, 16}, {8, 3, 3, 3}, {1, 8, 8, 16}, Precision::FP16,
                                     Layout::NHWC, wbuf)));
  CHECK_FALSE(variant_applies(*f, node_for(s2, {1, 3, 8, 16}, {8, 3, 3, 3}, {1, 8, 4, 8}, Precision::FP16,
                                           Layout::NHWC, wbuf)));
  CHECK_FALSE(variant_applies(*f, node_for(p1, {1, 3, 8, 15}, {8, 3, 3, 3}, {1, 8, 8, 15},
                                           Precision::FP16, Layout::NHWC, wbuf)));
  CHECK_FALSE(variant_applies(*f, node_for(p1, {1, 16, 8, 16}, {8, 16, 3, 3}, {1, 8, 8, 16},
                                           Precision::FP16, Layout::NHWC, wbuf)));
  CHECK_FALSE(variant_applies(*f, node_for(p1, {1, 3, 8, 16}, {8, 3, 3, 3}, {1, 8, 8, 16}, Precision::FP16,
                                           Layout::NCHW, wbuf)));
  CHECK_FALSE(variant_applies(*f, node_for(p1, {1, 3, 8, 16}, {8, 3, 3, 3}, {1, 8, 8, 16}, Precision::FP32,
                                           Layout::NHWC, wbuf)));
}

CUDA_TEST_CASE("conv_transpose2d.cudnn matches the reference in NCHW and NHWC (strides 1-3, output_padding)") {
  test::require_registered("conv_transpose2d", {"cudnn"});
  std::mt19937_64 rng(515151);
  int ran = 0;
  for (int t = 0; t < scaled(40); ++t) {
    const OpCase c = random_tconv(rng, 4000 + t);
    const Precision p = kPrecisions[t % 3];
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      const auto names = check_case_in_layout(c, p, layout, {"cudnn"}, t % 2 == 1);
      CHECK_MESSAGE(contains(names, "cudnn"), test::describe(c));
      ran += !names.empty();
    }
  }
  CHECK(ran == 2 * scaled(40));
  // The DCGAN layers at batch 2 (k4 s2 p1), fp16 NHWC.
  for (const auto& [n, ci, co] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{4, 64, 32}, {8, 32, 16}}) {
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = 2;
    p.pad = {1, 1, 1, 1};
    p.activation.kind = ActivationKind::Relu;
    const OpCase c = make_case(p, {{2, ci, n, n}, {ci, co, 4, 4}, {co}}, {false, true, true},
                               {2, co, 2 * n, 2 * n}, 77 + n);
    CHECK(contains(check_case_in_layout(c, Precision::FP16, Layout::NHWC, {"cudnn"}, true), "cudnn"));
  }
}

// conv + average pool through cuDNN: direct_sum (a box-sum pass, then cuDNN over the box sums) on
// every shape, any padding; fused_filter (the pre-convolved filter) where the padding is symmetric.
// Kernels 1-5, stride 1-2, pool 2-4, odd and aligned channel counts, odd images, both layouts.
CUDA_TEST_CASE("conv_pool2d.cudnn_direct_sum and cudnn_fused_filter match the reference in NCHW and NHWC") {
  test::require_registered("conv_pool2d", {"cudnn_direct_sum", "cudnn_fused_filter"});
  std::mt19937_64 rng(60606);
  const auto conv_out = [](int64_t in, int a, int b, int64_t k, int s) -> int64_t {
    return in + a + b < k ? 0 : (in + a + b - k) / s + 1;
  };
  int direct = 0, fused = 0, symmetric = 0;
  for (int t = 0; t < scaled(40); ++t) {
    ConvPool2DParams p;
    const int kh = uniform(rng, 1, 5), kw = rng() % 3 == 0 ? uniform(rng, 1, 5) : kh;
    p.conv.stride_h = p.conv.stride_w = rng() % 4 == 0 ? 2 : 1;
    p.conv.pad = {uniform(rng, 0, kh - 1), uniform(rng, 0, kw - 1), uniform(rng, 0, kh - 1), uniform(rng, 0, kw - 1)};
    const bool sym = t % 2 == 0;
    if (sym) p.conv.pad.bottom = p.conv.pad.top, p.conv.pad.right = p.conv.pad.left;
    p.conv.activation = random_activation(rng);
    p.pool = rng() % 5 == 0 ? 4 : uniform(rng, 2, 3);
    const int64_t N = uniform(rng, 1, 3);
    const int64_t CI = rng() % 2 == 0 ? 8 * uniform(rng, 1, 4) : uniform(rng, 1, 40);
    const int64_t CO = rng() % 2 == 0 ? 8 * uniform(rng, 1, 4) : uniform(rng, 1, 40);
    int64_t H, W, PH, PW;
    do {
      H = uniform(rng, 2, 19), W = uniform(rng, 2, 19);
      PH = conv_out(H, p.conv.pad.top, p.conv.pad.bottom, kh, p.conv.stride_h) / p.pool;
      PW = conv_out(W, p.conv.pad.left, p.conv.pad.right, kw, p.conv.stride_w) / p.pool;
    } while (PH < 1 || PW < 1);
    std::vector<Shape> in{{N, CI, H, W}, {CO, CI, kh, kw}};
    if (rng() % 4 != 0) in.push_back({CO});
    const OpCase c = make_case(p, in, {false, true, true}, {N, CO, PH, PW}, 6100 + t);
    const Precision pr = kPrecisions[t % 3];
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      const auto names =
          check_case_in_layout(c, pr, layout, {"cudnn_direct_sum", "cudnn_fused_filter"}, /*capture=*/t % 3 != 0);
      CHECK_MESSAGE(contains(names, "cudnn_direct_sum"), test::describe(c));
      direct += contains(names, "cudnn_direct_sum");
      fused += contains(names, "cudnn_fused_filter");
      if (sym) CHECK_MESSAGE(contains(names, "cudnn_fused_filter"), test::describe(c));
      symmetric += sym;
    }
  }
  CHECK(direct == 2 * scaled(40));
  CHECK(fused >= symmetric);
  CHECK(symmetric >= scaled(40));
  // the benchmark's conv3x3 p1 + avgpool2 at 32x32, C = 64, batch 2, fp16 NHWC, bias + ReLU (fused in cuDNN)
  ConvPool2DParams b;
  b.conv.pad = {1, 1, 1, 1};
  b.conv.activation.kind = ActivationKind::Relu;
  const OpCase c = make_case(b, {{2, 64, 32, 32}, {64, 64, 3, 3}, {64}}, {false, true, true}, {2, 64, 16, 16}, 6199);
  const auto names = check_case_in_layout(c, Precision::FP16, Layout::NHWC, {"cudnn_direct_sum", "cudnn_fused_filter"}, true);
  CHECK(names.size() == 2);
  // DenseNet's transition (1x1 conv + avgpool2, no bias): B is the pooled input, convolved at stride 1
  ConvPool2DParams t;
  for (Precision pr : kPrecisions) {
    const OpCase tc = make_case(t, {{4, 32, 14, 14}, {16, 32, 1, 1}}, {false, true}, {4, 16, 7, 7}, 6198);
    CHECK(check_case_in_layout(tc, pr, Layout::NHWC, {"cudnn_direct_sum", "cudnn_fused_filter"}, true).size() == 2);
  }
}
#endif  // INFER_WITH_CUDNN

// The tensor-core 1x1 GEMM with its epilogue inside: fp16, C_in and C_out multiples of 8 (C_in
// not a multiple of 32: a zero-padded last channel group; C_out past 64: several column blocks, the
// last one partly empty, e.g. 72 = 2 blocks of 5 n8 tiles), pixel counts past the last full 128-row
// block, bias or none, residual inputs, every activation kind (the fixed-epilogue kernels and the
// generic one); the default from batch 4 on few input channels.
CUDA_TEST_CASE("conv2d.mma_1x1_nhwc matches the reference (fp16, residual inputs too); where it applies") {
  test::require_registered("conv2d", {"mma_1x1_nhwc"});
  std::mt19937_64 rng(7711);
  int residual = 0, ran = 0, wide = 0;
  for (int t = 0; t < scaled(60); ++t) {
    Conv2DParams p;
    p.activation = random_activation(rng);
    const int64_t N = uniform(rng, 1, 5);
    const int64_t CI = 8 * (t % 5 == 4 ? uniform(rng, 9, 40) : uniform(rng, 1, 8));
    const int64_t CO = 8 * (t % 4 == 3 ? uniform(rng, 9, 30) : uniform(rng, 1, 8));
    const int64_t H = uniform(rng, 1, 23), W = t % 7 == 6 ? uniform(rng, 60, 90) : uniform(rng, 1, 17);
    std::vector<Shape> in{{N, CI, H, W}, {CO, CI, 1, 1}};
    if (rng() % 4 != 0) in.push_back({CO});
    OpCase c = make_case(p, in, {false, true, true}, {N, CO, H, W}, 7500 + t);
    if (t % 3 == 1) c = test::with_residual(std::move(c)), ++residual;
    const auto names = check_case_in_layout(c, Precision::FP16, Layout::NHWC, {"mma_1x1_nhwc"}, t % 2 == 0);
    CHECK_MESSAGE(contains(names, "mma_1x1_nhwc"), test::describe(c));
    ran += contains(names, "mma_1x1_nhwc");
    wide += CO > 64;
  }
  CHECK(ran == scaled(60));
  CHECK(residual >= scaled(60) / 4);
  CHECK(wide >= scaled(60) / 8);
  const KernelVariant* v = KernelRegistry::global().find("cuda", "conv2d", "mma_1x1_nhwc");
  REQUIRE(v);
  Conv2DParams p;
  auto node = [&](int64_t n, int64_t ci, int64_t co, Precision prec) { return nhwc_1x1_node(p, n, ci, co, prec); };
  CHECK(variant_applies(*v, node(64, 96, 24, Precision::FP16)));
  // the default where measured to win: few input channels, batch >= 4, no plain ReLU (cuDNN fuses it)
  CHECK(v->priority_for(node(64, 16, 96, Precision::FP16)) == 58);
  CHECK(v->priority_for(node(64, 96, 24, Precision::FP16)) == 58);
  CHECK(v->priority_for(node(64, 144, 24, Precision::FP16)) == 2);  // a long K: cuBLAS + the pass
  CHECK(v->priority_for(node(64, 64, 384, Precision::FP16)) == 2);
  CHECK(v->priority_for(node(2, 16, 96, Precision::FP16)) == 2);    // batch < 4
  p.activation.kind = ActivationKind::Clip;
  CHECK(v->priority_for(node(64, 16, 96, Precision::FP16)) == 58);
  p.activation.kind = ActivationKind::Relu;
  CHECK(v->priority_for(node(64, 16, 96, Precision::FP16)) == 2);
  p.activation.kind = ActivationKind::Silu;
  CHECK(v->priority_for(node(64, 16, 96, Precision::FP16)) == 2);
  p.activation.kind = ActivationKind::None;
  CHECK_FALSE(variant_applies(*v, node(64, 96, 24, Precision::TF32)));  // fp16 only
  CHECK_FALSE(variant_applies(*v, node(64, 90, 24, Precision::FP16)));  // C_in % 8
  CHECK_FALSE(variant_applies(*v, node(64, 96, 20, Precision::FP16)));  // C_out % 8
  NodeDesc nchw = node(64, 96, 24, Precision::FP16);
  nchw.layout = Layout::NCHW;
  CHECK_FALSE(variant_applies(*v, nchw));
  p.stride_h = p.stride_w = 2;  // stride 2: not one GEMM over the pixels
  CHECK_FALSE(variant_applies(*v, node(4, 8, 8, Precision::FP16)));
}

// The projection of a 1x1 latent in NHWC (its weight re-laid out [C_in][KH][KW][C_out]): the gemv path
// at batch <= 4 (bias indexed by the channel-last column) and the GEMM path above, every precision.
CUDA_TEST_CASE("conv_transpose2d.projection in NHWC: gemv (batch <= 4) and GEMM paths match the reference") {
  test::require_registered("conv_transpose2d", {"projection"});
  ConvTranspose2DParams p;  // k4 s1 p0: 1x1 -> 4x4
  p.activation.kind = ActivationKind::Relu;
  for (Precision pr : test::kAllPrecisions)
    for (int64_t n : {1, 4, 6}) {
      CAPTURE(n);
      const OpCase c = make_case(p, {{n, 36, 1, 1}, {36, 24, 4, 4}, {24}}, {false, true, true}, {n, 24, 4, 4}, 9400 + n);
      CHECK(contains(check_case_in_layout(c, pr, Layout::NHWC, {"projection"}, n == 4), "projection"));
    }
}

// The kernel-segregated stride-2 transposed convolution as our own NHWC implicit GEMM: every phase of
// the 4x4 / stride-2 / pad-1 layer, odd sizes (partial row and column tiles, windows at every image
// edge), C_in not a multiple of 32 (zero-padded channel groups), one and two 64-channel blocks.
CUDA_TEST_CASE("conv_transpose2d.segregated_mma_nhwc matches the reference (fp16, 4x4 stride 2 pad 1)") {
  test::require_registered("conv_transpose2d", {"segregated_mma_nhwc"});
  std::mt19937_64 rng(737373);
  int ran = 0;
  for (int t = 0; t < scaled(24); ++t) {
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = 2;
    p.pad = {1, 1, 1, 1};
    p.activation = random_activation(rng);
    const int64_t N = uniform(rng, 1, 3), CI = 8 * uniform(rng, 1, 12), CO = 64 * uniform(rng, 1, 2);
    const int64_t H = uniform(rng, 1, t % 4 == 3 ? 70 : 19), W = uniform(rng, 1, t % 4 == 2 ? 80 : 19);
    std::vector<Shape> in{{N, CI, H, W}, {CI, CO, 4, 4}};
    if (rng() % 3 != 0) in.push_back({CO});
    const OpCase c = make_case(p, in, {false, true, true}, {N, CO, 2 * H, 2 * W}, 9300 + t);
    const auto names =
        check_case_in_layout(c, Precision::FP16, Layout::NHWC, {"segregated_mma_nhwc"}, t % 2 == 0);
    CHECK_MESSAGE(contains(names, "segregated_mma_nhwc"), test::describe(c));
    ran += !names.empty();
  }
  CHECK(ran == scaled(24));
  // not applicable: stride 1, C_out not a multiple of 64, tf32
  const KernelVariant* v = KernelRegistry::global().find("cuda", "conv_transpose2d", "segregated_mma_nhwc");
  REQUIRE(v != nullptr);
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = 2;
  p.pad = {1, 1, 1, 1};
  test::CaseData ok = test::make_case_data(make_case(p, {{1, 16, 5, 5}, {16, 64, 4, 4}}, {false, true}, {1, 64, 10, 10}, 1),
                                           Precision::FP16);
  ok.node.layout = Layout::NHWC;
  CHECK(variant_applies(*v, ok.node));
  ok.node.precision = Precision::TF32;
  CHECK_FALSE(variant_applies(*v, ok.node));
  test::CaseData narrow =
      test::make_case_data(make_case(p, {{1, 16, 5, 5}, {16, 32, 4, 4}}, {false, true}, {1, 32, 10, 10}, 2),
                           Precision::FP16);
  narrow.node.layout = Layout::NHWC;
  CHECK_FALSE(variant_applies(*v, narrow.node));
}

namespace {

// The rest of a random conv2d case once its parameters and channels are drawn: an image of at most
// `hmax` pixels a side that the kernel fits (with the padding), the output size, and a bias unless
// rng() % bias_one_in == 0.
OpCase finish_random_conv(std::mt19937_64& rng, const Conv2DParams& p, int kh, int kw, int64_t N, int64_t CI,
                          int64_t CO, int64_t hmax, int bias_one_in, uint64_t seed) {
  int64_t H, W;
  do {
    H = uniform(rng, 1, hmax), W = uniform(rng, 1, hmax);
  } while (H + p.pad.top + p.pad.bottom < kh || W + p.pad.left + p.pad.right < kw);
  const int64_t HO = (H + p.pad.top + p.pad.bottom - kh) / p.stride_h + 1;
  const int64_t WO = (W + p.pad.left + p.pad.right - kw) / p.stride_w + 1;
  std::vector<Shape> in{{N, CI, H, W}, {CO, CI, kh, kw}};
  if (rng() % bias_one_in != 0) in.push_back({CO});
  return make_case(p, in, {false, true, true}, {N, CO, HO, WO}, seed);
}

// A random convolution with few output channels (C_out 1..8) in NHWC: kernel 1..5, stride 1..2, any
// padding edge, every activation, bias or not, batch 1..3, C_in and the map size drawn by the caller's
// rules (`ci`, at most `hmax` pixels a side).
OpCase random_small_cout(std::mt19937_64& rng, int64_t ci, int64_t hmax, uint64_t seed) {
  Conv2DParams p;
  const int kh = uniform(rng, 1, 5), kw = uniform(rng, 1, 5);
  p.stride_h = uniform(rng, 1, 2), p.stride_w = uniform(rng, 1, 2);
  p.pad = {uniform(rng, 0, kh - 1), uniform(rng, 0, kw - 1), uniform(rng, 0, kh - 1), uniform(rng, 0, kw - 1)};
  p.activation = random_activation(rng);
  const int64_t N = uniform(rng, 1, 3), CO = uniform(rng, 1, 8);
  return finish_random_conv(rng, p, kh, kw, N, ci, CO, hmax, 3, seed);
}

}  // namespace

CUDA_TEST_CASE("conv2d.direct_small_cout_nhwc matches the reference (C_out 1..8, any stride and padding)") {
  test::require_registered("conv2d", {"direct_small_cout_nhwc"});
  std::mt19937_64 rng(717171);
  int ran = 0;
  for (int t = 0; t < scaled(40); ++t) {
    const int64_t ci = rng() % 2 ? 8 * uniform(rng, 1, 8) : uniform(rng, 1, 40);
    const OpCase c = random_small_cout(rng, ci, 20, 8000 + t);
    const auto names = check_case_in_layout(c, kPrecisions[t % 3], Layout::NHWC, {"direct_small_cout_nhwc"}, t % 2 == 0);
    CHECK_MESSAGE(contains(names, "direct_small_cout_nhwc"), test::describe(c));
    ran += !names.empty();
  }
  CHECK(ran == scaled(40));
}

// The tensor-core implicit GEMM for few output channels: fp16 only, C_in a multiple of 8 (groups of 32
// channels, the last zero-padded when C_in % 32 != 0), taps outside the image at every padding edge,
// pixels past the last full 64-pixel warp tile, and images large enough for the grid-stride loop.
CUDA_TEST_CASE("conv2d.mma_small_cout_nhwc matches the reference (fp16, C_out 1..8, any stride and padding)") {
  test::require_registered("conv2d", {"mma_small_cout_nhwc"});
  std::mt19937_64 rng(727272);
  int ran = 0;
  for (int t = 0; t < scaled(40); ++t) {
    const int64_t ci = 8 * (t % 4 == 3 ? 8 : uniform(rng, 1, 6));
    const OpCase c = random_small_cout(rng, ci, t % 8 == 7 ? 90 : 21, 9000 + t);  // some span many blocks
    const auto names = check_case_in_layout(c, Precision::FP16, Layout::NHWC, {"mma_small_cout_nhwc"}, t % 2 == 0);
    CHECK_MESSAGE(contains(names, "mma_small_cout_nhwc"), test::describe(c));
    ran += !names.empty();
  }
  CHECK(ran == scaled(40));
  // every kernel on purpose: the rows kernel (stride 1, C_in <= 128, KH x KW x C_out <= 32: 1x1 -> 1,
  // 3x3 -> 3 over two 64-column strips, 5x5 -> 1 with padding 2, C_in 24 (one zero-padded group), 128
  // (four groups) over many strips of rows, padding 2 on a 3x3), the shared-memory tile (stride 1 past
  // those limits; 4 rows per block, or 1 when a 5x5 kernel's weights leave less room; several column
  // tiles, zero-padded channel groups; C_in 136) and the gather kernel (stride 2)
  struct Fixed {
    int64_t N, CI, H, W, CO;
    int k, stride, pad;
  };
  const Fixed fixed[] = {{2, 64, 9, 70, 3, 3, 1, 1}, {1, 64, 11, 13, 4, 5, 1, 2}, {1, 40, 7, 66, 8, 3, 1, 1},
                         {3, 8, 5, 9, 1, 1, 1, 0},   {2, 64, 12, 75, 3, 5, 1, 0}, {2, 96, 13, 17, 5, 3, 2, 1},
                         {1, 16, 6, 7, 1, 5, 1, 2},  {1, 24, 19, 130, 2, 3, 1, 2}, {2, 128, 40, 37, 3, 3, 1, 1},
                         {2, 136, 9, 20, 3, 3, 1, 1}};
  for (const Fixed& f : fixed) {
    Conv2DParams p;
    p.stride_h = p.stride_w = f.stride;
    p.pad = {f.pad, f.pad, f.pad, f.pad};
    p.activation.kind = ActivationKind::Tanh;
    const int64_t HO = (f.H + 2 * f.pad - f.k) / f.stride + 1, WO = (f.W + 2 * f.pad - f.k) / f.stride + 1;
    const OpCase c = make_case(p, {{f.N, f.CI, f.H, f.W}, {f.CO, f.CI, f.k, f.k}, {f.CO}}, {false, true, true},
                               {f.N, f.CO, HO, WO}, 9200 + f.CI + f.k);
    CHECK_MESSAGE(contains(check_case_in_layout(c, Precision::FP16, Layout::NHWC, {"mma_small_cout_nhwc"}, true),
                           "mma_small_cout_nhwc"),
                  test::describe(c));
  }
  // not applicable: fp32 / tf32, C_in not a multiple of 8
  const KernelVariant* v = KernelRegistry::global().find("cuda", "conv2d", "mma_small_cout_nhwc");
  REQUIRE(v != nullptr);
  Conv2DParams p;
  const OpCase ok = make_case(p, {{1, 16, 5, 5}, {3, 16, 3, 3}}, {false, true}, {1, 3, 3, 3}, 9100);
  test::CaseData d = test::make_case_data(ok, Precision::FP16);
  d.node.layout = Layout::NHWC;
  CHECK(variant_applies(*v, d.node));
  d.node.precision = Precision::TF32;
  CHECK_FALSE(variant_applies(*v, d.node));
  const OpCase odd = make_case(p, {{1, 12, 5, 5}, {3, 12, 3, 3}}, {false, true}, {1, 3, 3, 3}, 9101);
  test::CaseData e = test::make_case_data(odd, Precision::FP16);
  e.node.layout = Layout::NHWC;
  CHECK_FALSE(variant_applies(*v, e.node));
}

// The tensor-core implicit GEMM for few input channels: fp16, C_in 1..4 (odd K = KH x KW x C_in, zero-padded
// to 16), C_out a multiple of 8 up to 136 (several 64-channel passes, a partial last one), kernels 1..7,
// strides 1..4, dilation 1..2, every padding edge, pixels past the last full 32-pixel warp tile, and
// images large enough for the grid-stride loop.
CUDA_TEST_CASE("conv2d.mma_small_cin_nhwc matches the reference (fp16, C_in 1..4, any stride, padding, dilation)") {
  test::require_registered("conv2d", {"mma_small_cin_nhwc"});
  std::mt19937_64 rng(737373);
  int ran = 0;
  for (int t = 0; t < scaled(48); ++t) {
    Conv2DParams p;
    const int kh = uniform(rng, 1, 7), kw = rng() % 2 ? kh : uniform(rng, 1, 7);
    p.stride_h = uniform(rng, 1, 4), p.stride_w = rng() % 2 ? p.stride_h : uniform(rng, 1, 4);
    p.dilation_h = t % 5 == 4 ? 2 : 1, p.dilation_w = t % 7 == 6 ? 2 : 1;
    const int sy = (kh - 1) * p.dilation_h + 1, sx = (kw - 1) * p.dilation_w + 1;
    p.pad = {uniform(rng, 0, sy - 1), uniform(rng, 0, sx - 1), uniform(rng, 0, sy - 1), uniform(rng, 0, sx - 1)};
    p.activation = random_activation(rng);
    const int64_t N = uniform(rng, 1, 3), CI = uniform(rng, 1, 4), CO = 8 * (t % 6 == 5 ? 17 : uniform(rng, 1, 9));
    const int64_t hmax = t % 8 == 7 ? 80 : 19;
    int64_t H, W;
    do {
      H = uniform(rng, 1, hmax), W = uniform(rng, 1, hmax);
    } while (H + p.pad.top + p.pad.bottom < sy || W + p.pad.left + p.pad.right < sx);
    const int64_t HO = (H + p.pad.top + p.pad.bottom - sy) / p.stride_h + 1;
    const int64_t WO = (W + p.pad.left + p.pad.right - sx) / p.stride_w + 1;
    std::vector<Shape> in{{N, CI, H, W}, {CO, CI, kh, kw}};
    if (rng() % 3 != 0) in.push_back({CO});
    const OpCase c = make_case(p, in, {false, true, true}, {N, CO, HO, WO}, 9300 + t);
    const auto names = check_case_in_layout(c, Precision::FP16, Layout::NHWC, {"mma_small_cin_nhwc"}, t % 2 == 0);
    CHECK_MESSAGE(contains(names, "mma_small_cin_nhwc"), test::describe(c));
    ran += !names.empty();
  }
  CHECK(ran == scaled(48));
  // VGG's conv1_1 shape (3 -> 64, 3x3 pad 1) and an AlexNet-like stem (11x11 stride 4, K = 363)
  struct Fixed {
    int64_t N, CI, H, W, CO;
    int k, stride, pad;
  };
  for (const Fixed& f : {Fixed{2, 3, 33, 35, 64, 3, 1, 1}, Fixed{1, 3, 47, 45, 64, 11, 4, 2}, Fixed{2, 1, 28, 28, 8, 5, 1, 2}}) {
    Conv2DParams p;
    p.stride_h = p.stride_w = f.stride;
    p.pad = {f.pad, f.pad, f.pad, f.pad};
    p.activation.kind = ActivationKind::Relu;
    const int64_t HO = (f.H + 2 * f.pad - f.k) / f.stride + 1, WO = (f.W + 2 * f.pad - f.k) / f.stride + 1;
    const OpCase c = make_case(p, {{f.N, f.CI, f.H, f.W}, {f.CO, f.CI, f.k, f.k}, {f.CO}}, {false, true, true},
                               {f.N, f.CO, HO, WO}, 9400 + f.k);
    CHECK_MESSAGE(contains(check_case_in_layout(c, Precision::FP16, Layout::NHWC, {"mma_small_cin_nhwc"}, true),
                           "mma_small_cin_nhwc"),
                  test::describe(c));
  }
  // not applicable: tf32, NCHW, C_in 5, C_out not a multiple of 8
  const KernelVariant* v = KernelRegistry::global().find("cuda", "conv2d", "mma_small_cin_nhwc");
  REQUIRE(v != nullptr);
  Conv2DParams p;
  const auto node_of = [&](int64_t ci, int64_t co) {
    test::CaseData d = test::make_case_data(
        make_case(p, {{1, ci, 5, 5}, {co, ci, 3, 3}}, {false, true}, {1, co, 3, 3}, 9500), Precision::FP16);
    d.node.layout = Layout::NHWC;
    return d;
  };
  test::CaseData d = node_of(3, 16);
  CHECK(variant_applies(*v, d.node));
  d.node.precision = Precision::TF32;
  CHECK_FALSE(variant_applies(*v, d.node));
  d.node.precision = Precision::FP16;
  d.node.layout = Layout::NCHW;
  CHECK_FALSE(variant_applies(*v, d.node));
  CHECK_FALSE(variant_applies(*v, node_of(5, 16).node));
  CHECK_FALSE(variant_applies(*v, node_of(3, 12).node));
}

CUDA_TEST_CASE("conv2d.depthwise matches the reference in NHWC and NCHW (vector and scalar channels)") {
  test::require_registered("conv2d", {"depthwise"});
  std::mt19937_64 rng(20261127);
  int ran = 0;
  for (int t = 0; t < scaled(60); ++t) {
    const OpCase c = test::random_grouped_conv2d(rng, true, 8000 + t);
    for (Precision p : {Precision::FP32, Precision::FP16})
      for (Layout layout : {Layout::NHWC, Layout::NCHW}) {
        const auto names = check_case_in_layout(c, p, layout, {"depthwise"}, /*capture=*/t % 2 == 0);
        CHECK_MESSAGE(contains(names, "depthwise"), test::describe(c));
        ran += !names.empty();
      }
  }
  CHECK(ran == 4 * scaled(60));
}

CUDA_TEST_CASE("resize in NHWC matches the reference") {
  std::mt19937_64 rng(141414);
  for (int t = 0; t < scaled(40); ++t) {
    const test::RandomResize r = test::random_resize(rng);
    const OpCase rc = make_case(r.p, {r.x}, {false}, r.y, 900 + t);
    CHECK(contains(check_case_in_layout(rc, kPrecisions[t % 3], Layout::NHWC, {}, t % 2 == 0), "direct"));
  }
}

CUDA_TEST_CASE("depth_to_space and concat in NHWC match the reference (int8 transposed convolutions' interleave)") {
  std::mt19937_64 rng(20261130);
  for (int t = 0; t < scaled(40); ++t) {
    const DepthToSpaceParams d{uniform(rng, 1, 4), static_cast<DepthToSpaceMode>(t % 2)};
    const int64_t co = t % 5 == 0 ? uniform(rng, 17, 70) : uniform(rng, 1, 9), n = uniform(rng, 1, 3);
    const int64_t h = uniform(rng, 1, 9), w = uniform(rng, 1, 9);
    const OpCase dc = make_case(d, {{n, co * d.block * d.block, h, w}}, {false}, {n, co, h * d.block, w * d.block},
                                1200 + t);
    CHECK(contains(check_case_in_layout(dc, kPrecisions[t % 3], Layout::NHWC, {}, t % 2 == 0), "direct"));
    // a channel concat of 1-4 inputs (the phases), or along H / W
    ConcatParams cp;
    cp.axis = t % 4 == 3 ? uniform(rng, 2, 3) : 1;
    std::vector<Shape> ins;
    Shape out{n, 0, h, w};
    if (cp.axis != 1) out[1] = co, out[size_t(cp.axis)] = 0;
    for (int k = 0, m = uniform(rng, 1, 4); k < m; ++k) {
      Shape in{n, cp.axis == 1 ? uniform(rng, 1, 40) : co, h, w};
      if (cp.axis != 1) in[size_t(cp.axis)] = uniform(rng, 1, 9);
      out[size_t(cp.axis)] += in[size_t(cp.axis)];
      ins.push_back(in);
    }
    const OpCase cc = make_case(cp, ins, std::vector<bool>(ins.size(), false), out, 1300 + t);
    CHECK(contains(check_case_in_layout(cc, kPrecisions[t % 3], Layout::NHWC, {}, t % 2 == 1), "direct"));
  }
}

CUDA_TEST_CASE("pool2d, activation and add in NHWC match the reference") {
  std::mt19937_64 rng(616161);
  for (int t = 0; t < scaled(40); ++t) {
    Pool2DParams p;
    p.kind = rng() % 2 ? PoolKind::Max : PoolKind::Average;
    p.kernel_h = uniform(rng, 1, 4), p.kernel_w = uniform(rng, 1, 4);
    p.stride_h = uniform(rng, 1, 3), p.stride_w = uniform(rng, 1, 3);
    p.pad = {uniform(rng, 0, p.kernel_h - 1), uniform(rng, 0, p.kernel_w - 1),
             uniform(rng, 0, p.kernel_h - 1), uniform(rng, 0, p.kernel_w - 1)};
    p.count_include_pad = rng() % 2;
    const int64_t N = uniform(rng, 1, 3), C = rng() % 2 ? 8 * uniform(rng, 1, 4) : uniform(rng, 1, 37);
    int64_t H, W;
    do {
      H = uniform(rng, 1, 14), W = uniform(rng, 1, 14);
    } while (H + p.pad.top + p.pad.bottom < p.kernel_h || W + p.pad.left + p.pad.right < p.kernel_w);
    const int64_t HO = (H + p.pad.top + p.pad.bottom - p.kernel_h) / p.stride_h + 1;
    const int64_t WO = (W + p.pad.left + p.pad.right - p.kernel_w) / p.stride_w + 1;
    const Precision pr = kPrecisions[t % 3];
    const OpCase pc = make_case(p, {{N, C, H, W}}, {false}, {N, C, HO, WO}, 500 + t);
    CHECK(contains(check_case_in_layout(pc, pr, Layout::NHWC, {}, t % 2 == 0), "direct"));
    const Shape s{N, C, H, W};
    ActivationParams ap;
    ap.activation = random_activation(rng);
    CHECK(contains(check_case_in_layout(make_case(ap, {s}, {false}, s, 600 + t), pr, Layout::NHWC), "direct"));
    AddParams add;
    add.activation = random_activation(rng);
    CHECK(contains(check_case_in_layout(make_case(add, {s, s}, {false, false}, s, 700 + t), pr, Layout::NHWC),
                   "direct"));
  }
}

CUDA_TEST_CASE("binary broadcast in NHWC matches the reference (constants stay NCHW)") {
  std::mt19937_64 rng(717171);
  for (int t = 0; t < scaled(80); ++t) {
    const test::RandomBinary r = test::random_binary(rng, t, 4, 4);
    const Shape& other = r.b_first ? r.a : r.b;
    const bool constant = (other.size() < 4 || other[0] == 1) && rng() % 2;
    const std::vector<bool> flags = r.b_first ? std::vector<bool>{constant, false} : std::vector<bool>{false, constant};
    OpCase c = make_case(r.p, {r.a, r.b}, flags, r.y, 800 + t);
    if (r.p.kind == BinaryKind::Div) c.fill = [](std::vector<std::vector<float>>& in) { test::keep_from_zero(in[1]); };
    CHECK(contains(check_case_in_layout(c, kPrecisions[t % 3], Layout::NHWC, {}, t % 2 == 0), "broadcast"));
  }
}

// ---- whole sessions -----------------------------------------------------------------------------

namespace {

Model zoo_model(const std::string& name, int image_size) {
  zoo::ZooOptions zo;
  zo.image_size = image_size;
  return Model::from_bytes(zoo::build(name, zo).finish(), name);
}

std::vector<Tensor> inputs_for(const Session& s, uint64_t seed) {
  std::vector<Tensor> in;
  for (const TensorInfo& t : s.inputs()) {
    Tensor x(t.shape);
    x.data = test::random_vector(x.data.size(), seed++);
    in.push_back(std::move(x));
  }
  return in;
}

Session session(const Model& m, const std::string& backend, int64_t batch, Precision p, bool channels_last,
                bool fold_width = true) {
  SessionOptions o;
  o.backend = backend;
  o.batch = batch;
  o.precision = p;
  o.passes.channels_last = channels_last;
  o.passes.fold_width = fold_width;
  return Session(m, o);
}

}  // namespace

CUDA_TEST_CASE("channels_last: zoo models in fp16 and tf32 within 1e-2 of the reference in both layouts") {
  struct Z {
    const char* name;
    int image;
    int64_t batch;
  };
  // Batch 8 (where the channels-last kernels are the default) and batch 2 (mostly the NCHW kernels);
  // classifiers at small images whose widths fold (32 = 4 * 8).
  for (const Z& z : {Z{"lenet5", 28, 8}, Z{"alexnet", 63, 8}, Z{"vgg11", 32, 8}, Z{"vgg16", 32, 2},
                     Z{"dcgan", 0, 8}, Z{"ebgan", 0, 8}, Z{"ebgan", 0, 2}}) {
    CAPTURE(z.name);
    CAPTURE(z.batch);
    const Model m = zoo_model(z.name, z.image);
    Session ref = session(m, "reference", z.batch, Precision::FP32, false);
    const std::vector<Tensor> in = inputs_for(ref, 31);
    const std::vector<float> want = ref.run(in)[0].data;
    for (Precision p : {Precision::FP16, Precision::TF32}) {
      CAPTURE(precision_name(p));
      for (bool cl : {true, false}) {
        CAPTURE(cl);
        Session s = session(m, "cuda", z.batch, p, cl);
        const std::vector<float> got = s.run(in)[0].data;
        CHECK(test::rel_error(got, want) <= 1e-2);
        CHECK(s.run(in)[0].data == got);  // replays are deterministic
        int nhwc = 0, conversions = 0;
        for (const NodeInfo& n : s.nodes()) {
          nhwc += n.layout == Layout::NHWC;
          conversions += n.op == "layout";
          if (n.op == "layout") CHECK(n.variant == "transpose_tiled");
        }
        if (!cl) {
          CHECK(nhwc == 0);
          CHECK(conversions == 0);
          CHECK(s.passes()[3] == "channels_last: off");
        } else {
          CHECK(s.passes()[3].rfind("channels_last: ", 0) == 0);
          // into NHWC or out of it; a [N, C, 1, 1] tensor is the same bytes in both layouts and never
          // converted: a generator's latent (its first layer runs NHWC when its reader does), a
          // classifier's last 1x1 map before flatten (VGG-11 at 32x32)
          const bool latent = in[0].shape.size() == 4 && in[0].shape[2] == 1 && in[0].shape[3] == 1;
          if (nhwc > 0) CHECK(conversions >= 1);
          if (latent) CHECK(s.nodes().front().op != "layout");
        }
        // The plan and the profile say each tensor's and node's layout.
        const detail::Plan& plan = detail::plan_of(s);
        int nhwc_tensors = 0;
        for (const detail::PlannedTensor& t : plan.tensors) nhwc_tensors += t.layout == Layout::NHWC;
        CHECK((nhwc_tensors > 0) == (nhwc > 0));
        const Profile prof = s.profile(in, 1);
        for (size_t i = 0; i < prof.nodes.size(); ++i)
          CHECK(prof.nodes[i].layout == layout_name(s.nodes()[i].layout));
      }
    }
  }
}

// fuse_input_epilogue on the GPU: the rows kernel of mma_small_cout_nhwc applies the producer's bias and
// ReLU to each loaded value (the padding stays zero), against the reference's relu(x + b_in[c]), at one
// and several strips, padding 2, C_in 24 (a zero-padded group), 8 and 128, 5x5 and 1x1; nodes the rows
// kernel does not take (stride 2, an input activation other than ReLU) are refused; and EB-GAN at batch
// 8 fp16 moves tconv7's bias + ReLU into conv8, within 1e-2 of the reference, the same as with the pass off.
CUDA_TEST_CASE("fuse_input_epilogue: mma_small_cout_nhwc's rows kernel and EB-GAN at batch 8") {
  test::require_registered("conv2d", {"mma_small_cout_nhwc"});
  struct Fixed {
    int64_t N, CI, H, W, CO;
    int k, pad;
  };
  const Fixed fixed[] = {{2, 64, 9, 70, 3, 3, 1}, {1, 24, 19, 130, 2, 3, 2}, {2, 128, 40, 37, 3, 3, 1},
                         {1, 40, 6, 7, 1, 5, 2},  {3, 8, 5, 9, 1, 1, 0},    {64, 64, 11, 13, 3, 3, 1}};
  for (const Fixed& f : fixed) {
    Conv2DParams p;
    p.pad = {f.pad, f.pad, f.pad, f.pad};
    p.activation.kind = ActivationKind::Tanh;
    p.input_epilogue = true;
    p.input_activation.kind = ActivationKind::Relu;
    const int64_t HO = f.H + 2 * f.pad - f.k + 1, WO = f.W + 2 * f.pad - f.k + 1;
    const OpCase c = make_case(p, {{f.N, f.CI, f.H, f.W}, {f.CO, f.CI, f.k, f.k}, {f.CO}, {f.CI}},
                               {false, true, true, true}, {f.N, f.CO, HO, WO}, 9300 + f.CI + f.k);
    CHECK_MESSAGE(contains(check_case_in_layout(c, Precision::FP16, Layout::NHWC, {"mma_small_cout_nhwc"}, true),
                           "mma_small_cout_nhwc"),
                  test::describe(c));
  }
  const KernelVariant* v = KernelRegistry::global().find("cuda", "conv2d", "mma_small_cout_nhwc");
  REQUIRE(v != nullptr);
  // the ReLU is compiled into the kernel: other input activations stay with the producer's pass
  for (const ActivationKind other : {ActivationKind::LeakyRelu, ActivationKind::Tanh, ActivationKind::None}) {
    Conv2DParams p;
    p.pad = {1, 1, 1, 1};
    p.input_epilogue = true;
    p.input_activation.kind = other;
    const OpCase c = make_case(p, {{1, 16, 9, 9}, {3, 16, 3, 3}, {3}, {16}}, {false, true, true, true},
                               {1, 3, 9, 9}, 9380);
    test::CaseData d = test::make_case_data(c, Precision::FP16);
    d.node.layout = Layout::NHWC;
    CHECK_FALSE(variant_applies(*v, d.node));
  }
  Conv2DParams s2;
  s2.stride_h = s2.stride_w = 2;
  s2.pad = {1, 1, 1, 1};
  s2.input_epilogue = true;
  s2.input_activation.kind = ActivationKind::Relu;
  const OpCase strided = make_case(s2, {{1, 16, 9, 9}, {3, 16, 3, 3}, {3}, {16}}, {false, true, true, true},
                                   {1, 3, 5, 5}, 9390);
  test::CaseData d = test::make_case_data(strided, Precision::FP16);
  d.node.layout = Layout::NHWC;
  CHECK_FALSE(variant_applies(*v, d.node));
  s2.input_epilogue = false;
  d.node.params = s2;
  d.node.input_shapes.pop_back();
  d.node.constants.pop_back();
  CHECK(variant_applies(*v, d.node));  // the gather kernel takes it without the input epilogue

  const Model m = zoo_model("ebgan", 0);
  Session ref = session(m, "reference", 8, Precision::FP32, false);
  const std::vector<Tensor> in = inputs_for(ref, 57);
  const std::vector<float> want = ref.run(in)[0].data;
  Session fused = session(m, "cuda", 8, Precision::FP16, true);
  const std::vector<std::string>& passes = fused.passes();
  CHECK(std::find(passes.begin(), passes.end(),
                  "fuse_input_epilogue: 1 bias + activation epilogue moved into the reading conv2d (tconv7 -> conv8)") !=
        passes.end());
  const std::vector<float> got = fused.run(in)[0].data;
  CHECK(test::rel_error(got, want) <= 1e-2);
  SessionOptions o;
  o.backend = "cuda";
  o.batch = 8;
  o.precision = Precision::FP16;
  o.passes.fuse_input_epilogue = false;
  Session plain(m, o);
  CHECK(std::find(plain.passes().begin(), plain.passes().end(), "fuse_input_epilogue: off") != plain.passes().end());
  CHECK(test::rel_error(plain.run(in)[0].data, got) <= 2e-3);
}

CUDA_TEST_CASE("channels_last at batch 8: VGG and the generators run their convolutions NHWC") {
#ifdef INFER_WITH_CUDNN
  for (const char* name : {"vgg11", "dcgan"}) {
    CAPTURE(name);
    const Model m = zoo_model(name, std::string(name) == "vgg11" ? 32 : 0);
    Session s = session(m, "cuda", 8, Precision::FP16, true);
    int nhwc_convs = 0;
    for (const NodeInfo& n : s.nodes())
      if ((n.op == "conv2d" || n.op == "conv_transpose2d") && n.layout == Layout::NHWC) ++nhwc_convs;
    CHECK(nhwc_convs >= 3);
    // Graph inputs and outputs stay NCHW: the first and last nodes are conversions, or NCHW nodes (the
    // first may also read a latent [N, C, 1, 1] in NHWC: the same bytes).
    const bool latent = s.inputs()[0].shape[2] == 1 && s.inputs()[0].shape[3] == 1;
    CHECK((s.nodes().front().op == "layout" || s.nodes().front().layout == Layout::NCHW || latent));
    CHECK((s.nodes().back().op == "layout" || s.nodes().back().layout == Layout::NCHW));
  }
#endif
  // fp32 (strict) keeps NCHW everywhere.
  const Model m = zoo_model("vgg11", 32);
  Session s = session(m, "cuda", 8, Precision::FP32, true);
  for (const NodeInfo& n : s.nodes()) CHECK(n.layout == Layout::NCHW);
  CHECK(s.passes()[3] == "channels_last: not used (cuda in fp32 keeps NCHW)");
}

#ifdef INFER_WITH_CUDNN
CUDA_TEST_CASE("fold_width: a 3 -> 4 channel convolution runs width-folded at batch 8 when the pass is on, same "
               "values when off; VGG conv1_1 takes mma_small_cin_nhwc") {
  // C_out = 4 and C_in = 3: neither mma_small_cin_nhwc (C_out % 8) nor mma_small_cout_nhwc (C_in % 8)
  // takes it, so folding is the NHWC choice.
  ModelBuilder b("fold");
  const int x = b.input("x", {-1, 3, 32, 32});
  Conv2DParams p;
  p.pad = {1, 1, 1, 1};
  p.activation.kind = ActivationKind::Relu;
  const int w = b.constant("w", {4, 3, 3, 3}, test::random_vector(108, 3, -0.3f, 0.3f));
  const int bias = b.constant("b", {4}, test::random_vector(4, 4));
  b.output(b.node("conv", p, {x, w, bias}));
  const Model m = Model::from_bytes(b.finish(), "fold.fb");
  Session on = session(m, "cuda", 8, Precision::FP16, true, true);
  Session off = session(m, "cuda", 8, Precision::FP16, true, false);
  CHECK(on.passes()[4] == "fold_width: 1 convolution(s) width-folded (conv)");
  CHECK(off.passes()[4] == "fold_width: off");
  bool folded = false;
  for (const NodeInfo& n : on.nodes()) folded = folded || (n.name == "conv" && n.variant == "cudnn_folded");
  CHECK(folded);
  for (const NodeInfo& n : off.nodes()) CHECK(n.variant != "cudnn_folded");
  const std::vector<Tensor> in = inputs_for(on, 5);
  CHECK(test::rel_error(on.run(in)[0].data, off.run(in)[0].data) <= 1e-2);
  // Forcing the folded variant with the pass off is an error naming the variant.
  SessionOptions o;
  o.backend = "cuda";
  o.precision = Precision::FP16;
  o.passes.fold_width = false;
  o.kernels = {{"conv2d", "cudnn_folded"}};
  CHECK_THROWS_WITH_AS(Session(m, o), doctest::Contains("no variant 'cudnn_folded'"), Error);
  // VGG's conv1_1 (3 -> 64) at batch 8: the K-gathering implicit GEMM, faster than folding (docs/kernels.md)
  Session vgg = session(zoo_model("vgg16", 32), "cuda", 8, Precision::FP16, true, true);
  CHECK(vgg.passes()[4] == "fold_width: no convolution width-folded");
  bool small_cin = false;
  for (const NodeInfo& n : vgg.nodes()) small_cin = small_cin || (n.name == "conv1_1" && n.variant == "mma_small_cin_nhwc");
  CHECK(small_cin);
}

// Width folding of a transposed convolution with C_out <= 4 (a generator's image output): kernels 1-5,
// strides 1-3, every padding with output_padding such that W_out = s * W (what folds evenly), C_in
// aligned or odd (F then grows until F * C_in aligns), C_out 1..4, bias or not, every activation;
// each case that folds must match the reference, and at least half must fold.
CUDA_TEST_CASE("conv_transpose2d.cudnn_folded: width folding is exact for C_out <= 4 (NHWC fp16 / tf32)") {
  test::require_registered("conv_transpose2d", {"cudnn_folded"});
  std::mt19937_64 rng(929292);
  int ran = 0;
  for (int t = 0; t < scaled(40); ++t) {
    ConvTranspose2DParams p;
    int k, s, pad, op;
    do {
      k = uniform(rng, 1, 5), s = uniform(rng, 1, 3), pad = uniform(rng, 0, k - 1);
      op = s - k + 2 * pad;  // W_out = (W - 1) s - 2 pad + k + op = s W
    } while (op < 0 || op >= s);
    p.stride_h = p.stride_w = s;
    p.pad = {pad, pad, pad, pad};
    p.output_padding_h = p.output_padding_w = op;
    p.activation = random_activation(rng);
    const int64_t N = uniform(rng, 1, 3), CI = t % 3 == 2 ? uniform(rng, 1, 20) : 8 * uniform(rng, 1, 4);
    const int64_t CO = uniform(rng, 1, 4), H = uniform(rng, 1, 9), W = 8 * uniform(rng, 1, 4);
    std::vector<Shape> in{{N, CI, H, W}, {CI, CO, k, k}};
    if (rng() % 4 != 0) in.push_back({CO});
    const OpCase c = make_case(p, in, {false, true, true}, {N, CO, H * s, W * s}, 9700 + t);
    const auto names =
        check_case_in_layout(c, t % 2 ? Precision::TF32 : Precision::FP16, Layout::NHWC, {"cudnn_folded"}, t % 4 < 2);
    ran += contains(names, "cudnn_folded");
  }
  MESSAGE("conv_transpose2d.cudnn_folded ran on " << ran << " of " << scaled(40) << " random cases");
  CHECK(ran >= scaled(40) / 2);
  // DCGAN's output layer (128 -> 3, k4 s2 p1) at batch 8 folds; in the model the default plan keeps
  // it NCHW (folding measured slower there, docs/kernels.md), and forcing the fold on that node gives
  // the same values as the default.
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = 2;
  p.pad = {1, 1, 1, 1};
  p.activation.kind = ActivationKind::Tanh;
  const OpCase dcgan = make_case(p, {{8, 128, 16, 16}, {128, 3, 4, 4}, {3}}, {false, true, true}, {8, 3, 32, 32}, 9790);
  for (Precision pr : {Precision::FP16, Precision::TF32})
    CHECK(contains(check_case_in_layout(dcgan, pr, Layout::NHWC, {"cudnn_folded"}, true), "cudnn_folded"));
  const Model m = zoo_model("dcgan", 0);
  Session plain = session(m, "cuda", 8, Precision::FP16, true, true);
  for (const NodeInfo& n : plain.nodes()) CHECK(n.variant != "cudnn_folded");
  SessionOptions o;
  o.backend = "cuda";
  o.batch = 8;
  o.precision = Precision::FP16;
  o.kernels = {{"conv_transpose2d:tconv5", "cudnn_folded"}};
  Session forced(m, o);
  bool folded = false;
  for (const NodeInfo& n : forced.nodes()) folded = folded || (n.name == "tconv5" && n.variant == "cudnn_folded");
  CHECK(folded);
  CHECK(forced.passes()[4] == "fold_width: 1 convolution(s) width-folded (tconv5)");
  const std::vector<Tensor> in = inputs_for(plain, 7);
  CHECK(test::rel_error(forced.run(in)[0].data, plain.run(in)[0].data) <= 1e-2);
}
#endif

#ifdef INFER_WITH_CUTLASS
namespace {

// A conv2d or transposed conv with channel counts the CUTLASS variants take (multiples of `a`, up to
// 17 * a so several 128-channel block tiles and a partial one occur), kernel 1..5 (some 7), stride 1..3,
// asymmetric padding, every activation, bias or not, batch 1..3, images up to `hmax` a side.
OpCase random_cutlass_conv(std::mt19937_64& rng, int64_t a, int64_t hmax, uint64_t seed) {
  Conv2DParams p;
  const int kh = rng() % 8 == 0 ? 7 : uniform(rng, 1, 5), kw = rng() % 3 == 0 ? uniform(rng, 1, 5) : kh;
  p.stride_h = uniform(rng, 1, 3), p.stride_w = rng() % 3 == 0 ? uniform(rng, 1, 3) : p.stride_h;
  p.pad = {uniform(rng, 0, kh - 1), uniform(rng, 0, kw - 1), uniform(rng, 0, kh - 1), uniform(rng, 0, kw - 1)};
  p.activation = random_activation(rng);
  const int64_t N = uniform(rng, 1, 3), CI = a * uniform(rng, 1, 17), CO = a * uniform(rng, 1, 17);
  return finish_random_conv(rng, p, kh, kw, N, CI, CO, hmax, 4, seed);
}

OpCase random_cutlass_tconv(std::mt19937_64& rng, int64_t a, int64_t hmax, uint64_t seed) {
  ConvTranspose2DParams p;
  const int k = uniform(rng, 1, 5);
  p.stride_h = uniform(rng, 1, 3), p.stride_w = rng() % 3 == 0 ? uniform(rng, 1, 3) : p.stride_h;
  p.pad = {uniform(rng, 0, k - 1), uniform(rng, 0, k - 1), uniform(rng, 0, k - 1), uniform(rng, 0, k - 1)};
  p.output_padding_h = uniform(rng, 0, p.stride_h - 1);
  p.output_padding_w = uniform(rng, 0, p.stride_w - 1);
  p.activation = random_activation(rng);
  const int64_t N = uniform(rng, 1, 3), CI = a * uniform(rng, 1, 17), CO = a * uniform(rng, 1, 17);
  int64_t H, W, HO, WO;
  do {
    H = uniform(rng, 1, hmax), W = uniform(rng, 1, hmax);
    HO = (H - 1) * p.stride_h - p.pad.top - p.pad.bottom + k + p.output_padding_h;
    WO = (W - 1) * p.stride_w - p.pad.left - p.pad.right + k + p.output_padding_w;
  } while (HO < 1 || WO < 1);
  std::vector<Shape> in{{N, CI, H, W}, {CI, CO, k, k}};
  if (rng() % 4 != 0) in.push_back({CO});
  return make_case(p, in, {false, true, true}, {N, CO, HO, WO}, seed);
}

// Not applicable: strict fp32, NCHW, channels off the alignment.
void check_cutlass_refusals(const OpCase& ok, const OpCase& odd) {
  const KernelVariant* v = KernelRegistry::global().find("cuda", op_name(op_type(ok.params)), "cutlass");
  REQUIRE(v != nullptr);
  for (Precision p : {Precision::FP16, Precision::TF32}) {
    test::CaseData d = test::make_case_data(ok, p);
    d.node.layout = Layout::NHWC;
    CHECK(variant_applies(*v, d.node));
    d.node.layout = Layout::NCHW;
    CHECK_FALSE(variant_applies(*v, d.node));
    test::CaseData e = test::make_case_data(odd, p);
    e.node.layout = Layout::NHWC;
    CHECK_FALSE(variant_applies(*v, e.node));
  }
  test::CaseData f = test::make_case_data(ok, Precision::FP32);
  f.node.layout = Layout::NHWC;
  CHECK_FALSE(variant_applies(*v, f.node));
}

}  // namespace

// CUTLASS's implicit GEMM (fp16 / tf32, NHWC): several block tiles in M and N with partial ones, every
// padding edge, strides 1-3, residual inputs (y = act(conv + bias + r)), inside a graph every other case.
CUDA_TEST_CASE("conv2d.cutlass matches the reference (fp16, tf32; any kernel, stride, padding; residual inputs)") {
  test::require_registered("conv2d", {"cutlass"});
  std::mt19937_64 rng(818181);
  int ran = 0, residual = 0;
  for (int t = 0; t < scaled(48); ++t) {
    const Precision p = t % 2 ? Precision::TF32 : Precision::FP16;
    OpCase c = random_cutlass_conv(rng, p == Precision::FP16 ? 8 : 4, t % 6 == 5 ? 40 : 16, 9400 + t);
    if (t % 3 == 1) c = test::with_residual(std::move(c)), ++residual;
    const auto names = check_case_in_layout(c, p, Layout::NHWC, {"cutlass"}, t % 4 < 2);
    CHECK_MESSAGE(contains(names, "cutlass"), test::describe(c));
    ran += !names.empty();
  }
  CHECK(ran == scaled(48));
  CHECK(residual >= scaled(48) / 4);
  // VGG-like: a 3x3 layer over many block tiles at batch 4
  Conv2DParams p;
  p.pad = {1, 1, 1, 1};
  p.activation.kind = ActivationKind::Relu;
  const OpCase vgg = make_case(p, {{4, 64, 28, 28}, {128, 64, 3, 3}, {128}}, {false, true, true}, {4, 128, 28, 28}, 9480);
  for (Precision pr : {Precision::FP16, Precision::TF32})
    CHECK(contains(check_case_in_layout(vgg, pr, Layout::NHWC, {"cutlass"}, true), "cutlass"));
  Conv2DParams q;
  check_cutlass_refusals(make_case(q, {{1, 16, 5, 5}, {8, 16, 3, 3}}, {false, true}, {1, 8, 3, 3}, 9481),
                         make_case(q, {{1, 18, 5, 5}, {8, 18, 3, 3}}, {false, true}, {1, 8, 3, 3}, 9482));
}

// CUTLASS's strided dgrad as a transposed convolution (fp16 / tf32, NHWC): strides 1-3 (phases with no
// tap when the kernel is smaller than the stride), asymmetric padding, output_padding, several tiles;
// then the generators' k4 s2 p1 layers at batch 2.
CUDA_TEST_CASE("conv_transpose2d.cutlass matches the reference (fp16, tf32; strides 1-3, padding, output_padding)") {
  test::require_registered("conv_transpose2d", {"cutlass"});
  std::mt19937_64 rng(828282);
  int ran = 0;
  for (int t = 0; t < scaled(48); ++t) {
    const Precision p = t % 2 ? Precision::TF32 : Precision::FP16;
    const OpCase c = random_cutlass_tconv(rng, p == Precision::FP16 ? 8 : 4, t % 6 == 5 ? 24 : 9, 9500 + t);
    const auto names = check_case_in_layout(c, p, Layout::NHWC, {"cutlass"}, t % 4 < 2);
    CHECK_MESSAGE(contains(names, "cutlass"), test::describe(c));
    ran += !names.empty();
  }
  CHECK(ran == scaled(48));
  for (const auto& [n, ci, co] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{4, 256, 128}, {16, 64, 64}}) {
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = 2;
    p.pad = {1, 1, 1, 1};
    p.activation.kind = ActivationKind::Relu;
    const OpCase c = make_case(p, {{2, ci, n, n}, {ci, co, 4, 4}, {co}}, {false, true, true}, {2, co, 2 * n, 2 * n}, 9590 + n);
    for (Precision pr : {Precision::FP16, Precision::TF32})
      CHECK(contains(check_case_in_layout(c, pr, Layout::NHWC, {"cutlass"}, true), "cutlass"));
  }
  ConvTranspose2DParams q;
  q.stride_h = q.stride_w = 2;
  q.pad = {1, 1, 1, 1};
  check_cutlass_refusals(make_case(q, {{1, 16, 5, 5}, {16, 8, 4, 4}}, {false, true}, {1, 8, 10, 10}, 9598),
                         make_case(q, {{1, 16, 5, 5}, {16, 6, 4, 4}}, {false, true}, {1, 6, 10, 10}, 9599));
}
#endif  // INFER_WITH_CUTLASS
