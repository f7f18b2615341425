// The per-channel PRelu epilogue (issue 28 must 4, the fuse_prelu pass): every cpu variant of conv2d,
// conv_transpose2d and dense that declares KernelVariant::fuses_prelu, run on the fused node, against
// the unfused pair (the reference variant of the producer, then the prelu select in float), on random
// shapes with odd sizes, edge paddings, groups and dilation, outputs and workspaces poisoned with NaN;
// in NHWC too for the NHWC variants. Runs at every CPU ISA level (ctest NAME@level). Also: variants
// without the flag never see such a node, and the shape rule's checks of the slope input.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "infer/kernel.h"
#include "test_util.h"

using namespace infer;
using infer::test::poison;
using infer::test::random_vector;
using infer::test::rel_error;
using infer::test::run_cpu_variant;
using infer::test::to_nchw;
using infer::test::to_nhwc;
using infer::test::uniform;

namespace {

// NCHW [N, C, ...] <-> NHWC order for the NHWC variants (rank 4 only).

// One fused node: `params` with a PRelu epilogue, inputs x, weight, bias (always, as the pass makes
// it), slope; the unfused expectation computed from the reference variant of the producer.
struct Case {
  OpParams fused, plain;
  std::vector<Shape> shapes;  // x, weight, bias, slope
  Shape y;
  std::vector<std::vector<float>> data;
};

void set_prelu(OpParams& p) {
  std::visit([](auto& q) {
    if constexpr (requires { q.activation; }) q.activation = Activation{ActivationKind::PRelu, 0.01f, 0.f};
  }, p);
}

NodeDesc desc_of(const OpParams& params, const std::vector<Shape>& shapes, const Shape& y,
                 const std::vector<std::vector<float>>& data, Layout layout) {
  NodeDesc d;
  d.params = params;
  d.input_shapes = shapes;
  d.output_shapes = {y};
  d.constants = {nullptr};
  for (size_t i = 1; i < shapes.size(); ++i) d.constants.push_back(data[i].data());
  d.layout = layout;
  return d;
}

// The expected output: the producer unfused (reference, no activation), then y < 0 ? slope[c] * y : y
// per channel (axis 1), in float as the prelu kernels compute it.
std::vector<float> expected(const Case& c) {
  std::vector<Shape> shapes(c.shapes.begin(), c.shapes.end() - 1);
  std::vector<std::vector<float>> data(c.data.begin(), c.data.end() - 1);
  const NodeDesc plain = desc_of(c.plain, shapes, c.y, data, Layout::NCHW);
  std::vector<float> y = run_cpu_variant("reference", plain, data);
  const std::vector<float>& slope = c.data.back();
  const int64_t C = c.y[1], inner = shape_numel(c.y) / (c.y[0] * C);
  for (size_t i = 0; i < y.size(); ++i) {
    const float s = slope[static_cast<size_t>((static_cast<int64_t>(i) / inner) % C)];
    y[i] = y[i] < 0.f ? s * y[i] : y[i];
  }
  return y;
}

// Every cpu variant of the case's op that declares fuses_prelu and applies, in each layout it runs
// (rank-4 nodes), against the expectation; returns how many ran and adds "name/layout" to `seen`. The
// variants without the flag must not apply to the fused node.
int check_variants(const Case& c, const std::string& op, std::set<std::string>& seen) {
  const std::vector<float> want = expected(c);
  int ran = 0;
  for (const KernelVariant* v : KernelRegistry::global().variants("cpu", op)) {
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      if (layout == Layout::NHWC && c.y.size() != 4) continue;
      const NodeDesc node = desc_of(c.fused, c.shapes, c.y, c.data, layout);
      if (!v->fuses_prelu) {
        CHECK_FALSE(variant_applies(*v, node));
        continue;
      }
      if (!variant_applies(*v, node)) continue;
      CAPTURE(v->name);
      CAPTURE(layout_name(layout));
      std::shared_ptr<void> prepared = v->prepare ? v->prepare(node) : nullptr;
      std::vector<std::vector<float>> in = c.data;
      if (layout == Layout::NHWC) in[0] = to_nhwc(in[0], c.shapes[0]);
      std::vector<float> out(static_cast<size_t>(shape_numel(c.y)));
      poison(out);
      std::vector<float> ws(v->workspace_bytes ? v->workspace_bytes(node) / sizeof(float) + 1 : 0);
      poison(ws);
      KernelCall call{node, {}, {out.data()}, ws.empty() ? nullptr : ws.data(), prepared.get()};
      for (const auto& d : in) call.inputs.push_back(d.data());
      v->run(call);
      if (layout == Layout::NHWC) out = to_nchw(out, c.y);
      CHECK(infer::test::all_finite(out));
      CHECK(rel_error(out, want) <= 1e-5);
      seen.insert(v->name + "/" + layout_name(layout));
      ++ran;
    }
  }
  return ran;
}

