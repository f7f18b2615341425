// Tests of the CUDA kernels other than conv_transpose2d (kernels/cuda: conv2d im2col_gemm / gemm_1x1
// / direct / direct_small_cout, dense gemm, conv_pool2d unfused / fused_filter / direct_sum, pool2d global,
// squeeze_excite / pool2d / activation / add / batchnorm / softmax / log_softmax / prelu / concat /
// flatten / reshape direct): every registered cuda
// variant of each op, wherever it applies, against the cpu reference kernel on seeded random shapes
// (kernel 1-7, strides 1-3, asymmetric padding, odd sizes, batch 1..3) in fp32 (rel. error <= 1e-5),
// fp16 (<= 1e-2, the reference sees the half-rounded inputs) and tf32 for the GEMM ops (<= 5e-3);
// in-place element-wise calls; the heuristic's choices; bad calls. Harness: tests/cuda_test_util.h
// (NaN-poisoned outputs and workspaces, guard bytes, CUDA-graph capture of every third case). Skipped
// when there is no GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "infer/error.h"
#include "infer/kernel.h"

using namespace infer;
using infer::test::check_case;
using infer::test::Coverage;
using infer::test::make_case;
using infer::test::OpCase;
using infer::test::random_activation;
using infer::test::scaled;
using infer::test::uniform;

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

int64_t conv_out(int64_t in, int pa, int pb, int64_t k, int s) {
  const int64_t span = in + pa + pb - k;
  return span < 0 ? 0 : span / s + 1;
}

// The cuda variant the session's heuristic picks (test::default_variant).
std::string heuristic_pick(const OpCase& c) {
  const test::CaseData cd = test::make_case_data(c, Precision::FP32);
  return test::default_variant("cuda", op_name(op_type(c.params)), cd.node);
}

// A random conv2d: kernel 1-7 (often square), strides 1-3, asymmetric padding < kernel, channels
// 1..67, batch 1..3; `identity` forces the 1x1 / stride 1 / unpadded shape of gemm_1x1.
OpCase random_conv2d(std::mt19937_64& rng, bool identity, uint64_t seed) {
  Conv2DParams p;
  int kh = uniform(rng, 1, 7), kw = rng() % 4 == 0 ? uniform(rng, 1, 7) : kh;
  p.stride_h = uniform(rng, 1, 3);
  p.stride_w = rng() % 4 == 0 ? uniform(rng, 1, 3) : p.stride_h;
  p.pad.top = uniform(rng, 0, kh - 1);
  p.pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, kh - 1) : p.pad.top;
  p.pad.left = uniform(rng, 0, kw - 1);
  p.pad.right = rng() % 3 == 0 ? uniform(rng, 0, kw - 1) : p.pad.left;
  if (identity) {
    kh = kw = 1;
    p.stride_h = p.stride_w = 1;
    p.pad = Padding2D{};
  }
  p.activation = random_activation(rng);
  const int64_t N = uniform(rng, 1, 3);
  int64_t CI = uniform(rng, 1, 67), CO = uniform(rng, 1, 67);
  int64_t H, W, HO, WO;
  // Redraw the image size until the output is non-empty and the oracle's work stays small.
  for (int attempt = 1;; ++attempt) {
    if (attempt % 20 == 0) CI = std::max<int64_t>(1, CI / 2), CO = std::max<int64_t>(1, CO / 2);
    H = uniform(rng, 1, 16), W = uniform(rng, 1, 16);
    HO = (H + p.pad.top + p.pad.bottom - kh) / p.stride_h + 1;
    WO = (W + p.pad.left + p.pad.right - kw) / p.stride_w + 1;
    const bool valid = H + p.pad.top + p.pad.bottom >= kh && W + p.pad.left + p.pad.right >= kw;
    if (valid && N * CI * CO * kh * kw * HO * WO <= 3'000'000) break;
  }
  std::vector<Shape> in{{N, CI, H, W}, {CO, CI, kh, kw}};
  if (rng() % 4 != 0) in.push_back({CO});
  return make_case(p, in, {false, true, true}, {N, CO, HO, WO}, seed);
}

OpCase random_dense(std::mt19937_64& rng, int t, uint64_t seed) {
  DenseParams p;
  p.activation = random_activation(rng);
  const int64_t N = t % 3 == 0 ? 1 : t % 7 == 0 ? uniform(rng, 30, 70) : uniform(rng, 1, 5);
  const int64_t FI = uniform(rng, 1, 300), FO = uniform(rng, 1, 300);
  std::vector<Shape> in{{N, FI}, {FO, FI}};
  if (rng() % 4 != 0) in.push_back({FO});
  return make_case(p, in, {false, true, true}, {N, FO}, seed);
}

// A random conv + p x p average pool: kernel 1-7, asymmetric padding, conv stride 1-2, pool 2-3
// (sometimes 4), conv outputs often not divisible by the pool.
OpCase random_conv_pool(std::mt19937_64& rng, uint64_t seed) {
  for (;;) {
    ConvPool2DParams p;
    const int kh = uniform(rng, 1, 7), kw = uniform(rng, 1, 7);
    Conv2DParams& cv = p.conv;
    cv.stride_h = rng() % 4 == 0 ? 2 : 1;
    cv.stride_w = rng() % 4 == 0 ? 2 : cv.stride_h;
    cv.pad = {uniform(rng, 0, kh - 1), uniform(rng, 0, kw - 1), uniform(rng, 0, kh - 1),
              uniform(rng, 0, kw - 1)};
    if (rng() % 2) cv.pad.bottom = cv.pad.top, cv.pad.right = cv.pad.left;
    cv.activation = random_activation(rng);
    p.pool = rng() % 10 == 0 ? 4 : uniform(rng, 2, 3);
    const bool bias = rng() % 4 != 0;
    int64_t ci = uniform(rng, 1, 67), co = uniform(rng, 1, 67);
    if (ci * co > 600) (rng() % 2 ? ci : co) = uniform(rng, 1, 8);
    const int64_t n = uniform(rng, 1, 3), h = uniform(rng, 2, 17), wd = uniform(rng, 2, 17);
    const int64_t ph = conv_out(h, cv.pad.top, cv.pad.bottom, kh, cv.stride_h) / p.pool;
    const int64_t pw = conv_out(wd, cv.pad.left, cv.pad.right, kw, cv.stride_w) / p.pool;
    if (ph < 1 || pw < 1) continue;
    std::vector<Shape> in{{n, ci, h, wd}, {co, ci, kh, kw}};
    if (bias) in.push_back({co});
    return make_case(p, in, {false, true, true}, {n, co, ph, pw}, seed);
  }
}

OpCase random_pool(std::mt19937_64& rng, uint64_t seed) {
  const test::RandomPool2D r = test::random_pool2d(rng);
  return make_case(r.p, {r.x}, {false}, r.y, seed);
}

