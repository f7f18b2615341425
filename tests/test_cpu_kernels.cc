// Tests of the fast CPU kernels (kernels/cpu: conv2d im2col_gemm, dense gemm and gemv, pool2d / activation /
// add / batchnorm / softmax / log_softmax / prelu / concat / flatten / reshape direct): every variant against the
// reference kernel through KernelRegistry::global() on many seeded random shapes, outputs and
// workspaces poisoned with NaN before each run, relative error <= 1e-5; the heuristic picks the
// fast variants; malformed calls are Errors; whole zoo models on backend "cpu" vs "reference"; and the
// int8 GEMM (qgemm.h) against exact integer sums.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/infer.h"
#include "infer/kernel.h"
#include "kernels/cpu/qgemm.h"
#include "test_util.h"
#include "zoo.h"

using namespace infer;
using infer::test::poison;
using infer::test::random_vector;
using infer::test::rel_error;
using infer::test::uniform;

using infer::test::random_activation;

namespace {

constexpr double kTol = 1e-5;

// Runs variant `name` of `op` on backend cpu through the registry: workspace of workspace_bytes()
// (poisoned), prepare() if present, output poisoned. Returns the output.
std::vector<float> run_variant(const std::string& name, const NodeDesc& node,
                               const std::vector<std::vector<float>>& inputs) {
  const std::string op = op_name(op_type(node.params));
  const KernelVariant* v = KernelRegistry::global().find("cpu", op, name);
  REQUIRE_MESSAGE(v != nullptr, "no variant cpu/" << op << "/" << name);
  if (v->applicable) REQUIRE_MESSAGE(v->applicable(node), op << "/" << name << " not applicable");
  std::vector<float> workspace;
  if (v->workspace_bytes) {
    workspace.resize(v->workspace_bytes(node) / sizeof(float) + 1);
    poison(workspace);
  }
  std::shared_ptr<void> prepared = v->prepare ? v->prepare(node) : nullptr;
  std::vector<float> out(static_cast<size_t>(shape_numel(node.output_shapes.at(0))));
  poison(out);
  KernelCall call{node, {}, {out.data()}, workspace.empty() ? nullptr : workspace.data(), prepared.get()};
  for (const auto& in : inputs) call.inputs.push_back(in.data());
  v->run(call);
  return out;
}

// Runs `fast` and the reference on the same node and inputs; checks the relative error.
void check_against_reference(const std::string& fast, const NodeDesc& node,
                             const std::vector<std::vector<float>>& inputs, double tol = kTol) {
  const std::vector<float> ref = run_variant("reference", node, inputs);
  const std::vector<float> got = run_variant(fast, node, inputs);
  CHECK(rel_error(got, ref) <= tol);
}

// The float lanes of one vector at a CPU ISA level (kernels/cpu/isa.h: what the Winograd tiles and the
// packed GEMM's columns are rounded to).
int64_t lanes(CpuIsa isa) { return isa == CpuIsa::Avx512 ? 16 : isa == CpuIsa::Avx2 ? 8 : 4; }

NodeDesc make_node(OpParams params, std::vector<Shape> inputs, Shape output) {
  NodeDesc node;
  node.params = std::move(params);
  node.input_shapes = std::move(inputs);
  node.output_shapes = {std::move(output)};
  node.constants.assign(node.input_shapes.size(), nullptr);
  return node;
}

std::vector<std::vector<float>> random_inputs(const std::vector<Shape>& shapes, uint64_t seed) {
  std::vector<std::vector<float>> v;
  for (const Shape& s : shapes) v.push_back(random_vector(static_cast<size_t>(shape_numel(s)), seed++));
  return v;
}

std::string describe(const NodeDesc& node) {
  std::string s;
  for (const Shape& in : node.input_shapes) s += shape_str(in) + " ";
  return s + "-> " + shape_str(node.output_shapes[0]);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
TEST_CASE("the heuristic picks the fast cpu variants") {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"conv2d", "im2col_gemm"}, {"dense", "gemm"},       {"resize", "direct"}, {"depth_to_space", "direct"},
      {"activation", "direct"},  {"add", "direct"},       {"batchnorm", "direct"},
      {"softmax", "direct"},     {"concat", "direct"},    {"flatten", "direct"},
      {"reshape", "direct"},     {"binary", "broadcast"}};
  for (const auto& entry : expected) {
    const std::string op = entry.first, name = entry.second;
    CAPTURE(op);
    const auto variants = KernelRegistry::global().variants("cpu", op);
    REQUIRE(!variants.empty());
    const KernelVariant* v = KernelRegistry::global().find("cpu", op, name);
    REQUIRE(v != nullptr);
    CHECK(v->priority == 10);
    CHECK(v->priority > KernelRegistry::global().find("cpu", op, "reference")->priority);
  }
}

TEST_CASE("conv2d im2col_gemm matches the reference on 250 random shapes") {
  std::mt19937_64 rng(20261122);
  int identity_cases = 0, asymmetric = 0, strided = 0, batched = 0;
  for (int t = 0; t < 250; ++t) {
    Conv2DParams p;
    int kh = uniform(rng, 1, 7), kw = rng() % 4 == 0 ? uniform(rng, 1, 7) : kh;
    p.stride_h = uniform(rng, 1, 3);
    p.stride_w = rng() % 4 == 0 ? uniform(rng, 1, 3) : p.stride_h;
    p.pad.top = uniform(rng, 0, kh - 1);
    p.pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, kh - 1) : p.pad.top;
    p.pad.left = uniform(rng, 0, kw - 1);
    p.pad.right = rng() % 3 == 0 ? uniform(rng, 0, kw - 1) : p.pad.left;
    const bool force_identity = t % 12 == 0;  // the 1x1 stride-1 unpadded path that skips im2col
    if (force_identity) {
      kh = kw = 1;
      p.stride_h = p.stride_w = 1;
      p.pad = Padding2D{};
    }
    p.activation = random_activation(rng);
    const int64_t N = uniform(rng, 1, 3);
    int64_t CI = uniform(rng, 1, 67), CO = uniform(rng, 1, 67);
    int64_t H, W, HO, WO;
    // Redraw the image size until the output is non-empty and the oracle's work stays small; large
    // paddings force a large output, so every 20 misses halve the channels.
    for (int attempt = 1;; ++attempt) {
      if (attempt % 20 == 0) CI = std::max<int64_t>(1, CI / 2), CO = std::max<int64_t>(1, CO / 2);
      H = uniform(rng, 1, 16), W = uniform(rng, 1, 16);
      HO = (H + p.pad.top + p.pad.bottom - kh) / p.stride_h + 1;
      WO = (W + p.pad.left + p.pad.right - kw) / p.stride_w + 1;
      const bool valid = H + p.pad.top + p.pad.bottom >= kh && W + p.pad.left + p.pad.right >= kw;
      if (valid && N * CI * CO * kh * kw * HO * WO <= 3'000'000) break;
    }
    const bool bias = rng() % 4 != 0;
    // Every third case adds a residual (fuse_conv_residual's form: x, weight, bias, r); decided from
    // t so that the random stream of the other cases is unchanged.
    p.add_residual = t % 3 == 1;
    std::vector<Shape> in{{N, CI, H, W}, {CO, CI, kh, kw}};
    if (bias || p.add_residual) in.push_back({CO});
    if (p.add_residual) in.push_back({N, CO, HO, WO});
    const NodeDesc node = make_node(p, in, {N, CO, HO, WO});
    CAPTURE(t);
    const std::string desc = describe(node);
    CAPTURE(desc);
    INFO("k " << kh << "x" << kw << " s " << p.stride_h << "x" << p.stride_w << " pad " << p.pad.top
              << "," << p.pad.left << "," << p.pad.bottom << "," << p.pad.right);
    check_against_reference("im2col_gemm", node, random_inputs(in, 1000 + t));
    identity_cases += force_identity;
    asymmetric += p.pad.top != p.pad.bottom || p.pad.left != p.pad.right;
    strided += p.stride_h > 1 || p.stride_w > 1;
    batched += N > 1;
  }
  // the generator really covers what the issue lists
  CHECK(identity_cases >= 20);
  CHECK(asymmetric >= 50);
  CHECK(strided >= 100);
  CHECK(batched >= 100);
}

namespace {

// A random grouped / depthwise / dilated conv2d node (test_util.h), whose oracle work stays small.
NodeDesc random_grouped_conv(std::mt19937_64& rng, bool depthwise) {
  const test::RandomGroupedConv r =
      test::random_grouped_conv2d_shapes(rng, depthwise, /*vector_channels=*/false);
  return make_node(r.p, r.inputs, r.y);
}

std::string describe_conv(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  return describe(node) + " groups " + std::to_string(p.groups) + " s " + std::to_string(p.stride_h) +
         "x" + std::to_string(p.stride_w) + " d " + std::to_string(p.dilation_h) + "x" +
         std::to_string(p.dilation_w) + " pad " + std::to_string(p.pad.top) + "," +
         std::to_string(p.pad.left) + "," + std::to_string(p.pad.bottom) + "," +
         std::to_string(p.pad.right);
}

}  // namespace