// Slopes of both signs and distinct per channel (a per-channel PRelu proper), one of them 0.
std::vector<float> slopes(int64_t C, uint64_t seed) {
  std::vector<float> s = random_vector(static_cast<size_t>(C), seed, -0.5f, 1.5f);
  if (C > 1) s[1] = 0.f;
  return s;
}

Case finish(OpParams p, std::vector<Shape> shapes, Shape y, uint64_t seed) {
  Case c;
  c.plain = p;
  std::visit([](auto& q) {
    if constexpr (requires { q.activation; }) q.activation = Activation{};
  }, c.plain);
  c.fused = c.plain;
  set_prelu(c.fused);
  const int64_t C = y[1];
  if (shapes.size() == 2) shapes.push_back({C});
  shapes.push_back({C});
  c.shapes = shapes;
  c.y = y;
  for (size_t i = 0; i + 1 < shapes.size(); ++i)
    c.data.push_back(random_vector(static_cast<size_t>(shape_numel(shapes[i])), seed + i));
  c.data.push_back(slopes(C, seed + 99));
  return c;
}

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& x : s) out += (out.empty() ? "" : " ") + x;
  return out;
}

}  // namespace

TEST_CASE("fused prelu epilogue: cpu conv2d variants (NCHW and NHWC) equal conv2d then prelu") {
  std::mt19937_64 rng(2811);
  int ran = 0;
  std::set<std::string> seen;
  for (int t = 0; t < 60; ++t) {
    CAPTURE(t);
    Conv2DParams p;
    std::vector<Shape> shapes;
    Shape y;
    if (t % 3 == 2) {  // grouped / depthwise / dilated
      const auto r = infer::test::random_grouped_conv2d_shapes(rng, t % 2 == 0, false);
      p = r.p, shapes = r.inputs, y = r.y;
      if (t % 6 == 2) {  // depthwise with multiplier 1 (depthwise_nhwc's domain)
        const int64_t C = shapes[0][1];
        shapes[1][0] = y[1] = C;
        if (shapes.size() == 3) shapes[2] = {C};
      }
    } else {  // ungrouped: 1x1, 3x3 (Winograd), any kernel, edge paddings, odd sizes
      const int k = t % 3 == 0 ? (t % 2 ? 1 : 3) : uniform(rng, 1, 5);
      p.stride_h = p.stride_w = t % 4 == 0 ? 1 : uniform(rng, 1, 2);
      const int pad = uniform(rng, 0, k - 1);
      p.pad = {pad, uniform(rng, 0, k - 1), uniform(rng, 0, k - 1), pad};
      const int64_t N = uniform(rng, 1, 2), CI = uniform(rng, 1, 19), CO = uniform(rng, 1, 37);
      int64_t H, W;
      do {
        H = uniform(rng, 1, 23), W = uniform(rng, 1, 23);
      } while (H + p.pad.top + p.pad.bottom < k || W + p.pad.left + p.pad.right < k);
      shapes = {{N, CI, H, W}, {CO, CI, k, k}};
      if (t % 5 != 0) shapes.push_back({CO});
      y = {N, CO, (H + p.pad.top + p.pad.bottom - k) / p.stride_h + 1,
           (W + p.pad.left + p.pad.right - k) / p.stride_w + 1};
    }
    ran += check_variants(finish(p, shapes, y, 100 + static_cast<uint64_t>(t) * 7), "conv2d", seen);
  }
  CHECK(ran >= 120);  // every case ran on several variants
  // every conv2d variant that declares the epilogue, in its layouts
  CHECK(joined(seen) == joined({"reference/nchw", "im2col_gemm/nchw", "depthwise/nchw", "packed_gemm/nchw",
                                      "packed_implicit/nchw", "winograd_f4x4/nchw", "winograd_f2x2/nchw",
                                      "gemm_nhwc/nhwc", "depthwise_nhwc/nhwc"}));
}