// Rank 2 ([N, F]) or 4 ([N, C, H, W]) shapes, sizes that are and are not multiples of 2/4/8 (the
// vectorised and scalar paths of the element-wise kernels).
Shape random_elementwise_shape(std::mt19937_64& rng, int t) {
  if (t % 2)
    return Shape{uniform(rng, 1, 3), uniform(rng, 1, 40), uniform(rng, 1, 30), uniform(rng, 1, 30)};
  return Shape{uniform(rng, 1, 4), t % 4 == 0 ? 8 * uniform(rng, 1, 256) : uniform(rng, 1, 2000)};
}

// Runs `count` (scaled) random cases from `gen` in precision p; returns the coverage.
template <class Gen>
Coverage run_random(Precision p, int count, Gen gen) {
  Coverage cov;
  for (int t = 0; t < scaled(count); ++t) cov.add(check_case(gen(t), p, {}, t % 3 == 2));
  return cov;
}

const std::vector<std::pair<std::string, std::vector<std::string>>>& expected_variants() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> e = {
      {"conv2d", {"im2col_gemm", "gemm_1x1", "gemm_1x1_nhwc", "direct", "direct_small_cout", "depthwise"}},
      {"dense", {"gemm", "gemv"}},
      {"conv_pool2d", {"unfused", "fused_filter", "direct_sum"}},
      {"pool2d", {"global", "direct"}},
      {"resize", {"direct"}},
      {"depth_to_space", {"direct"}},
      {"activation", {"direct"}},
      {"add", {"direct"}},
      {"batchnorm", {"direct"}},
      {"flatten", {"direct"}},
      {"reshape", {"direct"}},
      {"softmax", {"direct"}},
      {"log_softmax", {"direct"}},
      {"prelu", {"direct"}},
      {"concat", {"direct"}},
      {"pad2d", {"direct"}},
      {"instance_norm", {"direct"}},
      {"channel_shuffle", {"direct"}},
      {"slice", {"direct"}},
      {"squeeze_excite", {"direct"}}};
  return e;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
CUDA_TEST_CASE("every expected cuda variant is registered") {
  for (const auto& [op, names] : expected_variants()) {
    CAPTURE(op);
    test::require_registered(op, names);
    for (const KernelVariant* v : test::cuda_variants(op)) {
      CAPTURE(v->name);
      CHECK(v->backend == "cuda");
      CHECK(bool(v->run));
    }
  }
}

CUDA_TEST_CASE("the default heuristic picks the fast cuda variants") {
  Conv2DParams c3;
  c3.pad = {1, 1, 1, 1};
  CHECK(heuristic_pick(make_case(c3, {{1, 64, 32, 32}, {64, 64, 3, 3}, {64}}, {false, true, true},
                                 {1, 64, 32, 32}, 1)) == "im2col_gemm");
  CHECK(heuristic_pick(make_case(Conv2DParams{}, {{1, 64, 16, 16}, {128, 64, 1, 1}, {128}},
                                 {false, true, true}, {1, 128, 16, 16}, 1)) == "gemm_1x1");
  // C_out <= 8 with pixels enough (EB-GAN's last layer): the direct kernel; a tiny image with a long
  // reduction stays with the GEMM.
  CHECK(heuristic_pick(make_case(c3, {{1, 64, 256, 256}, {3, 64, 3, 3}, {3}}, {false, true, true},
                                 {1, 3, 256, 256}, 1)) == "direct_small_cout");
  CHECK(heuristic_pick(make_case(Conv2DParams{}, {{1, 64, 64, 64}, {4, 64, 1, 1}, {4}},
                                 {false, true, true}, {1, 4, 64, 64}, 1)) == "direct_small_cout");
  CHECK(heuristic_pick(make_case(c3, {{1, 512, 4, 4}, {8, 512, 3, 3}, {8}}, {false, true, true},
                                 {1, 8, 4, 4}, 1)) == "im2col_gemm");
  ConvPool2DParams cp;
  cp.conv.pad = {1, 1, 1, 1};
  CHECK(heuristic_pick(make_case(cp, {{1, 128, 32, 32}, {128, 128, 3, 3}, {128}}, {false, true, true},
                                 {1, 128, 16, 16}, 1)) == "direct_sum");
  // dense: batch <= 4 streams the weights with gemv, larger batches are GEMMs
  CHECK(heuristic_pick(make_case(DenseParams{}, {{2, 400}, {120, 400}, {120}}, {false, true, true},
                                 {2, 120}, 1)) == "gemv");
  CHECK(heuristic_pick(make_case(DenseParams{}, {{5, 400}, {120, 400}, {120}}, {false, true, true},
                                 {5, 120}, 1)) == "gemm");
}

CUDA_TEST_CASE("conv2d: every variant matches the reference on random shapes (fp32, fp16, tf32; residual inputs)") {
  test::require_registered("conv2d", {"im2col_gemm", "gemm_1x1", "direct"});
  struct Run {
    Precision p;
    int count;
  };
  for (const Run& run : {Run{Precision::FP32, 250}, Run{Precision::FP16, 80}, Run{Precision::TF32, 60}}) {
    CAPTURE(test::precision_label(run.p));
    std::mt19937_64 rng(20261123 + int(run.p));
    int identity = 0, asymmetric = 0, strided = 0, batched = 0, residual = 0;
    const Coverage cov = run_random(run.p, run.count, [&](int t) {
      // Every third case in fuse_conv_residual's form (decided from t: the random stream is unchanged).
      OpCase c = random_conv2d(rng, t % 6 == 0, 1000 + 17 * t);
      if (t % 3 == 1) c = test::with_residual(std::move(c));
      const auto& p = std::get<Conv2DParams>(c.params);
      residual += p.add_residual;
      identity += t % 6 == 0;
      asymmetric += p.pad.top != p.pad.bottom || p.pad.left != p.pad.right;
      strided += p.stride_h > 1 || p.stride_w > 1;
      batched += c.inputs[0][0] > 1;
      return c;
    });
    const int n = scaled(run.count);
    CHECK(cov.of("im2col_gemm") == n);
    CHECK(cov.of("direct") == n);
    CHECK(cov.of("gemm_1x1") >= identity);
    CHECK(identity >= n / 7);
    // the generator covers what the issue lists
    CHECK(asymmetric >= n / 6);
    CHECK(strided >= n / 3);
    CHECK(batched >= n / 3);
    CHECK(residual >= n / 4);
  }
}