TEST_CASE("conv2d grouped and dilated: im2col_gemm matches the reference on 200 random shapes") {
  std::mt19937_64 rng(20261124);
  int dilated = 0, odd_groups = 0;
  for (int t = 0; t < 200; ++t) {
    const NodeDesc node = random_grouped_conv(rng, t % 4 == 0);
    const std::string desc = describe_conv(node);
    CAPTURE(desc);
    check_against_reference("im2col_gemm", node, random_inputs(node.input_shapes, 3000 + t));
    const auto& p = std::get<Conv2DParams>(node.params);
    dilated += p.dilation_h > 1 || p.dilation_w > 1;
    odd_groups += node.input_shapes[1][1] % 2 == 1 && node.input_shapes[1][1] > 1;
  }
  CHECK(dilated >= 60);
  CHECK(odd_groups >= 30);
}

TEST_CASE("conv2d depthwise matches the reference on 200 random shapes and wins the heuristic") {
  std::mt19937_64 rng(20261125);
  int multiplier = 0, strided = 0;
  for (int t = 0; t < 200; ++t) {
    const NodeDesc node = random_grouped_conv(rng, true);
    const std::string desc = describe_conv(node);
    CAPTURE(desc);
    check_against_reference("depthwise", node, random_inputs(node.input_shapes, 5000 + t));
    multiplier += node.input_shapes[1][0] > node.input_shapes[0][1];
    strided += std::get<Conv2DParams>(node.params).stride_h > 1;
  }
  CHECK(multiplier >= 40);
  CHECK(strided >= 80);
  // MobileNet's depthwise 3x3, stride 1 and 2, bias + relu, the kernel the heuristic picks
  for (int s : {1, 2}) {
    Conv2DParams p;
    p.groups = 32;
    p.stride_h = p.stride_w = s;
    p.pad = Padding2D{1, 1, 1, 1};
    p.activation.kind = ActivationKind::Relu;
    const int64_t o = s == 1 ? 17 : 9;
    const NodeDesc node = make_node(p, {{2, 32, 17, 17}, {32, 1, 3, 3}, {32}}, {2, 32, o, o});
    check_against_reference("depthwise", node, random_inputs(node.input_shapes, 77));
    const KernelVariant* best = nullptr;
    for (const KernelVariant* v : KernelRegistry::global().variants("cpu", "conv2d"))
      if (variant_applies(*v, node) && (!best || v->priority > best->priority)) best = v;
    REQUIRE(best != nullptr);
    CHECK(best->name == "depthwise");
  }
  // not depthwise: groups below C_in, or groups 1
  const KernelVariant* dw = KernelRegistry::global().find("cpu", "conv2d", "depthwise");
  REQUIRE(dw != nullptr);
  Conv2DParams g2;
  g2.groups = 2;
  CHECK_FALSE(dw->applicable(make_node(g2, {{1, 4, 5, 5}, {4, 2, 3, 3}}, {1, 4, 3, 3})));
  CHECK_FALSE(dw->applicable(make_node(Conv2DParams{}, {{1, 1, 5, 5}, {4, 1, 3, 3}}, {1, 4, 3, 3})));
}

namespace {

// A 3x3 stride-1 conv2d node for the Winograd variants, with its inputs (x, weight, [bias], [r]) and
// the weight registered as the node's constant (prepare() transforms it).
struct WinogradCase {
  NodeDesc node;
  std::vector<std::vector<float>> inputs;
};

WinogradCase winograd_case(const Conv2DParams& p, int64_t N, int64_t CI, int64_t CO, int64_t H, int64_t W,
                           bool bias, uint64_t seed) {
  const int64_t HO = H + p.pad.top + p.pad.bottom - 2, WO = W + p.pad.left + p.pad.right - 2;
  std::vector<Shape> in{{N, CI, H, W}, {CO, CI, 3, 3}};
  if (bias || p.add_residual) in.push_back({CO});
  if (p.add_residual) in.push_back({N, CO, HO, WO});
  WinogradCase c{make_node(p, in, {N, CO, HO, WO}), random_inputs(in, seed)};
  c.node.constants[1] = c.inputs[1].data();
  return c;
}

}  // namespace

TEST_CASE("conv2d winograd_f4x4 and winograd_f2x2 match the reference on 240 random shapes") {
  std::mt19937_64 rng(20261126);
  int tiny = 0, asymmetric = 0, residual = 0, batched = 0, odd_channels = 0;
  for (int t = 0; t < 240; ++t) {
    Conv2DParams p;
    p.pad.top = uniform(rng, 0, 2);
    p.pad.bottom = uniform(rng, 0, 2);
    p.pad.left = uniform(rng, 0, 2);
    p.pad.right = uniform(rng, 0, 2);
    p.activation = random_activation(rng);
    p.add_residual = t % 3 == 1;
    const int64_t N = uniform(rng, 1, 2), CI = uniform(rng, 1, 37), CO = uniform(rng, 1, 37);
    // sizes 1..3 one time in four (partial tiles, a single tile, no interior), else up to 23
    const bool small = t % 4 == 0;
    int64_t H, W;
    do {
      H = small ? uniform(rng, 1, 3) : uniform(rng, 1, 23);
      W = small ? uniform(rng, 1, 3) : uniform(rng, 1, 23);
    } while (H + p.pad.top + p.pad.bottom < 3 || W + p.pad.left + p.pad.right < 3);
    const bool bias = rng() % 4 != 0;
    const WinogradCase c = winograd_case(p, N, CI, CO, H, W, bias, 8000 + t);
    CAPTURE(t);
    const std::string desc = describe_conv(c.node);
    CAPTURE(desc);
    check_against_reference("winograd_f4x4", c.node, c.inputs);
    check_against_reference("winograd_f2x2", c.node, c.inputs);
    tiny += H <= 3 || W <= 3;
    asymmetric += p.pad.top != p.pad.bottom || p.pad.left != p.pad.right;
    residual += p.add_residual;
    batched += N > 1;
    odd_channels += CI % 8 != 0 && CO % 8 != 0;
  }
  CHECK(tiny >= 60);
  CHECK(asymmetric >= 100);
  CHECK(residual >= 70);
  CHECK(batched >= 80);
  CHECK(odd_channels >= 150);
  // Larger maps: more than 16 tile columns (several vectors per tile row), 33+ tiles (the GEMM's
  // three-vector micro-tile), ResNet's channel counts with a partial last block of 8.
  const struct { int64_t N, CI, CO, H, W; } big[] = {
      {1, 5, 7, 70, 9}, {1, 3, 4, 9, 133}, {2, 64, 64, 28, 28}, {1, 67, 21, 15, 17}, {1, 128, 128, 7, 7}};
  int s = 0;
  for (const auto& b : big) {
    Conv2DParams p;
    p.pad = Padding2D{1, 1, 1, 1};
    p.activation.kind = ActivationKind::Relu;
    p.add_residual = s % 2 == 0;
    const WinogradCase c = winograd_case(p, b.N, b.CI, b.CO, b.H, b.W, true, 9000 + s++);
    const std::string desc = describe_conv(c.node);
    CAPTURE(desc);
    check_against_reference("winograd_f4x4", c.node, c.inputs);
    check_against_reference("winograd_f2x2", c.node, c.inputs);
  }
}

TEST_CASE("conv2d winograd: applicability, workspace, errors") {
  for (const std::string name : {"winograd_f4x4", "winograd_f2x2"}) {
    CAPTURE(name);
    const KernelVariant* v = KernelRegistry::global().find("cpu", "conv2d", name);
    REQUIRE(v != nullptr);
    Conv2DParams p;
    p.pad = Padding2D{1, 1, 1, 1};
    WinogradCase c = winograd_case(p, 1, 8, 16, 9, 9, true, 1);
    CHECK(v->applicable(c.node));
    NodeDesc no_const = c.node;
    no_const.constants[1] = nullptr;  // a weight computed at run time: nothing to transform once
    CHECK_FALSE(v->applicable(no_const));
    Conv2DParams s2 = p;
    s2.stride_h = 2;
    NodeDesc strided = make_node(s2, {{1, 8, 9, 9}, {16, 8, 3, 3}}, {1, 16, 5, 9});
    strided.constants[1] = c.inputs[1].data();
    CHECK_FALSE(v->applicable(strided));
    Conv2DParams dil = p;
    dil.dilation_w = 2;
    NodeDesc dilated = make_node(dil, {{1, 8, 9, 9}, {16, 8, 3, 3}}, {1, 16, 9, 7});
    dilated.constants[1] = c.inputs[1].data();
    CHECK_FALSE(v->applicable(dilated));
    NodeDesc k5 = make_node(p, {{1, 8, 9, 9}, {16, 8, 5, 5}}, {1, 16, 7, 7});
    k5.constants[1] = c.inputs[1].data();
    CHECK_FALSE(v->applicable(k5));
    Conv2DParams dw = p;
    dw.groups = 8;
    NodeDesc depthwise = make_node(dw, {{1, 8, 9, 9}, {8, 1, 3, 3}}, {1, 8, 9, 9});
    depthwise.constants[1] = c.inputs[1].data();
    CHECK_FALSE(v->applicable(depthwise));
    // workspace: V [a*a, C_in, Tp], M [a*a, C_out, Tp] (Tp = the 9x9 output's tiles rounded up to
    // the ISA's L lanes; F(4x4): 3x3 tiles, a = 6; F(2x2): 5x5 tiles, a = 4) and C_in padded planes
    // of the tiles' rows x columns (3*4+2 or 5*2+2 square) + Lm floats each
    const bool f4 = name == "winograd_f4x4";
    const int64_t L = lanes(c.node.isa), T = f4 ? 9 : 25;
    const int64_t a = f4 ? 6 : 4, Tp = (T + L - 1) / L * L, plane = f4 ? 14 * 14 + 4 * L : 12 * 12 + 2 * L;
    CHECK(v->workspace_bytes(c.node) ==
          static_cast<size_t>(a * a * (8 + 16) * Tp + 8 * plane) * sizeof(float));
    // unprepared or without workspace: an Error, not a crash
    std::vector<float> out(16 * 81);
    KernelCall unprepared{c.node, {c.inputs[0].data(), c.inputs[1].data(), c.inputs[2].data()}, {out.data()}};
    CHECK_THROWS_AS(v->run(unprepared), Error);
  }
}

