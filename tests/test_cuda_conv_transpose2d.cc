// Tests of the CUDA transposed-convolution variants (kernels/cuda/conv_transpose2d/) against the
// reference kernel through the registry (every registered cuda variant runs wherever it applies):
// >= 200 random shapes per variant in fp32 (kernel 1-7, asymmetric padding 0..k-1, output_padding,
// odd and even sizes, channels 1..67, batch 1..3, every activation), 60 in fp16 and in tf32 (the GEMM
// variants); grouped / depthwise-transposed / dilated nodes through gemm_col2im and conventional (the
// others not applicable) in every precision; the paper's 4x4-input / 5x5-kernel / padding-2 example;
// Table 4's layers at batch 1; the
// conventional workspace = the upsampled buffer (Table 4's memory column); applicability and bad
// calls. Harness: tests/cuda_test_util.h (NaN-poisoned outputs and workspaces, guard bytes, CUDA-graph
// capture of every third case). Skipped (one line on stdout) when there is no CUDA device.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "infer/error.h"
#include "kernels/cpu/conv_transpose2d.h"
#include "infer/kernel.h"

using namespace infer;
using infer::test::check_case;
using infer::test::Coverage;
using infer::test::OpCase;
using infer::test::scaled;

namespace {

const std::vector<std::string> kNames = {"conventional", "segregated_unified", "segregated_gemm",
                                         "segregated_cublas", "flipped_conv", "gemm_col2im"};
const std::vector<std::string> kStride2 = {"segregated_unified", "segregated_gemm", "segregated_cublas"};

int64_t out_size(int64_t in, int s, int pa, int pb, int64_t k, int op) {
  return (in - 1) * s - pa - pb + k + op;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// x [N,C_in,H,W], weight [C_in,C_out/groups,KH,KW] (a constant), optional bias [C_out] (a constant).
OpCase tconv_case(const ConvTranspose2DParams& p, const Shape& x, const Shape& w, bool bias,
                  uint64_t seed) {
  OpCase c;
  c.params = p;
  c.inputs = {x, w};
  c.constant = {false, true, true};
  const int64_t co = w[1] * p.groups;
  if (bias) c.inputs.push_back({co});
  c.output = {x[0], co,
              out_size(x[2], p.stride_h, p.pad.top, p.pad.bottom, p.dilation_h * (w[2] - 1) + 1,
                       p.output_padding_h),
              out_size(x[3], p.stride_w, p.pad.left, p.pad.right, p.dilation_w * (w[3] - 1) + 1,
                       p.output_padding_w)};
  c.seed = seed;
  return c;
}

// A random case with the stride drawn from `strides` (stride_w differs from stride_h a quarter of
// the time when `square` is false); output size >= 1.
OpCase random_case(std::mt19937& rng, const std::vector<int>& strides, bool square, uint64_t seed) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (;;) {
    ConvTranspose2DParams p;
    const int kh = uni(1, 7), kw = uni(1, 7);
    p.stride_h = strides[size_t(uni(0, int(strides.size()) - 1))];
    p.stride_w = !square && uni(0, 3) == 0 ? strides[size_t(uni(0, int(strides.size()) - 1))]
                                            : p.stride_h;
    p.pad = {uni(0, kh - 1), uni(0, kw - 1), uni(0, kh - 1), uni(0, kw - 1)};
    if (uni(0, 1)) p.pad.bottom = p.pad.top, p.pad.right = p.pad.left;  // symmetric often
    p.output_padding_h = uni(0, p.stride_h - 1);
    p.output_padding_w = uni(0, p.stride_w - 1);
    p.activation = test::activation_case(uni(0, test::kBoundedActivationCases - 1));
    const bool bias = uni(0, 3) != 0;
    // channels 1..67, but keep C_in*C_out moderate so the double-precision oracle stays fast
    int ci = uni(1, 67), co = uni(1, 67);
    if (ci * co > 600) (uni(0, 1) ? ci : co) = uni(1, 8);
    const int n = uni(1, 3), h = uni(1, 9), wd = uni(1, 9);
    if (out_size(h, p.stride_h, p.pad.top, p.pad.bottom, kh, p.output_padding_h) < 1 ||
        out_size(wd, p.stride_w, p.pad.left, p.pad.right, kw, p.output_padding_w) < 1)
      continue;
    return tconv_case(p, {n, ci, h, wd}, {ci, co, kh, kw}, bias, seed);
  }
}

struct Plan {
  std::string name;       // the variant these shapes are drawn for
  std::vector<int> strides;
  bool square;            // stride_h == stride_w always
};

const std::vector<Plan>& plans() {
  static const std::vector<Plan> p = {{"segregated_unified", {2}, true},
                                      {"segregated_gemm", {2}, true},
                                      {"segregated_cublas", {2}, true},
                                      {"flipped_conv", {1}, true},
                                      {"conventional", {1, 2, 3}, false},
                                      {"gemm_col2im", {1, 2, 3}, false}};
  return p;
}

// Runs `count` random cases per plan (selected by `names`) in precision p through every applicable
// variant; each plan's own variant must have run on at least `count - 10` of them (scaled).
void random_plans(Precision p, const std::vector<std::string>& names, int count, unsigned seed) {
  std::mt19937 rng(seed);
  for (const Plan& plan : plans()) {
    if (!contains(names, plan.name)) continue;
    CAPTURE(plan.name);
    Coverage cov;
    const int n = scaled(count);
    for (int i = 0; i < n; ++i)
      cov.add(check_case(random_case(rng, plan.strides, plan.square, seed + 3 * i), p, {},
                         i % 3 == 2));
    const int want = scaled(count) - scaled(count) / 20;
    CHECK_MESSAGE(cov.of(plan.name) >= want,
                  plan.name << " ran on " << cov.of(plan.name) << " of " << n << " shapes");
  }
}

}  // namespace