CUDA_TEST_CASE("conv2d grouped, depthwise and dilated: direct and depthwise match the reference") {
  test::require_registered("conv2d", {"direct", "depthwise"});
  for (Precision prec : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(prec));
    std::mt19937_64 rng(20261126 + int(prec));
    int depthwise = 0, dilated = 0;
    const Coverage cov = run_random(prec, 120, [&](int t) {
      const OpCase c = test::random_grouped_conv2d(rng, t % 2 == 0, 7000 + 13 * t);
      const auto& p = std::get<Conv2DParams>(c.params);
      // depthwise: what the variant takes (groups == C_in, one input channel per group); the grouped
      // draws (odd t) hit that shape too at times
      depthwise += p.groups > 1 && p.groups == c.inputs[0][1] && c.inputs[1][1] == 1;
      dilated += p.dilation_h > 1 || p.dilation_w > 1;
      return c;
    });
    const int n = scaled(120);
    CHECK(cov.of("direct") == n);
    CHECK(cov.of("depthwise") == depthwise);
    // the plain variants (groups 1, dilation 1) never take these nodes
    CHECK(cov.of("im2col_gemm") == 0);
    CHECK(cov.of("gemm_1x1") == 0);
    CHECK(cov.of("direct_small_cout") == 0);
    CHECK(dilated >= n / 3);
  }
  // MobileNet's depthwise 3x3 stride 1 and 2 with bias + relu: the heuristic picks depthwise
  Conv2DParams dw;
  dw.groups = 32;
  dw.pad = {1, 1, 1, 1};
  dw.activation.kind = ActivationKind::Relu;
  CHECK(heuristic_pick(make_case(dw, {{1, 32, 16, 16}, {32, 1, 3, 3}, {32}}, {false, true, true},
                                 {1, 32, 16, 16}, 1)) == "depthwise");
  dw.stride_h = dw.stride_w = 2;
  CHECK(heuristic_pick(make_case(dw, {{1, 32, 16, 16}, {32, 1, 3, 3}, {32}}, {false, true, true},
                                 {1, 32, 8, 8}, 1)) == "depthwise");
  // grouped, not depthwise: cuDNN's grouped convolution where it is built, else direct
  Conv2DParams g2;
  g2.groups = 2;
#ifdef INFER_WITH_CUDNN
  const char* grouped_pick = "cudnn";
#else
  const char* grouped_pick = "direct";
#endif
  CHECK(heuristic_pick(make_case(g2, {{1, 6, 8, 8}, {4, 3, 3, 3}}, {false, true}, {1, 4, 6, 6}, 1)) ==
        grouped_pick);
}

CUDA_TEST_CASE("conv2d: larger layers (several GEMM tiles, many images, VGG/AlexNet-like)") {
  struct Layer {
    Shape x, w;
    int stride;
    Padding2D pad;
  };
  const std::vector<Layer> layers = {
      {{3, 3, 63, 63}, {64, 3, 11, 11}, 4, {2, 2, 2, 2}},     // AlexNet conv1 at 63x63
      {{2, 64, 17, 17}, {96, 64, 3, 3}, 1, {1, 1, 1, 1}},     // 37k im2col threads: per-pixel path
      {{5, 130, 9, 7}, {70, 130, 1, 1}, 1, {0, 0, 0, 0}},      // gemm_1x1 with odd sizes
      {{1, 3, 224, 224}, {64, 3, 3, 3}, 1, {1, 1, 1, 1}},      // VGG conv1 (C_in = 3)
      {{2, 17, 30, 31}, {33, 17, 5, 4}, 2, {2, 0, 1, 3}},     // WO 16: 4 (fp16) / 2-pixel im2col packs
      {{3, 50, 29, 30}, {20, 50, 3, 3}, 1, {1, 1, 1, 1}},     // WO 30: 2-pixel packs, 870-pixel planes
  };
  uint64_t seed = 70;
  for (Precision p : test::kAllPrecisions)
    for (const Layer& l : layers) {
      if (test::quick_mode() && l.x[2] > 100) continue;
      Conv2DParams cp;
      cp.stride_h = cp.stride_w = l.stride;
      cp.pad = l.pad;
      cp.activation.kind = ActivationKind::Relu;
      const int64_t ho = conv_out(l.x[2], l.pad.top, l.pad.bottom, l.w[2], l.stride);
      const int64_t wo = conv_out(l.x[3], l.pad.left, l.pad.right, l.w[3], l.stride);
      const bool capture = seed % 2 == 0;
      const auto ran = check_case(make_case(cp, {l.x, l.w, {l.w[0]}}, {false, true, true},
                                            {l.x[0], l.w[0], ho, wo}, seed++),
                                  p, {}, capture);
      CHECK(contains(ran, "im2col_gemm"));
      CHECK(contains(ran, "direct"));
    }
}

// Split-K at batch 1 (conv2d/gemm.cu): few output tiles and a long K (>= 4096) are cut into K slices
// multiplied into float partial sums and added with bias, residual and activation. VGG conv5-like (512
// ch at 5x5, K = 4608: 16 slices of 288), with a residual, a K (4122) that only splits in two, a 1x1
// (gemm_1x1) over 4096 channels, and batch 2 of the first (no split) for comparison; in a CUDA graph
// every other case.
CUDA_TEST_CASE("conv2d: split-K GEMMs at batch 1 (im2col_gemm and gemm_1x1, residual inputs) match the reference") {
  struct Layer {
    Shape x, w;
    int pad;
    bool residual;
  };
  const std::vector<Layer> layers = {
      {{1, 512, 5, 5}, {256, 512, 3, 3}, 1, false}, {{1, 512, 5, 5}, {200, 512, 3, 3}, 1, true},
      {{1, 458, 4, 5}, {40, 458, 3, 3}, 0, false},  {{1, 4096, 7, 7}, {256, 4096, 1, 1}, 0, true},
      {{2, 512, 5, 5}, {256, 512, 3, 3}, 1, false}};
  uint64_t seed = 910;
  for (Precision p : test::kAllPrecisions)
    for (const Layer& l : layers) {
      Conv2DParams cp;
      cp.pad = {l.pad, l.pad, l.pad, l.pad};
      cp.activation.kind = seed % 3 == 0 ? ActivationKind::Tanh : ActivationKind::Relu;
      const int64_t ho = conv_out(l.x[2], l.pad, l.pad, l.w[2], 1), wo = conv_out(l.x[3], l.pad, l.pad, l.w[3], 1);
      OpCase c = make_case(cp, {l.x, l.w, {l.w[0]}}, {false, true, true}, {l.x[0], l.w[0], ho, wo}, seed);
      if (l.residual) c = test::with_residual(std::move(c));
      const auto ran = check_case(c, p, {"im2col_gemm", "gemm_1x1"}, seed++ % 2 == 0);
      CHECK(contains(ran, "im2col_gemm"));
      if (l.w[2] == 1) CHECK(contains(ran, "gemm_1x1"));
    }
}