TEST_CASE("conv2d winograd: the heuristic picks it on ResNet's 3x3 stride-1 convs") {
  Conv2DParams p;
  p.pad = Padding2D{1, 1, 1, 1};
  p.activation.kind = ActivationKind::Relu;
  auto pick = [&](const Conv2DParams& q, int64_t ci, int64_t co, int64_t h) {
    const WinogradCase c = winograd_case(q, 1, ci, co, h, h, true, 3);
    return test::default_variant("cpu", "conv2d", c.node);
  };
  // ResNet-18/50: F(4x4) on 56x56, 28x28 and 14x14 (16 or more 4x4 tiles), F(2x2) on 7x7
  CHECK(pick(p, 64, 64, 56) == "winograd_f4x4");
  CHECK(pick(p, 128, 128, 28) == "winograd_f4x4");
  CHECK(pick(p, 256, 256, 14) == "winograd_f4x4");
  CHECK(pick(p, 512, 512, 7) == "winograd_f2x2");
  Conv2DParams res = p;  // with the block's residual input (fuse_conv_residual) too
  res.add_residual = true;
  CHECK(pick(res, 64, 64, 56) == "winograd_f4x4");
  CHECK(pick(res, 512, 512, 7) == "winograd_f2x2");
  // where a GEMM measured faster than Winograd: 3 input channels (VGG's first conv; packed_implicit
  // from 2^20 multiply-adds up), a small map with few input channels (im2col_gemm below 2^20)
  CHECK(pick(p, 3, 64, 224) == "packed_implicit");
  CHECK(pick(p, 16, 64, 7) == "im2col_gemm");
  // Winograd not applicable: stride 2 (ResNet's first conv of a stage; packed_gemm), a weight that is
  // not a constant (im2col_gemm)
  NodeDesc s2 = make_node([&] { Conv2DParams q = p; q.stride_h = q.stride_w = 2; return q; }(),
                          {{1, 64, 56, 56}, {128, 64, 3, 3}, {128}}, {1, 128, 28, 28});
  std::vector<float> w(128 * 64 * 9, 0.5f);
  s2.constants[1] = w.data();
  CHECK(test::default_variant("cpu", "conv2d", s2) == "packed_gemm");
  const NodeDesc runtime_weight = make_node(p, {{1, 64, 56, 56}, {64, 64, 3, 3}, {64}}, {1, 64, 56, 56});
  CHECK(test::default_variant("cpu", "conv2d", runtime_weight) == "im2col_gemm");
}

// packed_implicit runs the same GEMM as packed_gemm with the column matrix read in place from a
// phase-split copy of the input: every packed_gemm shape is checked with both.
const char* const kPackedVariants[] = {"packed_gemm", "packed_implicit"};

TEST_CASE("conv2d packed_gemm and packed_implicit match the reference on 200 random shapes") {
  std::mt19937_64 rng(20261125);
  int identity = 0, strided = 0, residual = 0, batched = 0, tails = 0, odd_channels = 0;
  for (int t = 0; t < 200; ++t) {
    Conv2DParams p;
    const bool one = t % 2 == 0;  // half of them 1x1 (the column matrix is the input where unpadded, stride 1)
    const int kh = one ? 1 : uniform(rng, 1, 7), kw = one ? 1 : (rng() % 3 == 0 ? uniform(rng, 1, 7) : kh);
    p.stride_h = rng() % 3 == 0 ? uniform(rng, 2, 3) : 1;
    p.stride_w = rng() % 3 == 0 ? uniform(rng, 2, 3) : p.stride_h;
    if (!one || rng() % 4 == 0) {
      p.pad.top = uniform(rng, 0, kh - 1), p.pad.bottom = uniform(rng, 0, kh - 1);
      p.pad.left = uniform(rng, 0, kw - 1), p.pad.right = uniform(rng, 0, kw - 1);
    }
    p.activation = random_activation(rng);
    p.add_residual = t % 3 == 1;
    const int64_t N = uniform(rng, 1, 2), CI = uniform(rng, 1, 70), CO = uniform(rng, 1, 41);
    int64_t H, W;
    do {
      H = uniform(rng, 1, 30), W = uniform(rng, 1, 30);
    } while (H + p.pad.top + p.pad.bottom < kh || W + p.pad.left + p.pad.right < kw);
    const int64_t HO = (H + p.pad.top + p.pad.bottom - kh) / p.stride_h + 1;
    const int64_t WO = (W + p.pad.left + p.pad.right - kw) / p.stride_w + 1;
    std::vector<Shape> in{{N, CI, H, W}, {CO, CI, kh, kw}};
    if (rng() % 4 != 0 || p.add_residual) in.push_back({CO});
    if (p.add_residual) in.push_back({N, CO, HO, WO});
    NodeDesc node = make_node(p, in, {N, CO, HO, WO});
    const auto inputs = random_inputs(in, 11000 + t);
    node.constants[1] = inputs[1].data();
    CAPTURE(t);
    const std::string desc = describe(node);
    CAPTURE(desc);
    for (const char* v : kPackedVariants) check_against_reference(v, node, inputs);
    identity += one && p.stride_h == 1 && p.stride_w == 1 && p.pad.top + p.pad.bottom + p.pad.left + p.pad.right == 0;
    strided += p.stride_h > 1 || p.stride_w > 1;
    residual += p.add_residual;
    batched += N > 1;
    tails += (HO * WO) % 16 != 0;
    odd_channels += CO % 8 != 0 && CI % 16 != 0;
  }
  CHECK(identity >= 40);
  CHECK(strided >= 60);
  CHECK(residual >= 60);
  CHECK(batched >= 80);
  CHECK(tails >= 150);
  // every count of last columns (1-15, accumulate_cols' instantiations) and none, 1x1 and 3x3 stride 2
  for (int64_t cols = 0; cols < 16; ++cols) {
    Conv2DParams p;
    p.activation.kind = cols % 2 ? ActivationKind::Relu : ActivationKind::Silu;
    p.add_residual = cols % 3 == 0;
    const int k = cols % 2 ? 1 : 3;
    p.stride_h = p.stride_w = k == 3 ? 2 : 1;
    p.pad = k == 3 ? Padding2D{1, 1, 1, 1} : Padding2D{};
    const int64_t WO = 16 * 3 + cols, W = k == 3 ? 2 * WO - 1 : WO, CO = 8 + cols;
    std::vector<Shape> in{{1, 19, 1, W}, {CO, 19, k, k}, {CO}};
    if (p.add_residual) in.push_back({1, CO, 1, WO});
    NodeDesc node = make_node(p, in, {1, CO, 1, WO});
    const auto inputs = random_inputs(in, 13000 + cols);
    node.constants[1] = inputs[1].data();
    const std::string desc = describe(node);
    CAPTURE(desc);
    for (const char* v : kPackedVariants) check_against_reference(v, node, inputs);
  }
  CHECK(odd_channels >= 120);
  // Larger ones: several column blocks (K x columns past the L2 budget; C_out >= HO*WO, the larger
  // budget: one block, and two for K = 5400 at 7x7), 48-column tiles with a
  // 32- or 16-column remainder and a partial vector, ResNet-50's shapes, conv1 (7x7 stride 2).
  const struct { int64_t N, CI, CO, H, W, k, s; } big[] = {
      {1, 64, 37, 56, 56, 1, 1},   {1, 512, 19, 28, 29, 1, 1}, {1, 2048, 16, 7, 7, 1, 1},
      {2, 256, 24, 14, 14, 1, 2},  {1, 3, 21, 64, 61, 7, 2},   {1, 130, 9, 20, 17, 3, 1},
      {1, 8, 16, 1, 1, 1, 1},      {1, 600, 56, 7, 7, 3, 1},   {1, 1100, 300, 14, 14, 1, 1}};
  int s = 0;
  for (const auto& b : big) {
    Conv2DParams p;
    const int pad = static_cast<int>(b.k / 2);
    p.stride_h = p.stride_w = static_cast<int>(b.s);
    p.pad = Padding2D{pad, pad, pad, pad};
    p.activation.kind = s % 3 == 0 ? ActivationKind::Relu : (s % 3 == 1 ? ActivationKind::Silu : ActivationKind::None);
    p.add_residual = s % 2 == 0;
    const int64_t HO = (b.H + 2 * pad - b.k) / b.s + 1, WO = (b.W + 2 * pad - b.k) / b.s + 1;
    std::vector<Shape> in{{b.N, b.CI, b.H, b.W}, {b.CO, b.CI, b.k, b.k}, {b.CO}};
    if (p.add_residual) in.push_back({b.N, b.CO, HO, WO});
    NodeDesc node = make_node(p, in, {b.N, b.CO, HO, WO});
    const auto inputs = random_inputs(in, 12000 + s++);
    node.constants[1] = inputs[1].data();
    const std::string desc = describe(node);
    CAPTURE(desc);
    for (const char* v : kPackedVariants) check_against_reference(v, node, inputs);
  }
}