TEST_CASE("fused prelu epilogue: cpu conv_transpose2d variants equal conv_transpose2d then prelu") {
  std::mt19937_64 rng(2812);
  int ran = 0;
  std::set<std::string> seen;
  for (int t = 0; t < 45; ++t) {
    CAPTURE(t);
    const auto r = infer::test::random_grouped_conv_transpose2d_shapes(rng, t);
    ConvTranspose2DParams p = r.p;
    if (t % 3 == 0) p.dilation_h = p.dilation_w = 1;  // the plain variants' domain
    if (t % 6 == 0) p.stride_h = p.stride_w = 1;       // flipped_conv's
    std::vector<Shape> shapes = r.inputs;
    const int64_t ekh = p.dilation_h * (shapes[1][2] - 1) + 1, ekw = p.dilation_w * (shapes[1][3] - 1) + 1;
    p.output_padding_h = std::min(p.output_padding_h, std::max(p.stride_h, p.dilation_h) - 1);
    p.output_padding_w = std::min(p.output_padding_w, std::max(p.stride_w, p.dilation_w) - 1);
    const Shape& x = shapes[0];
    const int64_t HO = (x[2] - 1) * p.stride_h - p.pad.top - p.pad.bottom + ekh + p.output_padding_h;
    const int64_t WO = (x[3] - 1) * p.stride_w - p.pad.left - p.pad.right + ekw + p.output_padding_w;
    if (HO < 1 || WO < 1) continue;
    ran += check_variants(finish(p, shapes, {x[0], r.y[1], HO, WO}, 300 + static_cast<uint64_t>(t) * 5),
                          "conv_transpose2d", seen);
  }
  CHECK(ran >= 40);
  CHECK(joined(seen) == joined({"reference/nchw", "flipped_conv/nchw", "segregated_gemm/nchw",
                                      "gemm_col2im/nchw", "conventional/nchw"}));
}

TEST_CASE("fused prelu epilogue: cpu dense equals dense then prelu") {
  std::mt19937_64 rng(2813);
  int ran = 0;
  std::set<std::string> seen;
  for (int t = 0; t < 12; ++t) {
    // Every fourth case at batch 1, where dense.gemv applies too.
    const int64_t N = t % 4 == 0 ? 1 : uniform(rng, 1, 5), FI = uniform(rng, 1, 70), FO = uniform(rng, 1, 45);
    std::vector<Shape> shapes = {{N, FI}, {FO, FI}};
    if (t % 3 != 0) shapes.push_back({FO});
    ran += check_variants(finish(DenseParams{}, shapes, {N, FO}, 500 + static_cast<uint64_t>(t)), "dense", seen);
  }
  CHECK(ran >= 27);  // the reference and gemm every case, gemv the batch-1 ones (at least 3)
  CHECK(joined(seen) == joined({"reference/nchw", "gemm/nchw", "gemv/nchw"}));
}

TEST_CASE("fused prelu epilogue: the shape rule wants bias and slope [C_out]; no file form; other ops refuse it") {
  const std::string no_slope = infer::test::shape_error(
      [] { Conv2DParams p; p.activation.kind = ActivationKind::PRelu; return OpParams{p}; }(),
      {{1, 2, 5, 5}, {3, 2, 3, 3}, {3}});
  CHECK(no_slope.find("expects 4 inputs, got 3") != std::string::npos);
  const std::string bad_slope = infer::test::shape_error(
      [] { DenseParams p; p.activation.kind = ActivationKind::PRelu; return OpParams{p}; }(),
      {{1, 4}, {3, 4}, {3}, {4}});
  CHECK(bad_slope.find("input 3 (prelu slope) has shape 4 but must be [3] (one per output channel)") !=
        std::string::npos);
  const std::string batchnorm = infer::test::shape_error(
      [] { BatchNormParams p; p.activation.kind = ActivationKind::PRelu; return OpParams{p}; }(),
      {{1, 3}, {3}, {3}, {3}, {3}});
  CHECK(batchnorm.find("field activation has unknown value 15") != std::string::npos);
  Conv2DParams both;
  both.add_residual = true;
  both.activation.kind = ActivationKind::PRelu;
  CHECK(infer::test::shape_error(both, {{1, 2, 5, 5}, {3, 2, 3, 3}, {3}, {1, 3, 3, 3}})
            .find("add_residual and a prelu activation do not combine (both take input 3)") != std::string::npos);
  CHECK(std::string(activation_name(ActivationKind::PRelu)) == "prelu");
  const Activation a = channel_activation(Activation{ActivationKind::PRelu, 0.01f, 0.f},
                                          std::vector<float>{0.5f, -2.f}.data(), 1);
  CHECK(a.kind == ActivationKind::LeakyRelu);
  CHECK(a.alpha == -2.f);
}