CUDA_TEST_CASE("every expected conv_transpose2d cuda variant is registered") {
  test::require_registered("conv_transpose2d", kNames);
  for (const KernelVariant* v : test::cuda_variants("conv_transpose2d")) {
    CAPTURE(v->name);
    CHECK(v->backend == "cuda");
    CHECK(bool(v->run));
  }
}

CUDA_TEST_CASE("fp32: every variant matches the reference on >= 200 random shapes") {
  test::require_registered("conv_transpose2d", kNames);
  // 210 per plan; each plan's own variant must run on >= 200 of them
  random_plans(Precision::FP32, kNames, 210, 1234);
}

CUDA_TEST_CASE("fp16: every variant within 1e-2 of the reference on 60 random shapes") {
  test::require_registered("conv_transpose2d", kNames);
  random_plans(Precision::FP16, kNames, 60, 4321);
}

CUDA_TEST_CASE("tf32: the GEMM variants within 5e-3 of the reference on 60 random shapes") {
  test::require_registered("conv_transpose2d", kNames);
  random_plans(Precision::TF32, {"segregated_gemm", "segregated_cublas", "flipped_conv", "gemm_col2im"},
               60, 777);
}

// Groups in {1, 2, C_in}, dilation 1-3, strides 1-4, output_padding < max(stride, dilation), odd
// sizes (test::random_grouped_conv_transpose2d_shapes, the draws the cpu test makes too): gemm_col2im
// and conventional run on every case, the other variants only on the plain draws (groups 1 and
// dilation 1), and the default choice for a grouped or dilated node is gemm_col2im.
CUDA_TEST_CASE("groups and dilation: gemm_col2im and conventional match the reference, the others refuse") {
  test::require_registered("conv_transpose2d", kNames);
  for (Precision prec : test::kAllPrecisions) {
    CAPTURE(test::precision_label(prec));
    std::mt19937_64 rng(20261201 + int(prec));
    Coverage cov;
    int plain = 0, depthwise = 0, dilated = 0;
    const int n = scaled(150);
    for (int t = 0; t < n; ++t) {
      const test::RandomGroupedTconv r = test::random_grouped_conv_transpose2d_shapes(rng, t);
      const OpCase c = test::make_case(r.p, r.inputs, {false, true, true}, r.y, 8000 + 7 * uint64_t(t));
      const bool is_plain = r.p.groups == 1 && r.p.dilation_h == 1 && r.p.dilation_w == 1;
      plain += is_plain;
      depthwise += r.p.groups > 1 && r.p.groups == r.inputs[0][1];
      dilated += r.p.dilation_h > 1 || r.p.dilation_w > 1;
      const auto ran = check_case(c, prec, {}, t % 3 == 2);
      cov.add(ran);
      if (!is_plain)
        for (const std::string& name : ran)
          CHECK_MESSAGE((name == "gemm_col2im" || name == "conventional"),
                        name << " ran on a grouped or dilated node " << test::describe(c));
    }
    CHECK(cov.of("gemm_col2im") == n);
    CHECK(cov.of("conventional") == n);
    CHECK(depthwise >= n / 4);
    CHECK(dilated >= n / 2);
    CHECK(plain <= n / 4);
  }
  // the default choice for grouped / dilated nodes, e.g. a depthwise-transposed k4 s2 p1 upsampler
  ConvTranspose2DParams dw;
  dw.stride_h = dw.stride_w = 2;
  dw.pad = {1, 1, 1, 1};
  dw.groups = 32;
  const test::CaseData d =
      test::make_case_data(tconv_case(dw, {1, 32, 8, 8}, {32, 1, 4, 4}, true, 3), Precision::FP16);
  CHECK(test::default_variant("cuda", "conv_transpose2d", d.node) == "gemm_col2im");
  ConvTranspose2DParams dil;
  dil.stride_h = dil.stride_w = 2;
  dil.dilation_h = dil.dilation_w = 2;
  const test::CaseData e =
      test::make_case_data(tconv_case(dil, {1, 16, 8, 8}, {16, 8, 3, 3}, true, 4), Precision::FP32);
  CHECK(test::default_variant("cuda", "conv_transpose2d", e.node) == "gemm_col2im");
}