TEST_CASE("conv2d packed_implicit: the phase planes and virtual columns on chosen shapes") {
  // Strides above the kernel (some phases never read), unequal strides, a kernel wider than 17
  // columns at stride 1 (the dropped columns of the last row read furthest past the planes), padding
  // bigger on one side, rows narrower and wider than a vector, ResNet's stride-2 shapes (fewer
  // channels), conv1's geometry, batch 2, every epilogue.
  const struct { int64_t N, CI, CO, H, W, kh, kw, sh, sw, pt, pb, pl, pr; } cases[] = {
      {1, 5, 9, 13, 17, 1, 1, 3, 3, 0, 0, 0, 0},   {1, 4, 8, 11, 14, 2, 2, 3, 3, 1, 0, 0, 1},
      {2, 7, 13, 15, 22, 3, 5, 2, 3, 1, 2, 2, 0},  {1, 3, 10, 9, 40, 3, 19, 1, 1, 1, 1, 9, 9},
      {1, 6, 17, 23, 5, 5, 5, 2, 2, 2, 2, 2, 2},   {1, 24, 20, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1},
      {1, 40, 24, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1}, {1, 80, 33, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1},
      {1, 3, 16, 90, 71, 7, 7, 2, 2, 3, 3, 3, 3},  {2, 9, 8, 1, 33, 1, 3, 1, 2, 0, 0, 1, 1},
      {1, 2, 3, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1},     {1, 64, 64, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1}};
  int t = 0;
  for (const auto& c : cases) {
    Conv2DParams p;
    p.stride_h = static_cast<int>(c.sh), p.stride_w = static_cast<int>(c.sw);
    p.pad.top = static_cast<int>(c.pt), p.pad.bottom = static_cast<int>(c.pb);
    p.pad.left = static_cast<int>(c.pl), p.pad.right = static_cast<int>(c.pr);
    const ActivationKind kinds[] = {ActivationKind::Relu, ActivationKind::None, ActivationKind::Silu};
    p.activation.kind = kinds[t % 3];
    p.add_residual = t % 2 == 1;
    const int64_t HO = (c.H + c.pt + c.pb - c.kh) / c.sh + 1, WO = (c.W + c.pl + c.pr - c.kw) / c.sw + 1;
    std::vector<Shape> in{{c.N, c.CI, c.H, c.W}, {c.CO, c.CI, c.kh, c.kw}};
    if (t % 4 != 2 || p.add_residual) in.push_back({c.CO});
    if (p.add_residual) in.push_back({c.N, c.CO, HO, WO});
    NodeDesc node = make_node(p, in, {c.N, c.CO, HO, WO});
    const auto inputs = random_inputs(in, 14000 + t++);
    node.constants[1] = inputs[1].data();
    const std::string desc = describe(node);
    CAPTURE(desc);
    check_against_reference("packed_implicit", node, inputs);
  }
}

TEST_CASE("conv2d packed_gemm: applicability, workspace, errors, the heuristic") {
  const KernelVariant* v = KernelRegistry::global().find("cpu", "conv2d", "packed_gemm");
  REQUIRE(v != nullptr);
  auto conv = [](Conv2DParams p, Shape x, Shape w, Shape y, const std::vector<float>* weight) {
    NodeDesc node = make_node(p, {x, w, {w[0]}}, y);
    if (weight) node.constants[1] = weight->data();
    return node;
  };
  const std::vector<float> w(2048 * 512 * 9, 0.25f);
  Conv2DParams p;
  // ResNet-50's 1x1 convs (from 56x56 to 7x7), with a residual, and its stride-2 convs: packed_gemm
  CHECK(test::default_variant("cpu", "conv2d", conv(p, {1, 64, 56, 56}, {256, 64, 1, 1}, {1, 256, 56, 56}, &w)) == "packed_gemm");
  CHECK(test::default_variant("cpu", "conv2d", conv(p, {1, 2048, 7, 7}, {512, 2048, 1, 1}, {1, 512, 7, 7}, &w)) == "packed_gemm");
  Conv2DParams res = p;
  res.add_residual = true;
  NodeDesc with_res = make_node(res, {{1, 512, 7, 7}, {2048, 512, 1, 1}, {2048}, {1, 2048, 7, 7}}, {1, 2048, 7, 7});
  with_res.constants[1] = w.data();
  CHECK(test::default_variant("cpu", "conv2d", with_res) == "packed_gemm");
  Conv2DParams s2;
  s2.stride_h = s2.stride_w = 2;
  CHECK(test::default_variant("cpu", "conv2d", conv(s2, {1, 256, 56, 56}, {512, 256, 1, 1}, {1, 512, 28, 28}, &w)) == "packed_gemm");
  // ResNet-50's 3x3 stride-2 convs to 28x28, 14x14 and 7x7 (packed_implicit would drop 1/29 to 1/8
  // of its columns)
  Conv2DParams s2p = s2;
  s2p.pad = Padding2D{1, 1, 1, 1};
  CHECK(test::default_variant("cpu", "conv2d", conv(s2p, {1, 128, 56, 56}, {128, 128, 3, 3}, {1, 128, 28, 28}, &w)) == "packed_gemm");
  CHECK(test::default_variant("cpu", "conv2d", conv(s2p, {1, 256, 28, 28}, {256, 256, 3, 3}, {1, 256, 14, 14}, &w)) == "packed_gemm");
  CHECK(test::default_variant("cpu", "conv2d", conv(s2p, {1, 512, 14, 14}, {512, 512, 3, 3}, {1, 512, 7, 7}, &w)) == "packed_gemm");
  // packed_implicit: ResNet's conv1 (7x7 stride 2, 3 of 115 virtual columns dropped), a 3x3 stride 2
  // to 56x56 (1 of 57), a 5x5 stride 1 at 56x56 (4 of 60, but im2col writes 25x the input)
  Conv2DParams c1 = s2;
  c1.pad = Padding2D{3, 3, 3, 3};
  CHECK(test::default_variant("cpu", "conv2d", conv(c1, {1, 3, 224, 224}, {64, 3, 7, 7}, {1, 64, 112, 112}, &w)) == "packed_implicit");
  CHECK(test::default_variant("cpu", "conv2d", conv(s2p, {1, 64, 112, 112}, {64, 64, 3, 3}, {1, 64, 56, 56}, &w)) == "packed_implicit");
  Conv2DParams p5;
  p5.pad = Padding2D{2, 2, 2, 2};
  CHECK(test::default_variant("cpu", "conv2d", conv(p5, {1, 16, 56, 56}, {32, 16, 5, 5}, {1, 32, 56, 56}, &w)) == "packed_implicit");
  // and not where it has nothing to save: 1x1 (stride 2 included), or below 2^20 multiply-adds
  const KernelVariant* vi = KernelRegistry::global().find("cpu", "conv2d", "packed_implicit");
  REQUIRE(vi != nullptr);
  CHECK(vi->priority_for(conv(s2, {1, 256, 56, 56}, {512, 256, 1, 1}, {1, 512, 28, 28}, &w)) < 12);
  CHECK(vi->priority_for(conv(p, {1, 64, 56, 56}, {256, 64, 1, 1}, {1, 256, 56, 56}, &w)) < 12);
  CHECK(vi->priority_for(conv(p5, {1, 2, 20, 20}, {4, 2, 5, 5}, {1, 4, 20, 20}, &w)) < 12);
  // its workspace: the phase planes (3 channels x 4 phases x 115 x 115) and 3 + L floats of slack
  const NodeDesc c1node = conv(c1, {1, 3, 224, 224}, {64, 3, 7, 7}, {1, 64, 112, 112}, &w);
  CHECK(vi->workspace_bytes(c1node) == (3 * 4 * 115 * 115 + 3 + lanes(c1node.isa)) * sizeof(float));
  // 3x3 stride 1: Winograd keeps them
  Conv2DParams p1;
  p1.pad = Padding2D{1, 1, 1, 1};
  CHECK(test::default_variant("cpu", "conv2d", conv(p1, {1, 64, 56, 56}, {64, 64, 3, 3}, {1, 64, 56, 56}, &w)) == "winograd_f4x4");
  // below 2^20 multiply-adds OpenBLAS measured faster: 96 -> 24 1x1 at 14x14 (451,584)
  CHECK(test::default_variant("cpu", "conv2d", conv(p, {1, 96, 14, 14}, {24, 96, 1, 1}, {1, 24, 14, 14}, &w)) == "im2col_gemm");
  // not applicable: a weight computed at run time, grouped, dilated
  const NodeDesc runtime = conv(p, {1, 64, 56, 56}, {256, 64, 1, 1}, {1, 256, 56, 56}, nullptr);
  CHECK_FALSE(v->applicable(runtime));
  CHECK(test::default_variant("cpu", "conv2d", runtime) == "im2col_gemm");
  Conv2DParams grouped;
  grouped.groups = 2;
  CHECK_FALSE(v->applicable(conv(grouped, {1, 64, 28, 28}, {64, 32, 1, 1}, {1, 64, 28, 28}, &w)));
  CHECK_FALSE(vi->applicable(conv(grouped, {1, 64, 28, 28}, {64, 32, 1, 1}, {1, 64, 28, 28}, &w)));
  Conv2DParams dilated = p1;
  dilated.dilation_h = 2;
  CHECK_FALSE(v->applicable(conv(dilated, {1, 8, 9, 9}, {8, 8, 3, 3}, {1, 8, 7, 9}, &w)));
  // workspace: im2col's column matrix, none for 1x1 stride 1 (the last 1-15 columns are read in place)
  CHECK(v->workspace_bytes(conv(p, {1, 64, 7, 7}, {32, 64, 1, 1}, {1, 32, 7, 7}, &w)) == 0);
  CHECK(v->workspace_bytes(conv(p1, {1, 8, 9, 9}, {4, 8, 3, 3}, {1, 4, 9, 9}, &w)) == 72 * 81 * sizeof(float));
  // unprepared, or without the workspace im2col needs: an Error, not a crash
  const NodeDesc node = conv(p, {1, 8, 5, 5}, {4, 8, 1, 1}, {1, 4, 5, 5}, &w);
  auto in = random_inputs(node.input_shapes, 9);
  std::vector<float> out(100);
  CHECK_THROWS_AS(v->run(KernelCall{node, {in[0].data(), w.data(), in[2].data()}, {out.data()}}), Error);
  const NodeDesc padded = conv(p1, {1, 8, 5, 5}, {4, 8, 3, 3}, {1, 4, 5, 5}, &w);
  const auto prepared = v->prepare(padded);
  CHECK_THROWS_AS(v->run(KernelCall{padded, {in[0].data(), w.data(), in[2].data()}, {out.data()}, nullptr, prepared.get()}), Error);
  // packed_implicit likewise: unprepared, or without its phase planes
  CHECK_THROWS_AS(vi->run(KernelCall{padded, {in[0].data(), w.data(), in[2].data()}, {out.data()}}), Error);
  const auto prepared_i = vi->prepare(padded);
  CHECK_THROWS_AS(vi->run(KernelCall{padded, {in[0].data(), w.data(), in[2].data()}, {out.data()}, nullptr, prepared_i.get()}), Error);
}