CUDA_TEST_CASE("conv2d: direct_small_cout (C_out 1..8, kernels 1..7, strides 1..3; fp32, fp16, tf32)") {
  test::require_registered("conv2d", {"direct_small_cout"});
  for (Precision p : test::kAllPrecisions) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(99 + int(p));
    const int count = p == Precision::FP32 ? 200 : 60;
    const Coverage cov = run_random(p, count, [&](int t) {
      OpCase c = random_conv2d(rng, t % 8 == 0, 5000 + 13 * t);
      const int64_t co = 1 + t % 8;  // every C_out 1..8; only lowers the oracle's work
      c.inputs[1][0] = co;
      if (c.inputs.size() == 3) c.inputs[2] = {co};
      c.output[1] = co;
      return c;
    });
    CHECK(cov.of("direct_small_cout") == scaled(count));
    CHECK(cov.of("im2col_gemm") == scaled(count));  // every case also cross-checks the GEMM path
  }
  // Several tiles, warp groups splitting C_in, channel chunks (C_in 300 at 7x7 x 8 outputs needs
  // several rounds of staged weights), batch > 1, odd sizes, and EB-GAN's last layer.
  struct Layer {
    Shape x, w;
    int stride;
    Padding2D pad;
    ActivationKind act;
  };
  const std::vector<Layer> layers = {
      {{1, 64, 70, 45}, {3, 64, 3, 3}, 1, {1, 1, 1, 1}, ActivationKind::Tanh},
      {{2, 300, 19, 23}, {8, 300, 7, 7}, 1, {3, 2, 3, 4}, ActivationKind::None},
      {{3, 5, 66, 40}, {5, 5, 5, 3}, 2, {2, 1, 0, 1}, ActivationKind::LeakyRelu},
      {{1, 17, 33, 97}, {1, 17, 1, 1}, 3, {0, 0, 0, 0}, ActivationKind::Sigmoid},
      {{1, 64, 256, 256}, {3, 64, 3, 3}, 1, {1, 1, 1, 1}, ActivationKind::Tanh},
  };
  uint64_t seed = 90;
  for (Precision p : test::kAllPrecisions)
    for (const Layer& l : layers) {
      if (test::quick_mode() && l.x[2] > 100) continue;
      Conv2DParams cp;
      cp.stride_h = cp.stride_w = l.stride;
      cp.pad = l.pad;
      cp.activation.kind = l.act;
      const int64_t ho = conv_out(l.x[2], l.pad.top, l.pad.bottom, l.w[2], l.stride);
      const int64_t wo = conv_out(l.x[3], l.pad.left, l.pad.right, l.w[3], l.stride);
      const bool capture = seed % 2 == 0;
      const auto ran = check_case(make_case(cp, {l.x, l.w, {l.w[0]}}, {false, true, true},
                                            {l.x[0], l.w[0], ho, wo}, seed++),
                                  p, {"direct_small_cout", "im2col_gemm"}, capture);
      CHECK(contains(ran, "direct_small_cout"));
    }
}

CUDA_TEST_CASE("dense: gemm and gemv match the reference (batch 1, small and ~64; fp32, fp16, tf32)") {
  test::require_registered("dense", {"gemm", "gemv"});
  for (Precision p : test::kAllPrecisions) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(7 + int(p));
    const int count = p == Precision::FP32 ? 200 : 60;
    int small = 0;
    const Coverage cov = run_random(p, count, [&](int t) {
      OpCase c = random_dense(rng, t, 50 + 13 * t);
      small += c.inputs[0][0] <= 4;
      return c;
    });
    CHECK(cov.of("gemm") == scaled(count));
    CHECK(cov.of("gemv") == small);  // every case of batch <= 4 (odd F_in: the scalar path)
    CHECK(small >= scaled(count) / 4);
  }
  // AlexNet/VGG classifier sizes
  for (Precision p : test::kAllPrecisions) {
    DenseParams dp;
    dp.activation.kind = ActivationKind::Relu;
    if (!test::quick_mode())
      CHECK(contains(check_case(make_case(dp, {{3, 9216}, {4096, 9216}, {4096}}, {false, true, true},
                                          {3, 4096}, 5),
                                p, {}, true),
                     "gemm"));
    const auto ran = check_case(make_case(DenseParams{}, {{1, 4096}, {1000, 4096}, {1000}}, {false, true, true},
                                          {1, 1000}, 6),
                                p, {}, true);
    CHECK(contains(ran, "gemm"));
    CHECK(contains(ran, "gemv"));
  }
}

CUDA_TEST_CASE("conv_pool2d: unfused, fused_filter and direct_sum match the reference") {
  const std::vector<std::string> names = {"unfused", "fused_filter", "direct_sum"};
  test::require_registered("conv_pool2d", names);
  for (Precision p : test::kAllPrecisions) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(4321 + int(p));
    const int count = p == Precision::FP32 ? 200 : p == Precision::FP16 ? 60 : 40;
    const Coverage cov = run_random(p, count, [&](int t) { return random_conv_pool(rng, 3000 + 11 * t); });
    for (const auto& name : names) CHECK_MESSAGE(cov.of(name) == scaled(count), name << " skipped shapes");
  }
}

CUDA_TEST_CASE("conv_pool2d: LeNet-5 layers, a 32x32 conv3x3+avgpool2 and odd conv outputs") {
  // the three own variants must all run (the cudnn ones are checked in test_cuda_layout.cc)
  const auto own = [](std::vector<std::string> ran) {
    ran.erase(std::remove_if(ran.begin(), ran.end(), [](const std::string& v) { return v.rfind("cudnn", 0) == 0; }),
              ran.end());
    return ran;
  };
  for (Precision p : test::kAllPrecisions) {
    ConvPool2DParams a;  // conv 1->6 k5 p2 + avgpool 2, tanh
    a.conv.pad = {2, 2, 2, 2};
    a.conv.activation.kind = ActivationKind::Tanh;
    CHECK(own(check_case(make_case(a, {{3, 1, 28, 28}, {6, 1, 5, 5}, {6}}, {false, true, true},
                               {3, 6, 14, 14}, 7),
                     p, {}, true))
              .size() == 3);
    ConvPool2DParams b;  // conv 6->16 k5 + avgpool 2, tanh
    b.conv.activation.kind = ActivationKind::Tanh;
    CHECK(own(check_case(make_case(b, {{2, 6, 14, 14}, {16, 6, 5, 5}, {16}}, {false, true, true},
                               {2, 16, 5, 5}, 8),
                     p))
              .size() == 3);
    ConvPool2DParams c;  // the benchmark's conv3x3 p1 + avgpool2 at 32x32
    c.conv.pad = {1, 1, 1, 1};
    CHECK(own(check_case(make_case(c, {{1, 64, 32, 32}, {64, 64, 3, 3}, {64}}, {false, true, true},
                               {1, 64, 16, 16}, 9),
                     p, {}, true))
              .size() == 3);
    // C = 128: 128 planes x 256 pooled pixels = 32768 im2col threads, the per-pixel im2col path
    // (the cases above take the per-element path for small grids, kernels/cuda/im2col.cu)
    CHECK(own(check_case(make_case(c, {{1, 128, 32, 32}, {128, 128, 3, 3}, {128}}, {false, true, true},
                               {1, 128, 16, 16}, 11),
                     p))
              .size() == 3);
    ConvPool2DParams d;  // conv 8x7 -> pool 3 -> 2x2 (rows 6-7 and column 6 dropped)
    d.pool = 3;
    d.conv.pad = {1, 0, 0, 1};
    CHECK(own(check_case(make_case(d, {{1, 5, 8, 7}, {4, 5, 2, 2}, {4}}, {false, true, true}, {1, 4, 2, 2},
                               10),
                     p))
              .size() == 3);
  }
}