CUDA_TEST_CASE("groups and dilation: medium shapes (several GEMM batches, many groups, batch 3)") {
  struct Medium {
    Shape x;
    int64_t cog, kh, kw;
    int groups, sh, sw, dh, dw;
    Padding2D pad;
    int op_h, op_w;
    ActivationKind act;
  };
  const std::vector<Medium> cases = {
      // depthwise-transposed, more groups than images: one batched GEMM per image over the groups
      {{3, 64, 13, 11}, 1, 4, 4, 64, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 0, ActivationKind::Relu},
      {{2, 48, 9, 10}, 2, 3, 3, 48, 3, 2, 2, 3, {2, 0, 1, 3}, 2, 1, ActivationKind::Tanh},
      // fewer groups than images: one batched GEMM per group over the images
      {{4, 66, 7, 9}, 20, 5, 3, 2, 2, 2, 2, 1, {3, 1, 0, 2}, 1, 0, ActivationKind::LeakyRelu},
      {{5, 99, 6, 5}, 7, 3, 3, 3, 4, 1, 3, 2, {4, 2, 2, 1}, 2, 1, ActivationKind::None},
  };
  uint64_t seed = 90;
  for (Precision p : test::kAllPrecisions)
    for (const Medium& m : cases) {
      ConvTranspose2DParams params;
      params.groups = m.groups;
      params.stride_h = m.sh;
      params.stride_w = m.sw;
      params.dilation_h = m.dh;
      params.dilation_w = m.dw;
      params.pad = m.pad;
      params.output_padding_h = m.op_h;
      params.output_padding_w = m.op_w;
      params.activation.kind = m.act;
      const Shape w{m.x[1], m.cog, m.kh, m.kw};
      const auto ran = check_case(tconv_case(params, m.x, w, true, seed), p, {}, seed % 2 == 0);
      ++seed;
      CHECK(contains(ran, "gemm_col2im"));
      CHECK(contains(ran, "conventional"));
      CHECK(ran.size() == 2);
    }
}

CUDA_TEST_CASE("medium shapes: several GEMM tiles in M, N and K, asymmetric padding") {
  struct Medium {
    Shape x, w;
    int stride;
    Padding2D pad;
    int op_h, op_w;
    ActivationKind act;
  };
  const std::vector<Medium> cases = {
      {{2, 96, 13, 11}, {96, 80, 5, 3}, 2, {2, 1, 0, 2}, 1, 0, ActivationKind::Relu},
      {{3, 33, 17, 19}, {33, 130, 4, 4}, 2, {1, 1, 1, 1}, 0, 1, ActivationKind::Tanh},
      {{1, 200, 6, 7}, {200, 70, 7, 6}, 2, {6, 0, 3, 5}, 1, 1, ActivationKind::None},
      {{2, 70, 15, 9}, {70, 66, 3, 3}, 1, {1, 2, 0, 1}, 0, 0, ActivationKind::LeakyRelu},
      {{1, 129, 5, 5}, {129, 65, 4, 4}, 3, {0, 3, 2, 1}, 2, 1, ActivationKind::Sigmoid},
  };
  uint64_t seed = 50;
  for (Precision p : test::kAllPrecisions) {
    for (const Medium& m : cases) {
      ConvTranspose2DParams params;
      params.stride_h = params.stride_w = m.stride;
      params.pad = m.pad;
      params.output_padding_h = m.op_h;
      params.output_padding_w = m.op_w;
      params.activation.kind = m.act;
      const bool capture = seed % 2 == 0;
      const auto ran = check_case(tconv_case(params, m.x, m.w, true, seed++), p, {}, capture);
      CHECK(contains(ran, "conventional"));
      CHECK(contains(ran, "gemm_col2im"));
      if (m.stride == 2)
        for (const auto& name : kStride2) CHECK_MESSAGE(contains(ran, name), name << " did not run");
      if (m.stride == 1) CHECK(contains(ran, "flipped_conv"));
    }
  }
}