TEST_CASE("conv2d im2col_gemm: workspace, 1x1 shortcut, applicability, errors") {
  Conv2DParams p;
  const KernelVariant* v = KernelRegistry::global().find("cpu", "conv2d", "im2col_gemm");
  REQUIRE(v != nullptr);
  // 1x1 stride 1 unpadded: no workspace; 3x3 pad 1: C*9*H*W floats
  CHECK(v->workspace_bytes(make_node(p, {{2, 8, 5, 6}, {4, 8, 1, 1}}, {2, 4, 5, 6})) == 0);
  p.pad = Padding2D{1, 1, 1, 1};
  CHECK(v->workspace_bytes(make_node(p, {{2, 8, 5, 6}, {4, 8, 3, 3}}, {2, 4, 5, 6})) ==
        8 * 9 * 5 * 6 * sizeof(float));
  CHECK_FALSE(v->applicable);  // every conv2d: groups and dilation included
  Conv2DParams grouped;  // the workspace holds one group's column matrix
  grouped.groups = 4;
  grouped.dilation_h = 2;
  CHECK(v->workspace_bytes(make_node(grouped, {{2, 8, 7, 6}, {4, 2, 3, 3}}, {2, 4, 3, 4})) ==
        2 * 9 * 3 * 4 * sizeof(float));
  // no workspace where one is needed, or too few inputs: an Error, not a crash
  const NodeDesc node = make_node(p, {{1, 2, 4, 4}, {3, 2, 3, 3}}, {1, 3, 4, 4});
  auto in = random_inputs(node.input_shapes, 7);
  std::vector<float> out(48);
  CHECK_THROWS_AS(v->run(KernelCall{node, {in[0].data(), in[1].data()}, {out.data()}}), Error);
  CHECK_THROWS_AS(v->run(KernelCall{node, {in[0].data()}, {out.data()}}), Error);
}

TEST_CASE("dense gemm matches the reference (sgemv at batch 1, sgemm above)") {
  std::mt19937_64 rng(7);
  for (int t = 0; t < 200; ++t) {
    DenseParams p;
    p.activation = random_activation(rng);
    const int64_t N = t % 3 == 0 ? 1 : uniform(rng, 1, 5), FI = uniform(rng, 1, 300),
                  FO = uniform(rng, 1, 300);
    std::vector<Shape> in{{N, FI}, {FO, FI}};
    if (rng() % 4 != 0) in.push_back({FO});
    const NodeDesc node = make_node(p, in, {N, FO});
    CAPTURE(t);
    const std::string desc = describe(node);
    CAPTURE(desc);
    check_against_reference("gemm", node, random_inputs(in, 50 + t));
  }
}

TEST_CASE("dense gemv matches the reference at batch 1 (row blocks, lane tails, threads)") {
  std::mt19937_64 rng(17);
  for (int t = 0; t < 200; ++t) {
    DenseParams p;
    p.activation = random_activation(rng);
    // t >= 190: classifier sizes (several 64-row blocks over the threads, F_in not a multiple of 16)
    const int64_t FI = t < 190 ? uniform(rng, 1, 300) : uniform(rng, 500, 1300),
                  FO = t < 190 ? uniform(rng, 1, 300) : uniform(rng, 500, 1100);
    std::vector<Shape> in{{1, FI}, {FO, FI}};
    if (rng() % 4 != 0) in.push_back({FO});
    const NodeDesc node = make_node(p, in, {1, FO});
    CAPTURE(t);
    const std::string desc = describe(node);
    CAPTURE(desc);
    check_against_reference("gemv", node, random_inputs(in, 900 + t));
  }
  const KernelVariant* v = KernelRegistry::global().find("cpu", "dense", "gemv");
  REQUIRE(v != nullptr);
  CHECK_FALSE(variant_applies(*v, make_node(DenseParams{}, {{2, 8}, {4, 8}}, {2, 4})));
  CHECK(variant_applies(*v, make_node(DenseParams{}, {{1, 8}, {4, 8}}, {1, 4})));
}

TEST_CASE("pool2d direct and separable match the reference on 250 random shapes") {
  std::mt19937_64 rng(11);
  int max_pools = 0, ceil_mode = 0, asymmetric = 0;
  for (int t = 0; t < 250; ++t) {
    const test::RandomPool2D r = test::random_pool2d(rng);
    const NodeDesc node = make_node(r.p, {r.x}, r.y);
    CAPTURE(t);
    const std::string desc = describe(node);
    CAPTURE(desc);
    const auto inputs = random_inputs(node.input_shapes, 300 + t);
    check_against_reference("direct", node, inputs);
    check_against_reference("separable", node, inputs);
    max_pools += r.p.kind == PoolKind::Max;
    ceil_mode += r.p.ceil_mode;
    asymmetric += r.p.pad.left != r.p.pad.right || r.p.pad.top != r.p.pad.bottom;
  }
  CHECK(max_pools >= 100);
  CHECK(ceil_mode >= 100);
  CHECK(asymmetric >= 100);
}

TEST_CASE("pool2d separable: ResNet's pools, long rows in chunks, applicability, the heuristic") {
  auto node_for = [](PoolKind kind, int k, int s, int pad, Shape x, bool include_pad = false) {
    Pool2DParams p;
    p.kind = kind;
    p.kernel_h = p.kernel_w = k;
    p.stride_h = p.stride_w = s;
    p.pad = Padding2D{pad, pad, pad, pad};
    p.count_include_pad = include_pad;
    const int64_t ho = (x[2] + 2 * pad - k) / s + 1, wo = (x[3] + 2 * pad - k) / s + 1;
    return make_node(p, {x}, {x[0], x[1], ho, wo});
  };
  const NodeDesc cases[] = {
      node_for(PoolKind::Max, 3, 2, 1, {1, 67, 112, 112}),           // ResNet's stem pool, odd C
      node_for(PoolKind::Average, 7, 1, 1, {1, 35, 7, 7}),            // 3x3 output of a 7x7 window
      node_for(PoolKind::Max, 2, 2, 0, {2, 3, 33, 31}),               // VGG's, odd sizes
      node_for(PoolKind::Average, 3, 1, 1, {1, 5, 9, 11}, true),      // count_include_pad
      node_for(PoolKind::Max, 3, 1, 1, {1, 2, 3, 40000}),             // rows longer than the buffer
      node_for(PoolKind::Average, 5, 3, 2, {1, 2, 4, 50001}),         // the same, strided, avg
  };
  for (const NodeDesc& node : cases) {
    const std::string desc = describe(node);
    CAPTURE(desc);
    check_against_reference("separable", node, random_inputs(node.input_shapes, 77));
    CHECK(test::default_variant("cpu", "pool2d", node) == "separable");
  }
  // a global pool (one-pixel output) stays on direct, where it measured faster; separable is right too
  const NodeDesc global = node_for(PoolKind::Average, 7, 1, 0, {1, 35, 7, 7});
  check_against_reference("separable", global, random_inputs(global.input_shapes, 79));
  CHECK(test::default_variant("cpu", "pool2d", global) == "direct");
  // a window wider than 1024 columns (the row buffer's bound) takes direct
  Pool2DParams wide_p;
  wide_p.kernel_h = 1, wide_p.kernel_w = 1025, wide_p.stride_h = wide_p.stride_w = 1;
  const NodeDesc wide = make_node(wide_p, {{1, 2, 3, 1100}}, {1, 2, 3, 76});
  CHECK_FALSE(KernelRegistry::global().find("cpu", "pool2d", "separable")->applicable(wide));
  CHECK(test::default_variant("cpu", "pool2d", wide) == "direct");
  check_against_reference("direct", wide, random_inputs(wide.input_shapes, 78));
}