CUDA_TEST_CASE("pool2d: max and average (count_include_pad, asymmetric padding) match the reference") {
  test::require_registered("pool2d", {"direct"});
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(11 + int(p));
    const int count = p == Precision::FP32 ? 200 : 60;
    const Coverage cov = run_random(p, count, [&](int t) { return random_pool(rng, 300 + t); });
    CHECK(cov.of("direct") == scaled(count));
  }
}

// GlobalAveragePool / GlobalMaxPool (squeeze-excitation's squeeze): pool2d.global in NCHW and NHWC
// against the reference on planes from 1 to 12544 elements (one warp, partial warps, several strides
// of the block; channel counts that give packs of 4, 2 and 1), inside a CUDA graph every other case;
// direct runs the same nodes too.
CUDA_TEST_CASE("pool2d.global: whole-image max and average match the reference; the default for them") {
  test::require_registered("pool2d", {"global", "direct"});
  const Shape shapes[] = {{1, 32, 112, 112}, {2, 5, 7, 7},  {3, 7, 1, 1},   {1, 3, 33, 17},   {4, 40, 5, 3},
                          {1, 9, 16, 16},    {2, 2, 31, 1}, {1, 1, 1, 300}, {2, 132, 9, 11}, {3, 1030, 2, 2}};
  int t = 0;
  for (Precision p : {Precision::FP32, Precision::FP16, Precision::TF32})
    for (const Shape& x : shapes)
      for (PoolKind kind : {PoolKind::Average, PoolKind::Max}) {
        Pool2DParams pp;
        pp.kind = kind;
        pp.kernel_h = static_cast<int>(x[2]), pp.kernel_w = static_cast<int>(x[3]);
        pp.stride_h = pp.stride_w = 1;
        const OpCase c = make_case(pp, {x}, {false}, {x[0], x[1], 1, 1}, 900 + t);
        CAPTURE(test::describe(c));
        const bool capture = t++ % 2 == 1;
        const auto ran = check_case(c, p, {}, capture);
        CHECK(contains(ran, "global"));
        CHECK(contains(ran, "direct"));
        CHECK(contains(check_case_in_layout(c, p, Layout::NHWC, {"global"}, capture), "global"));
        CHECK(heuristic_pick(c) == "global");
      }
  // Not global: padding, a window smaller than the image.
  Pool2DParams padded;
  padded.kind = PoolKind::Average;
  padded.kernel_h = padded.kernel_w = 4;
  padded.pad = {1, 1, 1, 1};
  CHECK(heuristic_pick(make_case(padded, {{1, 3, 4, 4}}, {false}, {1, 3, 3, 3}, 1)) == "direct");
  Pool2DParams part;
  part.kernel_h = part.kernel_w = 2;
  CHECK(heuristic_pick(make_case(part, {{1, 3, 4, 4}}, {false}, {1, 3, 2, 2}, 1)) == "direct");
}

// squeeze_excite (the fuse_squeeze_excite pass's node): direct in NCHW and NHWC against the reference,
// fp32 / tf32 / fp16, on EfficientNet's shapes (96 channels of 112x112: 49 partial-sum chunks per
// channel in NHWC; 1152 of 7x7 with C_r = 48) and odd ones (C = 1, 7, 13: packs of 1; one pixel; C_r
// 1), random activations in the three slots, inside a CUDA graph every other case.
CUDA_TEST_CASE("squeeze_excite.direct: NCHW and NHWC match the reference") {
  test::require_registered("squeeze_excite", {"direct"});
  struct Se {
    Shape x;
    int64_t r;
  };
  const Se shapes[] = {{{1, 96, 112, 112}, 4}, {{2, 1152, 7, 7}, 48}, {{3, 7, 5, 9}, 3},  {{1, 1, 1, 1}, 1},
                       {{2, 13, 17, 3}, 5},    {{4, 40, 1, 1}, 10},   {{1, 24, 33, 31}, 6}, {{2, 8, 16, 16}, 1}};
  std::mt19937_64 rng(171);
  int t = 0;
  for (Precision p : {Precision::FP32, Precision::FP16, Precision::TF32})
    for (const Se& se : shapes) {
      SqueezeExciteParams sp;
      sp.hidden_activation = test::random_activation(rng);
      sp.gate_activation = t % 2 ? Activation{ActivationKind::Sigmoid} : test::random_activation(rng);
      if (t % 3 == 0) sp.activation = test::random_activation(rng);
      const int64_t C = se.x[1];
      OpCase c = make_case(sp, {se.x, {se.r, C, 1, 1}, {se.r}, {C, se.r, 1, 1}, {C}},
                           {false, true, true, true, true}, se.x, 1700 + t);
      CAPTURE(test::describe(c));
      CAPTURE(test::precision_label(p));
      const bool capture = t++ % 2 == 1;
      CHECK(contains(check_case(c, p, {}, capture), "direct"));
      CHECK(contains(check_case_in_layout(c, p, Layout::NHWC, {"direct"}, capture), "direct"));
    }
}

CUDA_TEST_CASE("resize: nearest and bilinear, every coordinate mode, up and down, match the reference") {
  test::require_registered("resize", {"direct"});
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(141 + int(p));
    const int count = p == Precision::FP32 ? 200 : 60;
    const Coverage cov = run_random(p, count, [&](int t) {
      const test::RandomResize r = test::random_resize(rng);
      return make_case(r.p, {r.x}, {false}, r.y, 800 + t);
    });
    CHECK(cov.of("direct") == scaled(count));
  }
}

CUDA_TEST_CASE("depth_to_space: DCR and CRD, blocks 1-4, match the reference") {
  test::require_registered("depth_to_space", {"direct"});
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(151 + int(p));
    const Coverage cov = run_random(p, 60, [&](int t) {
      const DepthToSpaceParams d{uniform(rng, 1, 4), static_cast<DepthToSpaceMode>(t % 2)};
      const int64_t co = uniform(rng, 1, 5), n = uniform(rng, 1, 3), h = uniform(rng, 1, 9), w = uniform(rng, 1, 9);
      return make_case(d, {{n, co * d.block * d.block, h, w}}, {false}, {n, co, h * d.block, w * d.block}, 950 + t);
    });
    CHECK(cov.of("direct") == scaled(60));
  }
}