CUDA_TEST_CASE("the paper's 4x4 input, 5x5 kernel, stride 2, padding 2 example through every variant") {
  for (Precision p : {Precision::FP32, Precision::FP16})
    for (int op : {0, 1})
      for (int pad : {2, 1}) {  // padding 2 (even: phase order kept) and 1 (odd: phases swapped)
        ConvTranspose2DParams params;
        params.stride_h = params.stride_w = 2;
        params.pad = {pad, pad, pad, pad};
        params.output_padding_h = params.output_padding_w = op;
        for (bool capture : {false, true}) {
          const auto ran = check_case(tconv_case(params, {1, 1, 4, 4}, {1, 1, 5, 5}, false, 5), p, {},
                                      capture);
          for (const char* name : {"conventional", "segregated_unified", "segregated_gemm",
                                   "segregated_cublas", "gemm_col2im"})
            CHECK_MESSAGE(contains(ran, name), name << " did not run (pad " << pad << ", op " << op << ")");
        }
      }
}

CUDA_TEST_CASE("zoo-like layers: DCGAN k4 s2 p1 and the stride-1 4x4 projection of a 1x1 latent") {
  for (Precision p : test::kAllPrecisions) {
    ConvTranspose2DParams s2;
    s2.stride_h = s2.stride_w = 2;
    s2.pad = {1, 1, 1, 1};
    s2.activation.kind = ActivationKind::Relu;
    const auto ran = check_case(tconv_case(s2, {2, 64, 8, 8}, {64, 32, 4, 4}, true, 9), p, {}, true);
    for (const auto& name : kStride2) CHECK(contains(ran, name));

    ConvTranspose2DParams s1;  // z 1x1 -> 4x4, k4 s1 p0; projection: gemv_cols at batch <= 4, a GEMM above
    s1.activation.kind = ActivationKind::LeakyRelu;
    for (int64_t n : {3, 6}) {
      CAPTURE(n);
      const auto ran1 = check_case(tconv_case(s1, {n, 100, 1, 1}, {100, 48, 4, 4}, true, 11 + n), p, {}, true);
      for (const char* name : {"flipped_conv", "gemm_col2im", "conventional", "projection"})
        CHECK(contains(ran1, name));
    }
  }
}

CUDA_TEST_CASE("Table 4 layers at batch 1 through the stride-2 variants, fp32 and fp16") {
  // (N, C_in, C_out): input N x N x C_in, kernel 4x4, stride 2, padding 1, output 2N x 2N x C_out
  struct Row {
    const char* model;
    int64_t n, ci, co;
  };
  std::vector<Row> rows = {
      {"DCGAN", 4, 1024, 512}, {"DCGAN", 8, 512, 256},  {"DCGAN", 16, 256, 128},
      {"DCGAN", 32, 128, 3},   {"ArtGAN", 4, 512, 256}, {"ArtGAN", 8, 256, 128},
      {"ArtGAN", 16, 128, 128}, {"ArtGAN", 32, 128, 3}, {"GP-GAN", 4, 512, 256},
      {"GP-GAN", 8, 256, 128}, {"GP-GAN", 16, 128, 64}, {"GP-GAN", 32, 64, 3},
      {"EB-GAN", 4, 2048, 1024}, {"EB-GAN", 8, 1024, 512}, {"EB-GAN", 16, 512, 256},
      {"EB-GAN", 32, 256, 128}, {"EB-GAN", 64, 128, 64}, {"EB-GAN", 128, 64, 64}};
  // quick mode (compute-sanitizer): a small-N/large-K layer (split-K path) and a large-N one
  if (test::quick_mode()) rows = {{"GP-GAN", 4, 512, 256}, {"DCGAN", 32, 128, 3}};
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = 2;
  p.pad = {1, 1, 1, 1};
  uint64_t seed = 900;
  for (Precision prec : {Precision::FP32, Precision::FP16})
    for (const Row& r : rows) {
      const std::string layer = std::string(r.model) + " (" + std::to_string(r.n) + "," +
                                std::to_string(r.ci) + "," + std::to_string(r.co) + ")";
      CAPTURE(layer);
      const auto ran = check_case(tconv_case(p, {1, r.ci, r.n, r.n}, {r.ci, r.co, 4, 4}, true, seed++),
                                  prec, {}, false, layer);
      for (const auto& name : kStride2) CHECK_MESSAGE(contains(ran, name), name << " did not run");
    }
}