TEST_CASE("resize direct matches the reference on 300 random shapes (every mode, up and down)") {
  std::mt19937_64 rng(141);
  for (int t = 0; t < 300; ++t) {
    const test::RandomResize r = test::random_resize(rng);
    const NodeDesc node = make_node(r.p, {r.x}, r.y);
    CAPTURE(t);
    const std::string desc = describe(node);
    CAPTURE(desc);
    check_against_reference("direct", node, random_inputs(node.input_shapes, 700 + t));
  }
}

TEST_CASE("depth_to_space direct matches the reference (DCR and CRD, blocks 1-4)") {
  std::mt19937_64 rng(151);
  for (int t = 0; t < 120; ++t) {
    const DepthToSpaceParams p{uniform(rng, 1, 4), static_cast<DepthToSpaceMode>(t % 2)};
    const int64_t co = uniform(rng, 1, 5), n = uniform(rng, 1, 3), h = uniform(rng, 1, 9), w = uniform(rng, 1, 9);
    const NodeDesc node = make_node(p, {{n, co * p.block * p.block, h, w}}, {n, co, h * p.block, w * p.block});
    CAPTURE(t);
    check_against_reference("direct", node, random_inputs(node.input_shapes, 900 + t));
  }
}

TEST_CASE("activation, add and batchnorm direct match the reference") {
  std::mt19937_64 rng(13);
  for (int t = 0; t < 200; ++t) {
    const Shape s = t % 2 ? Shape{uniform(rng, 1, 3), uniform(rng, 1, 40), uniform(rng, 1, 30),
                                  uniform(rng, 1, 30)}
                          : Shape{uniform(rng, 1, 4), uniform(rng, 1, 2000)};
    CAPTURE(t);
    const std::string shape = shape_str(s);
    CAPTURE(shape);
    ActivationParams ap;
    random_activation(rng);  // drawn and dropped: keeps the later cases' random stream as it was
    ap.activation = infer::test::activation_case(t);  // every case, incl. none (a copy), exp and sqrt
    auto ain = random_inputs({s}, 400 + t);
    if (ap.activation.kind == ActivationKind::Sqrt)
      for (float& v : ain[0]) v = std::fabs(v);  // sqrt's domain (negative inputs give NaN everywhere)
    check_against_reference("direct", make_node(ap, {s}, s), ain);

    AddParams addp;
    addp.activation = random_activation(rng);
    check_against_reference("direct", make_node(addp, {s, s}, s), random_inputs({s, s}, 500 + t));

    BatchNormParams bn;
    bn.activation = random_activation(rng);
    bn.epsilon = 1e-3f;
    const Shape c{s[1]};
    auto in = random_inputs({s, c, c, c, c}, 600 + t);
    for (float& v : in[4]) v = v * v + 0.1f;  // variances > 0
    check_against_reference("direct", make_node(bn, {s, c, c, c, c}, s), in);
  }
}

TEST_CASE("binary broadcast matches the reference (every kind and broadcast pattern)") {
  std::mt19937_64 rng(19);
  for (int t = 0; t < 400; ++t) {
    const test::RandomBinary c = test::random_binary(rng, t);
    const NodeDesc node = make_node(c.p, {c.a, c.b}, c.y);
    const std::string desc = describe(node) + " " + binary_kind_name(c.p.kind);
    CAPTURE(desc);
    auto in = random_inputs({c.a, c.b}, 900 + t);
    if (c.p.kind == BinaryKind::Div) test::keep_from_zero(in[1]);
    check_against_reference("broadcast", node, in);
  }
}

TEST_CASE("binary broadcast: large per-channel and same-shape cases (threaded, long rows)") {
  const Shape y{2, 37, 61, 67};
  for (const Shape& b : {Shape{1, 37, 1, 1}, Shape{2, 37, 1, 1}, y, Shape{1}, Shape{61, 1}}) {
    for (int k = 0; k < 4; ++k) {
      BinaryParams p;
      p.kind = static_cast<BinaryKind>(k);
      const NodeDesc node = make_node(p, {y, b}, y);
      const std::string desc = describe(node);
      CAPTURE(desc);
      auto in = random_inputs({y, b}, 1000 + k);
      for (float& v : in[1]) v += 2.f;
      check_against_reference("broadcast", node, in);
    }
  }
}

TEST_CASE("binary broadcast runs in place and rejects malformed calls") {
  const Shape s{2, 3, 5, 7}, c{1, 3, 1, 1};
  const auto x = random_vector(210, 5), g = random_vector(3, 6);
  BinaryParams p;
  p.kind = BinaryKind::Mul;
  p.activation.kind = ActivationKind::Relu;
  const NodeDesc node = make_node(p, {s, c}, s);
  const std::vector<float> want = run_variant("reference", node, {x, g});
  std::vector<float> buf = x;
  const KernelVariant* v = KernelRegistry::global().find("cpu", "binary", "broadcast");
  REQUIRE(v != nullptr);
  v->run(KernelCall{node, {buf.data(), g.data()}, {buf.data()}});
  CHECK(rel_error(buf, want) <= kTol);
  std::vector<float> y(210);
  // b [1,4,1,1] does not broadcast to [2,3,5,7]; a missing input; the wrong params.
  CHECK_FALSE(v->applicable(make_node(p, {s, {1, 4, 1, 1}}, s)));
  CHECK_THROWS_WITH_AS(v->run(KernelCall{make_node(p, {s, {1, 4, 1, 1}}, s), {x.data(), g.data()}, {y.data()}}),
                       "cpu binary.broadcast: input 1 has shape 1x4x1x1 which does not broadcast with input 0's 2x3x5x7 "
                       "(dim 1 of the aligned shapes: 3 vs 4; each pair must be equal or 1)", Error);
  CHECK_THROWS_AS(v->run(KernelCall{node, {x.data()}, {y.data()}}), Error);
  CHECK_THROWS_AS(v->run(KernelCall{make_node(AddParams{}, {s, s}, s), {x.data(), x.data()}, {y.data()}}),
                  Error);
}

TEST_CASE("elementwise direct kernels run in place") {
  const Shape s{2, 3, 5, 7};
  const auto x = random_vector(210, 3);
  ActivationParams ap;
  ap.activation.kind = ActivationKind::Tanh;
  const NodeDesc node = make_node(ap, {s}, s);
  const std::vector<float> want = run_variant("reference", node, {x});
  std::vector<float> buf = x;
  const KernelVariant* v = KernelRegistry::global().find("cpu", "activation", "direct");
  v->run(KernelCall{node, {buf.data()}, {buf.data()}});
  CHECK(rel_error(buf, want) <= kTol);
}

TEST_CASE("softmax, concat, flatten and reshape direct match the reference") {
  std::mt19937_64 rng(17);
  for (int t = 0; t < 200; ++t) {
    const int rank = uniform(rng, 2, 4);
    Shape s;
    for (int d = 0; d < rank; ++d) s.push_back(uniform(rng, 1, d == rank - 1 ? 40 : 6));
    CAPTURE(t);
    const std::string shape = shape_str(s);
    CAPTURE(shape);
    SoftmaxParams sp;
    sp.axis = uniform(rng, 1, rank - 1);  // the format's axes: not the batch, not negative
    auto x = random_inputs({s}, 700 + t);
    for (float& v : x[0]) v *= 20.f;  // large logits: the max subtraction matters
    check_against_reference("direct", make_node(sp, {s}, s), x);

    ConcatParams cp;
    cp.axis = uniform(rng, 1, rank - 1);
    const int axis = cp.axis < 0 ? cp.axis + rank : cp.axis;
    const int k = uniform(rng, 1, 4);
    std::vector<Shape> ins;
    Shape out = s;
    out[axis] = 0;
    for (int i = 0; i < k; ++i) {
      Shape si = s;
      si[axis] = uniform(rng, 1, 5);
      out[axis] += si[axis];
      ins.push_back(si);
    }
    check_against_reference("direct", make_node(cp, ins, out), random_inputs(ins, 800 + t));

    const int64_t n = shape_numel(s);
    check_against_reference("direct", make_node(FlattenParams{}, {s}, {s[0], n / s[0]}), x);
    ReshapeParams rp;
    rp.shape = {n / s[0]};  // per sample: the batch dimension stays
    check_against_reference("direct", make_node(rp, {s}, {s[0], n / s[0]}), x);
  }
}