CUDA_TEST_CASE("activation (every kind), add and batchnorm match the reference") {
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(13 + int(p));
    const int count = scaled(p == Precision::FP32 ? 150 : 50);
    for (int t = 0; t < count; ++t) {
      const Shape s = random_elementwise_shape(rng, t);
      const bool capture = t % 3 == 2;
      ActivationParams ap;
      random_activation(rng);  // drawn and dropped: keeps the later cases' random stream as it was
      ap.activation = test::activation_case(t);  // every case, incl. none (a copy), exp and sqrt
      OpCase ac = make_case(ap, {s}, {false}, s, 400 + t);
      if (ap.activation.kind == ActivationKind::Sqrt)
        ac.fill = [](std::vector<std::vector<float>>& in) {
          for (float& v : in[0]) v = std::fabs(v);  // sqrt's domain
        };
      CHECK(check_case(ac, p, {}, capture).size() == 1);

      AddParams addp;
      addp.activation = random_activation(rng);
      CHECK(check_case(make_case(addp, {s, s}, {false, false}, s, 500 + t), p, {}, capture).size() == 1);

      BatchNormParams bn;
      bn.activation = random_activation(rng);
      bn.epsilon = 1e-3f;
      const Shape c{s[1]};
      OpCase bc = make_case(bn, {s, c, c, c, c}, {false, true, true, true, true}, s, 600 + t);
      bc.fill = [](std::vector<std::vector<float>>& in) {
        for (float& v : in[4]) v = v * v + 0.1f;  // variances > 0
      };
      CHECK(check_case(bc, p, {}, capture).size() == 1);
    }
  }
  // a million elements: many blocks
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    const Shape s{2, 64, 100, 100};
    ActivationParams ap;
    ap.activation.kind = ActivationKind::Sigmoid;
    CHECK(check_case(make_case(ap, {s}, {false}, s, 1), p).size() == 1);
    AddParams addp;
    addp.activation.kind = ActivationKind::Relu;
    CHECK(check_case(make_case(addp, {s, s}, {false, false}, s, 2), p).size() == 1);
  }
}

// Issue 14: conv + bias + any activation. Every bounded activation case (test_util.h: the new kinds
// with ReLU6 and two HardSigmoid parameter sets) as the fused epilogue of every applicable conv2d,
// conv_transpose2d, dense and add variant, in fp32 and fp16, NCHW and (conv) NHWC, eager and captured.
CUDA_TEST_CASE("every activation kind as a fused epilogue (conv2d, conv_transpose2d, dense, add)") {
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    for (int i = 0; i < test::kBoundedActivationCases; ++i) {
      const Activation act = test::activation_case(i);
      const std::string name = activation_name(act.kind);
      CAPTURE(name);
      const bool capture = i % 2 == 1;
      const uint64_t seed = 7000 + 10 * uint64_t(i) + uint64_t(p);
      Conv2DParams cp;
      cp.pad = {1, 1, 1, 1};
      cp.activation = act;
      const OpCase conv = make_case(cp, {{2, 16, 9, 11}, {24, 16, 3, 3}, {24}}, {false, true, true},
                                    {2, 24, 9, 11}, seed);
      CHECK(!check_case(conv, p, {}, capture).empty());
      if (p == Precision::FP16) test::check_case_in_layout(conv, p, Layout::NHWC, {}, capture);
      ConvTranspose2DParams tp;
      tp.stride_h = tp.stride_w = 2;
      tp.pad = {1, 1, 1, 1};
      tp.activation = act;
      const OpCase tconv = make_case(tp, {{2, 16, 5, 6}, {16, 8, 4, 4}, {8}}, {false, true, true},
                                     {2, 8, 10, 12}, seed + 1);
      CHECK(!check_case(tconv, p, {}, capture).empty());
      if (p == Precision::FP16) test::check_case_in_layout(tconv, p, Layout::NHWC, {}, capture);
      DenseParams dp;
      dp.activation = act;
      CHECK(!check_case(make_case(dp, {{3, 50}, {20, 50}, {20}}, {false, true, true}, {3, 20}, seed + 2), p,
                        {}, capture)
                 .empty());
      AddParams ap;
      ap.activation = act;
      const Shape s{2, 5, 7, 9};
      CHECK(!check_case(make_case(ap, {s, s}, {false, false}, s, seed + 3), p, {}, capture).empty());
    }
  }
}

CUDA_TEST_CASE("a fused per-channel PRelu epilogue (fuse_prelu) matches the reference on the declaring variants") {
  // Slopes of both signs, one per output channel, as the node's last input (docs/kernels.md).
  Activation act;
  act.kind = ActivationKind::PRelu;
  for (Precision p : test::kAllPrecisions) {
    CAPTURE(test::precision_label(p));
    const uint64_t seed = 9100 + 10 * uint64_t(p);
    Conv2DParams cp;  // 1x1: gemm_1x1_nhwc in NHWC (bias_activation_nhwc takes the slopes)
    cp.activation = act;
    const OpCase conv = make_case(cp, {{2, 16, 9, 11}, {24, 16, 1, 1}, {24}, {24}}, {false, true, true, true},
                                  {2, 24, 9, 11}, seed);
    CHECK(contains(test::check_case_in_layout(conv, p, Layout::NHWC, {}, true), "gemm_1x1_nhwc"));
    ConvTranspose2DParams tp;  // stride 1: flipped_conv's (bias_activation takes the slopes)
    tp.pad = {1, 1, 1, 1};
    tp.activation = act;
    const OpCase tconv = make_case(tp, {{2, 16, 5, 6}, {16, 8, 4, 4}, {8}, {8}}, {false, true, true, true},
                                   {2, 8, 6, 7}, seed + 1);
    CHECK(contains(check_case(tconv, p, {}, true), "flipped_conv"));
    DenseParams dp;
    dp.activation = act;
    for (int64_t n : {1, 3, 40}) {
      const std::vector<std::string> ran =
          check_case(make_case(dp, {{n, 50}, {20, 50}, {20}, {20}}, {false, true, true, true}, {n, 20},
                               seed + 2 + uint64_t(n)),
                     p, {}, n == 3);
      CHECK(contains(ran, "gemm"));
      if (n <= 4) CHECK(contains(ran, "gemv"));
    }
  }
}

namespace {

// A random binary case whose broadcast operand is, half the time when the batch rules allow it (rank
// below the output's or a leading 1), a constant (float32 host data, uploaded as the session would).
OpCase random_binary_case(std::mt19937_64& rng, int t, int min_rank, int max_rank, uint64_t seed) {
  const test::RandomBinary r = test::random_binary(rng, t, min_rank, max_rank);
  const Shape& other = r.b_first ? r.a : r.b;
  const bool constant = (other.size() < r.y.size() || other[0] == 1) && rng() % 2;
  const std::vector<bool> flags = r.b_first ? std::vector<bool>{constant, false} : std::vector<bool>{false, constant};
  OpCase c = make_case(r.p, {r.a, r.b}, flags, r.y, seed);
  if (r.p.kind == BinaryKind::Div) c.fill = [](std::vector<std::vector<float>>& in) { test::keep_from_zero(in[1]); };
  return c;
}

}  // namespace

CUDA_TEST_CASE("binary broadcast (add/sub/mul/div, every pattern, constants either side) matches the reference") {
  test::require_registered("binary", {"broadcast"});
  for (Precision p : test::kAllPrecisions) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(23 + int(p));
    const int count = scaled(p == Precision::FP32 ? 200 : 80);
    for (int t = 0; t < count; ++t) {
      const OpCase c = random_binary_case(rng, t, 1, 5, 1000 + t);
      CHECK(check_case(c, p, {}, t % 3 == 2) == std::vector<std::string>{"broadcast"});
    }
    // A million elements: per-channel scale, squeeze-excitation gate, residual, scalar.
    const Shape y{2, 64, 100, 100};
    int k = 0;
    for (const Shape& b : {Shape{1, 64, 1, 1}, Shape{2, 64, 1, 1}, y, Shape{1}}) {
      BinaryParams bp;
      bp.kind = static_cast<BinaryKind>(k++);
      bp.activation.kind = ActivationKind::Relu;
      OpCase c = make_case(bp, {y, b}, {false, b[0] == 1 && b.size() == 4}, y, 2000 + k);
      c.fill = [](std::vector<std::vector<float>>& in) { test::keep_from_zero(in[1]); };
      CHECK(check_case(c, p).size() == 1);
    }
  }
}