CUDA_TEST_CASE("Table 4 memory column: the conventional workspace is the upsampled buffer") {
  const KernelVariant* conventional =
      KernelRegistry::global().find("cuda", "conv_transpose2d", "conventional");
  const KernelVariant* unified =
      KernelRegistry::global().find("cuda", "conv_transpose2d", "segregated_unified");
  const KernelVariant* gemm = KernelRegistry::global().find("cuda", "conv_transpose2d", "segregated_gemm");
  REQUIRE(conventional != nullptr);
  REQUIRE(unified != nullptr);
  REQUIRE(gemm != nullptr);
  REQUIRE(bool(conventional->workspace_bytes));
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = 2;
  p.pad = {1, 1, 1, 1};
  std::vector<float> w(1), b(1);  // applicability/workspace only look at shapes and non-null constants
  auto node_for = [&](const Shape& x, const Shape& wshape, Precision prec) {
    NodeDesc node;
    node.params = p;
    node.input_shapes = {x, wshape, {wshape[1]}};
    node.constants = {nullptr, w.data(), b.data()};
    node.output_shapes = {{x[0], wshape[1], 2 * x[2], 2 * x[3]}};
    node.precision = prec;
    return node;
  };
  // DCGAN layer 2: 4x4x1024 input, 4x4 kernel -> 11x11x1024 elements
  CHECK(conventional->workspace_bytes(node_for({1, 1024, 4, 4}, {1024, 512, 4, 4}, Precision::FP32)) ==
        495616);
  CHECK(conventional->workspace_bytes(node_for({1, 1024, 4, 4}, {1024, 512, 4, 4}, Precision::FP16)) ==
        495616 / 2);
  CHECK(conventional->workspace_bytes(node_for({3, 1024, 4, 4}, {1024, 512, 4, 4}, Precision::FP32)) ==
        3 * 495616);
  // EB-GAN's six stride-2 layers: 35,534,592 bytes in all (fp32, batch 1)
  const int64_t layers[][3] = {{4, 2048, 1024}, {8, 1024, 512}, {16, 512, 256},
                               {32, 256, 128},  {64, 128, 64},  {128, 64, 64}};
  uint64_t total = 0;
  for (const auto& l : layers) {
    const NodeDesc node = node_for({1, l[1], l[0], l[0]}, {l[1], l[2], 4, 4}, Precision::FP32);
    const uint64_t conv_ws = conventional->workspace_bytes(node);
    total += conv_ws;
    // the unified segregated kernel needs no buffer at all (segregated_gemm may hold split-K
    // partial sums; reported, not bounded here)
    const uint64_t unified_ws = unified->workspace_bytes ? unified->workspace_bytes(node) : 0;
    const uint64_t gemm_ws = gemm->workspace_bytes ? gemm->workspace_bytes(node) : 0;
    CHECK(unified_ws == 0);
    // segregated_cublas: per-phase columns + phase outputs of a chunk of images, <= 256 MiB (+ the
    // two 256-byte alignments) whenever one image fits
    if (const KernelVariant* cublas =
            KernelRegistry::global().find("cuda", "conv_transpose2d", "segregated_cublas")) {
      const uint64_t cublas_ws = cublas->workspace_bytes(node);
      CHECK(cublas_ws <= (uint64_t(256) << 20) + 512);
      MESSAGE("EB-GAN (" << l[0] << "," << l[1] << "," << l[2] << "): segregated_cublas " << cublas_ws
                         << " B of workspace");
    }
    MESSAGE("EB-GAN (" << l[0] << "," << l[1] << "," << l[2] << "): conventional " << conv_ws
                       << " B, segregated_gemm " << gemm_ws << " B of workspace");
  }
  CHECK(total == 35534592);

  // the same formula (the cpu helper's per-sample float32 bytes) on random shapes, batch and precision
  std::mt19937 rng(99);
  for (int i = 0; i < 100; ++i) {
    const OpCase c = random_case(rng, {1, 2, 3}, false, 1);
    const auto& cp = std::get<ConvTranspose2DParams>(c.params);
    for (Precision prec : {Precision::FP32, Precision::FP16}) {
      NodeDesc node;
      node.params = c.params;
      node.input_shapes = c.inputs;
      node.output_shapes = {c.output};
      node.constants = {nullptr, w.data(), b.data()};
      node.constants.resize(c.inputs.size());
      node.precision = prec;
      if (!conventional->applicable(node)) {
        FAIL_CHECK("conventional not applicable to " << test::describe(c));
        continue;
      }
      const uint64_t want = uint64_t(c.inputs[0][0]) *
                            conv_transpose2d_upsampled_bytes(cp, c.inputs[0], c.inputs[1]) / 4 *
                            cuda::element_size(prec);
      CHECK_MESSAGE(conventional->workspace_bytes(node) == want, test::describe(c));
    }
  }
}