// Issue 28 must 4: PRelu (per channel and shared slope, ranks 2-5, odd sizes, NaN and zero inputs) and
// LogSoftmax (every axis but the batch, the NCHW channel axis included; logits large enough that the
// max subtraction matters) against the reference, outputs poisoned by run_variant.
TEST_CASE("prelu and log_softmax direct match the reference") {
  std::mt19937_64 rng(28);
  for (int t = 0; t < 200; ++t) {
    const int rank = uniform(rng, 2, 5);
    Shape s;
    for (int d = 0; d < rank; ++d) s.push_back(uniform(rng, 1, d == rank - 1 ? 33 : 7));
    CAPTURE(t);
    const std::string shape = shape_str(s);
    CAPTURE(shape);
    const Shape slope{t % 3 == 0 ? 1 : s[1]};
    auto in = random_inputs({s, slope}, 900 + t);
    in[0][0] = 0.f;
    if (in[0].size() > 2) in[0][2] = -0.f;
    const std::vector<float> ref = run_variant("reference", make_node(PReluParams{}, {s, slope}, s), in);
    const std::vector<float> got = run_variant("direct", make_node(PReluParams{}, {s, slope}, s), in);
    CHECK(got == ref);  // one multiply, rounded once either way: bit-exact
    for (size_t i = 0; i < ref.size(); ++i) {  // and the definition, element by element
      const int64_t inner = shape_numel(s) / (s[0] * s[1]);
      const float a = in[1][slope[0] == 1 ? 0 : (i / size_t(inner)) % size_t(s[1])];
      const float x = in[0][i];
      REQUIRE(ref[i] == (x < 0 ? a * x : x));
    }
    in[0][in[0].size() / 2] = std::numeric_limits<float>::quiet_NaN();  // NaN passes through
    CHECK(std::isnan(run_variant("direct", make_node(PReluParams{}, {s, slope}, s), in)[in[0].size() / 2]));

    LogSoftmaxParams lp;
    lp.axis = t % 2 == 0 ? 1 : uniform(rng, 1, rank - 1);  // the channel axis half of the time
    auto x = random_inputs({s}, 1900 + t);
    for (float& v : x[0]) v *= 20.f;
    const NodeDesc ln = make_node(lp, {s}, s);
    check_against_reference("direct", ln, x);
    // exp of the log-softmax sums to 1 along the axis (the reference agrees with the definition)
    const std::vector<float> y = run_variant("reference", ln, x);
    int64_t inner = 1;  // the first line: elements k * inner, k < len
    for (int d = lp.axis + 1; d < rank; ++d) inner *= s[size_t(d)];
    const int64_t len = s[size_t(lp.axis)];
    double sum = 0;
    for (int64_t k = 0; k < len; ++k) sum += std::exp(double(y[size_t(k * inner)]));
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
  }
  // an input the kernel-call checks reject: a slope neither [C] nor [1]
  const KernelVariant* pr = KernelRegistry::global().find("cpu", "prelu", "direct");
  std::vector<float> a(6, 1.f), y(6);
  CHECK_THROWS_AS(pr->run(KernelCall{make_node(PReluParams{}, {{2, 3}, {2}}, {2, 3}), {a.data(), a.data()},
                                     {y.data()}}),
                  Error);
}

TEST_CASE("malformed calls are Errors") {
  const Shape s{2, 3};
  std::vector<float> a(6, 1.f), y(6);
  const KernelVariant* add = KernelRegistry::global().find("cpu", "add", "direct");
  CHECK_THROWS_AS(add->run(KernelCall{make_node(AddParams{}, {s, {3, 2}}, s), {a.data(), a.data()},
                                      {y.data()}}),
                  Error);
  CHECK_THROWS_AS(add->run(KernelCall{make_node(AddParams{}, {s, s}, s), {a.data(), nullptr}, {y.data()}}),
                  Error);
  const KernelVariant* sm = KernelRegistry::global().find("cpu", "softmax", "direct");
  SoftmaxParams bad;
  bad.axis = 2;
  CHECK_THROWS_AS(sm->run(KernelCall{make_node(bad, {s}, s), {a.data()}, {y.data()}}), Error);
  const KernelVariant* dense = KernelRegistry::global().find("cpu", "dense", "gemm");
  CHECK_THROWS_AS(dense->run(KernelCall{make_node(DenseParams{}, {{1, 3}, {2, 4}}, {1, 2}),
                                        {a.data(), a.data()}, {y.data()}}),
                  Error);
  const KernelVariant* fl = KernelRegistry::global().find("cpu", "flatten", "direct");
  CHECK_THROWS_AS(fl->run(KernelCall{make_node(FlattenParams{}, {s}, {7}), {a.data()}, {y.data()}}), Error);
}

// ---------------------------------------------------------------------------------------------------
// Whole zoo models, built once each at batch 1: backend "cpu" (fast variants) vs "reference".
TEST_CASE("zoo models on backend cpu match the reference backend") {
  const std::vector<std::pair<std::string, int>> models = {
      {"lenet5", 28}, {"alexnet", 63}, {"vgg11", 32}, {"dcgan", 0}};
  for (const auto& entry : models) {
    const std::string name = entry.first;
    const int size = entry.second;
    CAPTURE(name);
    zoo::ZooOptions zo;
    zo.image_size = size;
    const Model model = Model::from_bytes(zoo::build(name, zo).finish(), name);
    SessionOptions cpu_opts, ref_opts;
    cpu_opts.backend = "cpu";
    ref_opts.backend = "reference";
    Session cpu(model, cpu_opts), ref(model, ref_opts);
    bool fast_used = false;
    for (const NodeInfo& n : cpu.nodes()) fast_used |= n.variant != "reference";
    CHECK(fast_used);
    Shape in_shape = model.inputs()[0].shape;
    in_shape[0] = 1;
    const Tensor x(in_shape, random_vector(static_cast<size_t>(shape_numel(in_shape)), 99));
    const std::vector<Tensor> got = cpu.run({x}), want = ref.run({x});
    REQUIRE(got.size() == 1);
    REQUIRE(want.size() == 1);
    CHECK(got[0].shape == want[0].shape);
    CHECK(rel_error(got[0].data, want[0].data) <= 1e-4);
  }
}

namespace {

// The qgemm tests' exact check: how many entries of c ([M][ldc]) differ from sum_k (a[m * lda + k] -
// zero) * w[(n0 + n) * K + k] in int64 for n < cols, or from the poison 0x7f7f7f7f past cols.
int64_t wrong_sums(const std::vector<int32_t>& c, int64_t M, int64_t ldc, int64_t cols, const uint8_t* a, int64_t lda,
                   const int8_t* w, int64_t n0, int64_t K, int32_t zero) {
  int64_t wrong = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < ldc; ++n) {
      int64_t want = 0x7f7f7f7f;
      if (n < cols) {
        want = 0;
        for (int64_t k = 0; k < K; ++k) want += (int64_t(a[m * lda + k]) - zero) * w[(n0 + n) * K + k];
      }
      wrong += c[size_t(m * ldc + n)] != want;
    }
  return wrong;
}

}  // namespace

// The int8 GEMM under quantized_conv2d (kernels/cpu/qgemm.h) at this process's level: against the
// exact sums in int64 on random shapes (odd K, N past a panel, M past a tile, ldc > N), zero points and
// values up to the ends of their ranges; C poisoned, its columns past N must stay so. Packed A through
// gemm, and row-major A (lda past the pairs) over a random run of panels through gemm_rows.
TEST_CASE("qgemm: the int8 GEMM gives the exact integer sums") {
  namespace qg = infer::cpu::qgemm;
  const CpuIsa isa = cpu_isa_default();
  CAPTURE(cpu_isa_name(isa));
  std::mt19937_64 rng(23);
  for (int t = 0; t < 150; ++t) {
    const int64_t M = uniform(rng, 1, 40), N = uniform(rng, 1, 70), K = t < 3 ? 4095 : uniform(rng, 1, 300);
    const int64_t ldc = N + (t % 2 ? 3 : 0);
    const bool extreme = t % 5 == 0;  // a at 255 with zero point 0 against w at -128: the largest sums
    const int32_t zero = extreme ? 0 : int32_t(uniform(rng, 0, 255));
    std::vector<uint8_t> a(size_t(M * K));
    std::vector<int8_t> w(size_t(N * K));
    for (uint8_t& v : a) v = extreme ? 255 : uint8_t(rng() & 0xff);
    for (int8_t& v : w) v = extreme ? int8_t(-128) : int8_t(int(rng() & 0xff) - 128);
    const qg::PackedB b = qg::pack_b(w.data(), N, K, K, isa);
    std::vector<int32_t> pa(qg::packed_a_size(M, K, isa), 0x5a5a5a5a);
    qg::pack_a(a.data(), M, K, K, zero, isa, pa.data());
    std::vector<int32_t> c(size_t(M * ldc), 0x7f7f7f7f);
    qg::gemm(pa.data(), M, b, c.data(), ldc);
    CAPTURE(t);
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    CHECK(wrong_sums(c, M, ldc, N, a.data(), K, w.data(), 0, K, zero) == 0);
    // gemm_rows: the same A row-major as int16 pairs (rows of lda >= pairs int32), a run of panels
    const int64_t pairs = (K + 1) / 2, lda = pairs + (t % 3);
    std::vector<int16_t> ra(size_t(M * lda * 2), int16_t(0x5a5a));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < 2 * pairs; ++k) ra[size_t(m * lda * 2 + k)] = int16_t(k < K ? int(a[m * K + k]) - zero : 0);
    const int64_t nr = qg::tile_shape(isa).nr(), j0 = uniform(rng, 0, int(b.panels - 1));
    const int64_t j1 = uniform(rng, int(j0 + 1), int(b.panels)), cols = std::min(N, j1 * nr) - j0 * nr;
    std::vector<int32_t> rc(size_t(M * cols), 0x7f7f7f7f);
    qg::gemm_rows(reinterpret_cast<const int32_t*>(ra.data()), lda, M, b, rc.data(), cols, j0, j1);
    CHECK(wrong_sums(rc, M, cols, cols, a.data(), K, w.data(), j0 * nr, K, zero) == 0);
  }
  std::vector<uint8_t> a(4);
  std::vector<int32_t> pa(64);
  CHECK_THROWS_AS(qg::pack_a(a.data(), 1, 4, 4, 256, isa, pa.data()), Error);
  std::vector<int8_t> w(8);
  CHECK_THROWS_AS(qg::pack_b(w.data(), 2, 4, 3, isa), Error);
}