CUDA_TEST_CASE("activation, add and batchnorm run in place (output == first input)") {
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    for (const Shape& s : {Shape{2, 3, 5, 7}, Shape{3, 4096}, Shape{1, 1}}) {
      CAPTURE(shape_str(s));
      ActivationParams ap;
      ap.activation.kind = ActivationKind::Tanh;
      AddParams addp;
      addp.activation.kind = ActivationKind::LeakyRelu;
      BatchNormParams bn;
      bn.activation.kind = ActivationKind::Relu;
      const Shape c{s[1]};
      std::vector<OpCase> cases = {make_case(ap, {s}, {false}, s, 3),
                                   make_case(addp, {s, s}, {false, false}, s, 4),
                                   make_case(bn, {s, c, c, c, c}, {false, true, true, true, true}, s, 5)};
      cases[2].fill = [](std::vector<std::vector<float>>& in) {
        for (float& v : in[4]) v = v * v + 0.1f;
      };
      for (const OpCase& oc : cases) {
        const std::string op = op_name(op_type(oc.params));
        CAPTURE(op);
        const test::CaseData cd = test::make_case_data(oc, p);
        const std::vector<float> want = test::run_reference(cd.node, cd.data);
        const KernelVariant* v = KernelRegistry::global().find("cuda", op, "direct");
        REQUIRE(v != nullptr);
        REQUIRE((!v->applicable || v->applicable(cd.node)));
        std::vector<std::unique_ptr<cuda::DeviceArray>> dev;
        KernelCall call{cd.node, {}, {}, nullptr, nullptr, &test::test_context()};
        std::shared_ptr<void> prepared = v->prepare ? v->prepare(cd.node) : nullptr;
        call.prepared = prepared.get();
        for (const auto& d : cd.data) {
          dev.push_back(test::to_device(d, p));
          call.inputs.push_back(static_cast<const float*>(dev.back()->data()));
        }
        call.outputs = {static_cast<float*>(dev[0]->data())};
        INFER_CUDA_CHECK(cudaDeviceSynchronize());
        v->run(call);
        INFER_CUDA_CHECK(cudaStreamSynchronize(test::test_context().stream));
        const std::vector<float> got = test::download(dev[0]->data(), want.size(), p);
        CHECK(test::rel_error(got, want) <= test::tolerance(p));
      }
    }
  }
}

// Issue 28 must 4: prelu (slope [C] and [1], NCHW and NHWC) and log_softmax (the channel axis of NCHW
// tensors and the others) against the reference in every precision.
CUDA_TEST_CASE("prelu (per channel, shared; both layouts) and log_softmax (axis 1 and inner axes)") {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(28 + int(p));
    uint64_t seed = 2800;
    for (int t = 0; t < scaled(40); ++t) {
      const int rank = t % 2 == 0 ? 4 : uniform(rng, 2, 5);
      Shape s;
      for (int d = 0; d < rank; ++d) s.push_back(uniform(rng, 1, d == rank - 1 ? 37 : 7));
      CAPTURE(shape_str(s));
      const Shape slope{t % 3 == 0 ? 1 : s[1]};
      const OpCase pc = make_case(PReluParams{}, {s, slope}, {false, true}, s, seed++);
      CHECK(check_case(pc, p, {}, t % 4 == 1).size() == 1);
      if (rank == 4) CHECK(check_case_in_layout(pc, p, Layout::NHWC).size() == 1);
      LogSoftmaxParams lp;
      lp.axis = t % 2 == 0 ? 1 : uniform(rng, 1, rank - 1);
      OpCase lc = make_case(lp, {s}, {false}, s, seed++);
      lc.fill = [](std::vector<std::vector<float>>& in) {
        for (float& v : in[0]) v *= 20.f;  // the max subtraction matters
      };
      CHECK(check_case(lc, p, {}, t % 4 == 3).size() == 1);
    }
  }
}

CUDA_TEST_CASE("softmax (axis 1 and inner axes), concat (axis 1, 2 and others), flatten, reshape") {
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    // classifier heads: [N, 1000] and [N, 10] along axis 1; [N, C, H, W] along 1 (inner > 1) and 3
    uint64_t seed = 1;
    const auto large_logits = [](std::vector<std::vector<float>>& in) {
      for (float& v : in[0]) v *= 20.f;  // the max subtraction matters
    };
    struct Fixed {
      Shape s;
      int axis;
    };
    for (const Fixed& f : {Fixed{{64, 1000}, 1}, Fixed{{1, 1000}, 1}, Fixed{{3, 10}, 1},
                           Fixed{{2, 7, 5, 3}, 1}, Fixed{{2, 7, 5, 3}, 2}, Fixed{{2, 7, 5, 3}, 3},
                           Fixed{{2, 300, 4, 4}, 1}}) {
      SoftmaxParams sp;
      sp.axis = f.axis;
      OpCase c = make_case(sp, {f.s}, {false}, f.s, seed++);
      c.fill = large_logits;
      CHECK(check_case(c, p, {}, seed % 2 == 0).size() == 1);
    }
    for (int axis : {1, 2}) {
      ConcatParams cp;
      cp.axis = axis;
      std::vector<Shape> ins = {{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}};
      Shape out = {2, 3, 4, 5};
      ins[1][size_t(axis)] = 1;
      ins[2][size_t(axis)] = 7;
      out[size_t(axis)] = ins[0][size_t(axis)] + 1 + 7;
      CHECK(check_case(make_case(cp, ins, {}, out, seed++), p, {}, true).size() == 1);
    }

    std::mt19937_64 rng(17 + int(p));
    const int count = scaled(p == Precision::FP32 ? 150 : 50);
    for (int t = 0; t < count; ++t) {
      const int rank = uniform(rng, 2, 4);
      Shape s;
      for (int d = 0; d < rank; ++d) s.push_back(uniform(rng, 1, d == rank - 1 ? 40 : 6));
      const bool capture = t % 3 == 2;
      SoftmaxParams sp;
      sp.axis = uniform(rng, 1, rank - 1);  // the format's axes: not the batch, not negative
      OpCase sc = make_case(sp, {s}, {false}, s, 700 + t);
      sc.fill = large_logits;
      CHECK(check_case(sc, p, {}, capture).size() == 1);

      ConcatParams cp;
      cp.axis = uniform(rng, 1, rank - 1);
      const int axis = cp.axis < 0 ? cp.axis + rank : cp.axis;
      const int k = uniform(rng, 1, 4);
      std::vector<Shape> ins;
      Shape out = s;
      out[size_t(axis)] = 0;
      for (int i = 0; i < k; ++i) {
        Shape si = s;
        si[size_t(axis)] = uniform(rng, 1, 5);
        out[size_t(axis)] += si[size_t(axis)];
        ins.push_back(si);
      }
      CHECK(check_case(make_case(cp, ins, {}, out, 800 + t), p, {}, capture).size() == 1);

      const int64_t n = shape_numel(s);
      CHECK(check_case(make_case(FlattenParams{}, {s}, {false}, {s[0], n / s[0]}, 900 + t), p, {},
                       capture)
                .size() == 1);
      ReshapeParams rp;
      rp.shape = {n / s[0]};  // per sample: the batch dimension stays
      CHECK(check_case(make_case(rp, {s}, {false}, {s[0], n / s[0]}, 1000 + t), p, {}, capture)
                .size() == 1);
    }
  }
}