CUDA_TEST_CASE("the default heuristic: col2im for small stride-2 layers (batched 4x4: segregated_cublas), segregated GEMM for large, flipped_conv for stride 1") {
  std::vector<float> w(1), b(1);
  auto pick = [&](const ConvTranspose2DParams& p, const Shape& x, const Shape& ws) -> std::string {
    NodeDesc node;
    node.params = p;
    node.input_shapes = {x, ws, {ws[1]}};
    node.constants = {nullptr, w.data(), b.data()};
    node.output_shapes = {{x[0], ws[1],
                           out_size(x[2], p.stride_h, p.pad.top, p.pad.bottom, ws[2], p.output_padding_h),
                           out_size(x[3], p.stride_w, p.pad.left, p.pad.right, ws[3], p.output_padding_w)}};
    return test::default_variant("cuda", "conv_transpose2d", node);  // as the session chooses
  };
  ConvTranspose2DParams s2;
  s2.stride_h = s2.stride_w = 2;
  s2.pad = {1, 1, 1, 1};
  // From the H100 measurements (kernels/cuda/conv_transpose2d/gemm_col2im.cu, gemm_col2im_priority):
  // cuBLAS + col2im up to 64x64 inputs, the one-launch segregated GEMM above, the projection GEMM (one over
  // the whole batch) for a 1x1 input.
  CHECK(pick(s2, {1, 512, 8, 8}, {512, 256, 4, 4}) == "gemm_col2im");
  CHECK(pick(s2, {1, 64, 128, 128}, {64, 64, 4, 4}) == "segregated_gemm");
  // batched small-spatial layers: the one batched cuBLAS GEMM over the phases (segregated_cublas_priority)
  CHECK(pick(s2, {1, 2048, 4, 4}, {2048, 1024, 4, 4}) == "gemm_col2im");
  CHECK(pick(s2, {32, 2048, 4, 4}, {2048, 1024, 4, 4}) == "segregated_cublas");
  CHECK(pick(s2, {64, 512, 4, 4}, {512, 256, 4, 4}) == "segregated_cublas");
  CHECK(pick(s2, {64, 1024, 8, 8}, {1024, 512, 4, 4}) == "segregated_cublas");
  CHECK(pick(s2, {64, 256, 8, 8}, {256, 128, 4, 4}) == "gemm_col2im");
  CHECK(pick(s2, {64, 128, 32, 32}, {128, 64, 4, 4}) == "gemm_col2im");
  ConvTranspose2DParams latent;  // stride 1, no padding: z [N,100,1,1] -> [N,C,4,4]
  CHECK(pick(latent, {4, 100, 1, 1}, {100, 512, 4, 4}) == "projection");  // one GEMM over the batch
  CHECK(pick(latent, {1, 100, 1, 1}, {100, 512, 4, 4}) == "projection");
  ConvTranspose2DParams s1;
  s1.pad = {1, 1, 1, 1};
  CHECK(pick(s1, {1, 64, 32, 32}, {64, 64, 3, 3}) == "flipped_conv");
  ConvTranspose2DParams s3;
  s3.stride_h = s3.stride_w = 3;
  const std::string general = pick(s3, {1, 16, 8, 8}, {16, 8, 3, 3});
  CHECK((general == "gemm_col2im" || general == "conventional"));
}