// The u8s8 form (vpmaddubsw, 7-bit weights) at this process's level: the exact sums again, with a at
// 255 against w at +-64 (the pair sums' largest, 32640, just inside int16) and the zero point folded
// into the start; rows past the quads (lda > 4 * quads) poisoned, k past K random (weights 0 there).
// Where the CPU has the level's VNNI (AVX-512 VNNI, AVX-VNNI), the same again through vpdpbusd with
// every int8 weight (extremes -128 and 127). Below AVX2 the form is refused.
TEST_CASE("qgemm: the u8s8 form gives the exact integer sums with 7-bit weights (any int8 with VNNI)") {
  namespace qg = infer::cpu::qgemm;
  const CpuIsa isa = cpu_isa_default();
  CAPTURE(cpu_isa_name(isa));
  std::vector<int8_t> w7(64, 64), w8(64, 64);
  w8[17] = -65;
  if (isa < CpuIsa::Avx2) {
    CHECK_FALSE(qg::fits_u8s8(w7.data(), 64, isa));
    CHECK_THROWS_AS(qg::pack_b_u8s8(w7.data(), 8, 8, 8, 0, isa), Error);
    return;
  }
  const bool vnni_here = qg::has_vnni(isa);
  if (!vnni_here) MESSAGE("VNNI: not on this CPU at this level, its path not run here");
  std::mt19937_64 rng(29);
  for (const bool vnni : {false, true}) {
    if (vnni && !vnni_here) continue;
    CAPTURE(vnni);
    const int lo = vnni ? -128 : -64, hi = vnni ? 127 : 64;
    CHECK(qg::fits_u8s8(w7.data(), 64, isa, vnni));
    CHECK(qg::fits_u8s8(w8.data(), 64, isa, vnni) == vnni);
    if (vnni)
      CHECK(qg::pack_b_u8s8(w8.data(), 8, 8, 8, 0, isa, true).vnni);
    else
      CHECK_THROWS_WITH_AS(qg::pack_b_u8s8(w8.data(), 8, 8, 8, 0, isa, false), doctest::Contains("[-64, 64]"),
                           Error);
    for (int t = 0; t < 150; ++t) {
      const int64_t M = uniform(rng, 1, 40), N = uniform(rng, 1, 70), K = t < 3 ? 4095 : uniform(rng, 1, 300);
      const int64_t quads = (K + 3) / 4, lda = 4 * (quads + t % 3), cols_pad = t % 2 ? 3 : 0;
      const int extreme = t % 5;  // 1: a 255, zero 0, w hi; 2: a 255, zero 0, w lo; 3: a 0, zero 255, w lo
      const int32_t zero = extreme == 3 ? 255 : extreme ? 0 : int32_t(uniform(rng, 0, 255));
      std::vector<uint8_t> a(size_t(M * lda), 0xa5);
      std::vector<int8_t> w(size_t(N * K));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < 4 * quads; ++k)
          a[size_t(m * lda + k)] =
              k >= K ? uint8_t(rng() & 0xff) : extreme == 3 ? 0 : extreme ? 255 : uint8_t(rng() & 0xff);
      for (int8_t& v : w) v = int8_t(extreme == 1 ? hi : extreme >= 2 ? lo : uniform(rng, lo, hi));
      const qg::PackedB8 b = qg::pack_b_u8s8(w.data(), N, K, K, zero, isa, vnni);
      CHECK(b.vnni == vnni);
      const int64_t nr = qg::tile_shape(isa).nr(), j0 = uniform(rng, 0, int(b.panels - 1));
      const int64_t j1 = uniform(rng, int(j0 + 1), int(b.panels)), cols = std::min(N, j1 * nr) - j0 * nr;
      const int64_t ldc = cols + cols_pad;
      std::vector<int32_t> c(size_t(M * ldc), 0x7f7f7f7f);
      qg::gemm_rows_u8s8(a.data(), lda, M, b, c.data(), ldc, j0, j1);
      CAPTURE(t);
      CAPTURE(M);
      CAPTURE(N);
      CAPTURE(K);
      CHECK(wrong_sums(c, M, ldc, cols, a.data(), lda, w.data(), j0 * nr, K, zero) == 0);
    }
  }
  std::vector<uint8_t> a(64);
  std::vector<int32_t> c(64);
  const qg::PackedB8 b = qg::pack_b_u8s8(w7.data(), 8, 8, 8, 3, isa);
  CHECK_THROWS_AS(qg::gemm_rows_u8s8(a.data(), 6, 1, b, c.data(), 8), Error);  // lda not a multiple of 4
  CHECK_THROWS_AS(qg::gemm_rows_u8s8(a.data(), 4, 1, b, c.data(), 8), Error);  // lda below the quads
  CHECK_THROWS_AS(qg::pack_b_u8s8(w7.data(), 8, 8, 8, 256, isa), Error);
}

// The requantizing form against gemm_rows_u8s8's exact sums and its documented formula in scalar code
// (std::fma, the division, nearbyint, saturation, the int8 flip), both steps (vpmaddubsw with 7-bit
// weights; vpdpbusd where the CPU has the level's VNNI), random panels and partial last panels, the
// activation none / ReLU / a Clip, scales that saturate, both output types; bytes past the columns
// written untouched.
TEST_CASE("qgemm: the requantizing u8s8 form writes quantize_linear of its float epilogue, byte for byte") {
  namespace qg = infer::cpu::qgemm;
  const CpuIsa isa = cpu_isa_default();
  CAPTURE(cpu_isa_name(isa));
  if (isa < CpuIsa::Avx2) return;  // no u8s8 form below AVX2 (the u8s8 test checks it is refused)
  std::mt19937_64 rng(31);
  for (const bool vnni : {false, true}) {
    if (vnni && !qg::has_vnni(isa)) continue;
    CAPTURE(vnni);
    for (int t = 0; t < 120; ++t) {
      CAPTURE(t);
      const int64_t M = uniform(rng, 1, 37), N = uniform(rng, 1, 75), K = uniform(rng, 1, 200);
      const int64_t lda = 4 * ((K + 3) / 4);
      const int32_t zero = int32_t(uniform(rng, 0, 255));
      std::vector<uint8_t> a(size_t(M * lda));
      for (uint8_t& v : a) v = uint8_t(rng() & 0xff);
      std::vector<int8_t> w(size_t(N * K));
      for (int8_t& v : w) v = int8_t(vnni ? uniform(rng, -128, 127) : uniform(rng, -64, 64));
      const qg::PackedB8 b = qg::pack_b_u8s8(w.data(), N, K, K, zero, isa, vnni);
      const int64_t nr = qg::tile_shape(isa).nr(), j0 = uniform(rng, 0, int(b.panels - 1));
      const int64_t j1 = uniform(rng, int(j0 + 1), int(b.panels)), cols = std::min(N, j1 * nr) - j0 * nr;
      std::vector<int32_t> c(size_t(M * cols));
      qg::gemm_rows_u8s8(a.data(), lda, M, b, c.data(), cols, j0, j1);
      std::vector<float> mult(size_t(b.panels * nr), 0.f), bias(size_t(b.panels * nr), 0.f);
      for (int64_t n = 0; n < N; ++n)
        mult[size_t(n)] = std::uniform_real_distribution<float>(1e-5f, 1e-3f)(rng),
        bias[size_t(n)] = std::uniform_real_distribution<float>(-0.5f, 0.5f)(rng);
      qg::Requant rq;
      rq.mult = mult.data(), rq.bias = bias.data();
      const int act = t % 3;  // none, ReLU, Clip(-0.2, 0.9)
      rq.act_lo = act == 0 ? -INFINITY : act == 1 ? 0.f : -0.2f;
      rq.act_hi = act == 2 ? 0.9f : INFINITY;
      const bool i8 = t % 2;
      const int32_t yzero = i8 ? int32_t(uniform(rng, -20, 20)) : int32_t(uniform(rng, 0, 255));
      rq.scale = std::uniform_real_distribution<float>(0.0005f, 0.01f)(rng);  // small ones saturate
      rq.shift = yzero + (i8 ? 128 : 0);
      rq.flip = i8 ? 0x80 : 0;
      const int64_t ldy = cols + t % 4;
      std::vector<uint8_t> y(size_t(M * ldy), 0x5a);
      rq.y = y.data(), rq.ldy = ldy;
      qg::gemm_rows_u8s8_q8(a.data(), lda, M, b, rq, j0, j1);
      int64_t wrong = 0, untouched = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < ldy; ++n) {
          const uint8_t got = y[size_t(m * ldy + n)];
          if (n >= cols) {
            untouched += got != 0x5a;
            continue;
          }
          const int64_t col = j0 * nr + n;
          float v = std::fma(float(c[size_t(m * cols + n)]), mult[size_t(col)], bias[size_t(col)]);
          v = std::min(rq.act_hi, std::max(rq.act_lo, v));
          const float tq = std::clamp(v / rq.scale, -4194304.f, 4194304.f);
          const int32_t q = std::clamp(int32_t(std::nearbyint(tq)) + rq.shift, 0, 255);
          wrong += got != uint8_t(q ^ rq.flip);
        }
      CHECK(wrong == 0);
      CHECK(untouched == 0);
    }
  }
}