// Last: a variant that does not check its call could fault the device for the rest of the process.
CUDA_TEST_CASE("pad2d (constant, reflect up to size-1, edge) matches the reference in NCHW and NHWC") {
  test::require_registered("pad2d", {"direct"});
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(71 + int(p));
    for (int t = 0; t < scaled(90); ++t) {
      const int64_t N = uniform(rng, 1, 3), C = uniform(rng, 1, 9), H = uniform(rng, 1, 15),
                    W = uniform(rng, 1, 15);
      Pad2DParams pp;
      pp.mode = static_cast<PadMode>(t % 3);
      const int hmax = pp.mode == PadMode::Reflect ? int(H) - 1 : 5;
      const int wmax = pp.mode == PadMode::Reflect ? int(W) - 1 : 5;
      pp.pad = {uniform(rng, 0, hmax), uniform(rng, 0, wmax), uniform(rng, 0, hmax), uniform(rng, 0, wmax)};
      pp.value = 0.25f * float(uniform(rng, -4, 4));
      const Shape y{N, C, H + pp.pad.top + pp.pad.bottom, W + pp.pad.left + pp.pad.right};
      const OpCase c = make_case(pp, {{N, C, H, W}}, {false}, y, 800 + t);
      CHECK(check_case(c, p, {}, t % 3 == 2).size() == 1);
      CHECK(test::check_case_in_layout(c, p, Layout::NHWC, {}, t % 3 == 1).size() == 1);
    }
  }
}

CUDA_TEST_CASE("instance_norm matches the reference (rank 3 and 4, large planes, every activation)") {
  test::require_registered("instance_norm", {"direct"});
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(73 + int(p));
    for (int t = 0; t < scaled(80); ++t) {
      const int64_t N = uniform(rng, 1, 3), C = uniform(rng, 1, 12);
      Shape s{N, C, uniform(rng, 1, 33), uniform(rng, 1, 33)};
      if (t % 4 == 0) s = {N, C, uniform(rng, 1, 700)};
      if (t % 10 == 9) s = {1, C, 128, 96};  // many elements per thread of the block
      InstanceNormParams ip;
      ip.epsilon = t % 2 ? 1e-5f : 1e-3f;
      ip.activation = random_activation(rng);
      const Shape c{C};
      OpCase oc = make_case(ip, {s, c, c}, {false, true, true}, s, 900 + t);
      oc.fill = [](std::vector<std::vector<float>>& in) {
        for (float& v : in[0]) v = 3.f * v + 1.f;  // a mean away from 0
      };
      CHECK(check_case(oc, p, {}, t % 3 == 2).size() == 1);
    }
  }
}

CUDA_TEST_CASE("channel_shuffle and slice match the reference (fp32, fp16)") {
  test::require_registered("channel_shuffle", {"direct"});
  test::require_registered("slice", {"direct"});
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CAPTURE(test::precision_label(p));
    std::mt19937_64 rng(79 + int(p));
    for (int t = 0; t < scaled(60); ++t) {
      const int g = uniform(rng, 1, 4);
      const Shape xs{uniform(rng, 1, 3), int64_t(g) * uniform(rng, 1, 6), uniform(rng, 1, 13),
                     uniform(rng, 1, 13)};
      CHECK(check_case(make_case(ChannelShuffleParams{g}, {xs}, {false}, xs, 1000 + t), p, {},
                       t % 3 == 2).size() == 1);
      const int axis = uniform(rng, 1, 3);
      const int64_t dim = xs[size_t(axis)], start = uniform(rng, 0, int(dim) - 1),
                    end = uniform(rng, int(start) + 1, int(dim));
      Shape ys = xs;
      ys[size_t(axis)] = end - start;
      CHECK(check_case(make_case(SliceParams{axis, start, end}, {xs}, {false}, ys, 1100 + t), p, {},
                       t % 3 == 1).size() == 1);
    }
  }
}

CUDA_TEST_CASE("bad calls throw infer::Error") {
  Conv2DParams c3;
  c3.pad = {1, 1, 1, 1};
  ConvPool2DParams cp;
  cp.conv.pad = {1, 1, 1, 1};
  Pool2DParams pool;
  ReshapeParams rp;
  rp.shape = {24};
  const Shape s{2, 3, 4, 4};
  const Shape c{3};
  std::vector<OpCase> cases = {
      make_case(c3, {{1, 3, 6, 6}, {4, 3, 3, 3}, {4}}, {false, true, true}, {1, 4, 6, 6}, 1),
      make_case(Conv2DParams{}, {{1, 3, 6, 6}, {4, 3, 1, 1}, {4}}, {false, true, true}, {1, 4, 6, 6}, 1),
      make_case(DenseParams{}, {{2, 5}, {3, 5}, {3}}, {false, true, true}, {2, 3}, 1),
      make_case(cp, {{1, 3, 8, 8}, {4, 3, 3, 3}, {4}}, {false, true, true}, {1, 4, 4, 4}, 1),
      make_case(pool, {s}, {false}, {2, 3, 2, 2}, 1),
      make_case(ActivationParams{}, {s}, {false}, s, 1),
      make_case(AddParams{}, {s, s}, {false, false}, s, 1),
      make_case(BatchNormParams{}, {s, c, c, c, c}, {false, true, true, true, true}, s, 1),
      make_case(FlattenParams{}, {s}, {false}, {2, 48}, 1),
      make_case(rp, {{2, 3, 8}}, {false}, {2, 24}, 1),
      make_case(SoftmaxParams{}, {s}, {false}, s, 1),
      make_case(ConcatParams{}, {s, s}, {false, false}, {2, 6, 4, 4}, 1)};
  cases[7].fill = [](std::vector<std::vector<float>>& in) {
    for (float& v : in[4]) v = v * v + 0.1f;
  };
  for (const OpCase& oc : cases) {
    const std::string what = test::describe(oc);
    CAPTURE(what);
    const test::CaseData cd = test::make_case_data(oc, Precision::FP32);
    CHECK(test::check_bad_calls(cd.node) >= 1);
  }
}