CUDA_TEST_CASE("bad nodes are not applicable") {
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = 2;
  std::vector<float> w(54, 0.5f), b(2, 0.5f);
  NodeDesc good;
  good.params = p;
  good.input_shapes = {{1, 3, 4, 4}, {3, 2, 3, 3}, {2}};
  good.output_shapes = {{1, 2, 9, 9}};
  good.constants = {nullptr, w.data(), b.data()};
  for (const char* name : {"conventional", "segregated_unified", "segregated_gemm", "segregated_cublas",
                           "gemm_col2im"})
    CHECK_MESSAGE(KernelRegistry::global().find("cuda", "conv_transpose2d", name)->applicable(good), name);
  CHECK(!KernelRegistry::global().find("cuda", "conv_transpose2d", "flipped_conv")->applicable(good));

  NodeDesc wrong_out = good;
  wrong_out.output_shapes = {{1, 2, 8, 9}};
  NodeDesc wrong_ch = good;
  wrong_ch.input_shapes[1] = {4, 2, 3, 3};
  NodeDesc dilated_wrong_out = good;  // dilation 2 makes the output 11 rows
  std::get<ConvTranspose2DParams>(dilated_wrong_out.params).dilation_h = 2;
  NodeDesc dilated = dilated_wrong_out;
  dilated.output_shapes = {{1, 2, 11, 9}};
  NodeDesc grouped = good;  // depthwise-transposed: 3 groups of 1 input, 2 outputs
  std::vector<float> b6(6, 0.5f);
  std::get<ConvTranspose2DParams>(grouped.params).groups = 3;
  grouped.input_shapes[2] = {6};
  grouped.output_shapes = {{1, 6, 9, 9}};
  grouped.constants[2] = b6.data();
  NodeDesc no_const = good;
  no_const.constants = {nullptr, nullptr, nullptr};
  NodeDesc stride_21 = good;
  std::get<ConvTranspose2DParams>(stride_21.params).stride_w = 1;
  stride_21.output_shapes = {{1, 2, 9, 6}};
  for (const KernelVariant* v : test::cuda_variants("conv_transpose2d")) {
    CAPTURE(v->name);
    REQUIRE(bool(v->applicable));
    CHECK(!v->applicable(wrong_out));
    CHECK(!v->applicable(wrong_ch));
    CHECK(!v->applicable(dilated_wrong_out));
    // groups and dilation: only the general variants
    const bool general = v->name == "gemm_col2im" || v->name == "conventional";
    CHECK(v->applicable(dilated) == general);
    CHECK(v->applicable(grouped) == general);
    // cudnn and projection read an NCHW weight from the device as stored; in NHWC they re-lay it out
    // from the host constant, so only there is a constant required.
    if (v->name == "cudnn" || v->name == "projection") {
      NodeDesc nhwc = no_const;
      nhwc.layout = Layout::NHWC;
      CHECK(!v->applicable(nhwc));
    } else if (v->prepare) {
      CHECK(!v->applicable(no_const));
    }
    if (v->name == "segregated_unified" || v->name == "segregated_gemm" ||
        v->name == "segregated_cublas" || v->name == "flipped_conv")
      CHECK(!v->applicable(stride_21));
  }
}

// Last: a variant that does not check its call could fault the device for the rest of the process.
CUDA_TEST_CASE("bad calls throw infer::Error") {
  for (int stride : {2, 1}) {
    CAPTURE(stride);
    ConvTranspose2DParams p;
    p.stride_h = p.stride_w = stride;
    p.pad = {1, 1, 1, 1};
    std::vector<float> w(3 * 2 * 4 * 4, 0.5f), b(2, 0.5f);
    NodeDesc good;
    good.params = p;
    good.input_shapes = {{1, 3, 4, 4}, {3, 2, 4, 4}, {2}};
    const int64_t o = out_size(4, stride, 1, 1, 4, 0);
    good.output_shapes = {{1, 2, o, o}};
    good.constants = {nullptr, w.data(), b.data()};
    CHECK(test::check_bad_calls(good) >= 3);
  }
}
