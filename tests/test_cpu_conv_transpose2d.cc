// Tests of the CPU transposed-convolution variants (kernels/cpu/conv_transpose2d.cc) against the
// reference kernel: >= 200 random shapes per variant (kernel 1-7, asymmetric padding 0..k-1,
// output_padding, odd and even sizes, channels 1..67, batch 1..3, every activation), gemm_col2im on
// shapes that need several row bands, segregated_unified's paths (kernels/cpu/conv_transpose2d_
// unified.cc: both micro-kernels, several C_in chunks, several channel groups per item, Table-4
// layers), grouped / depthwise / dilated nodes (gemm_col2im, the only variant that takes them; the
// others not applicable), the paper's 4x4-input / 5x5-kernel / padding-2 example, Table 4's
// upsampled-buffer sizes, the default heuristic, and bad calls. ctest runs the suite once per CPU ISA
// level (@avx512, @avx2, @baseline: INFER_CPU_ISA), so segregated_unified's tiles of each level run.
// Outputs and workspaces are NaN-poisoned before each run so an unwritten element fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/openblas.h"
#include "kernels/cpu/conv_transpose2d.h"
#include "kernels/cpu/conv_transpose2d_unified.h"
#include "kernels/cpu/im2col.h"
#include "infer/kernel.h"
#include "kernels/reference/reference.h"
#include "test_util.h"

using namespace infer;
using infer::test::poison;
using infer::test::random_vector;
using infer::test::rel_error;

namespace {

const KernelVariant& variant(const std::string& name) {
  const KernelVariant* v = KernelRegistry::global().find("cpu", "conv_transpose2d", name);
  REQUIRE_MESSAGE(v != nullptr, "variant " << name << " is not registered");
  return *v;
}

struct Case {
  ConvTranspose2DParams p;
  Shape x, w, y;
  bool bias = true;
};

int64_t out_size(int64_t in, int s, int pa, int pb, int64_t k, int op) {
  return (in - 1) * s - pa - pb + k + op;
}

NodeDesc make_node(const Case& c, const std::vector<float>& w, const std::vector<float>& b) {
  NodeDesc node;
  node.params = c.p;
  node.input_shapes = {c.x, c.w};
  node.constants = {nullptr, w.data()};
  if (c.bias) {
    node.input_shapes.push_back({c.y[1]});  // C_out = w[1] * groups
    node.constants.push_back(b.data());
  }
  node.output_shapes = {c.y};
  return node;
}

// Runs one variant exactly as the session would: prepare once, a poisoned 256-byte aligned
// workspace, a poisoned output.
std::vector<float> run_variant(const KernelVariant& v, const NodeDesc& node,
                               const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>& b) {
  std::shared_ptr<void> prepared = v.prepare ? v.prepare(node) : nullptr;
  const size_t ws = v.workspace_bytes ? v.workspace_bytes(node) : 0;
  std::vector<float> workspace(ws / sizeof(float) + 64);
  poison(workspace);
  float* ws_ptr = reinterpret_cast<float*>(
      (reinterpret_cast<uintptr_t>(workspace.data()) + 255) / 256 * 256);
  std::vector<float> y(static_cast<size_t>(shape_numel(node.output_shapes[0])));
  poison(y);
  std::vector<const float*> inputs = {x.data(), w.data()};
  if (node.input_shapes.size() == 3) inputs.push_back(b.data());
  KernelCall call{node, inputs, {y.data()}, ws ? ws_ptr : nullptr, prepared.get()};
  v.run(call);
  return y;
}

// Checks `names` (those applicable) against the reference on case c; returns how many ran.
int check_case(const Case& c, const std::vector<std::string>& names, uint64_t seed) {
  const auto x = random_vector(size_t(shape_numel(c.x)), seed);
  const auto w = random_vector(size_t(shape_numel(c.w)), seed + 1);
  const auto b = random_vector(size_t(c.y[1]), seed + 2);
  const NodeDesc node = make_node(c, w, b);
  std::vector<float> ref(size_t(shape_numel(c.y)));
  ref::conv_transpose2d(c.p, x.data(), c.x, w.data(), c.w, c.bias ? b.data() : nullptr, ref.data(),
                        c.y);
  int ran = 0;
  for (const auto& name : names) {
    const KernelVariant& v = variant(name);
    if (!v.applicable(node)) continue;
    const auto y = run_variant(v, node, x, w, b);
    const double err = rel_error(y, ref);
    CHECK_MESSAGE(err <= 1e-5, name << " x" << shape_str(c.x) << " w" << shape_str(c.w) << " s"
                                    << c.p.stride_h << "x" << c.p.stride_w << " pad "
                                    << c.p.pad.top << "," << c.p.pad.left << "," << c.p.pad.bottom
                                    << "," << c.p.pad.right << " op " << c.p.output_padding_h << ","
                                    << c.p.output_padding_w << " groups " << c.p.groups << " dilation "
                                    << c.p.dilation_h << "x" << c.p.dilation_w << " err " << err);
    ++ran;
  }
  return ran;
}

// A random case with strides drawn from `strides`; output size >= 1.
Case random_case(std::mt19937& rng, const std::vector<int>& strides) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (;;) {
    Case c;
    const int kh = uni(1, 7), kw = uni(1, 7);
    c.p.stride_h = strides[size_t(uni(0, int(strides.size()) - 1))];
    c.p.stride_w = uni(0, 3) == 0 ? strides[size_t(uni(0, int(strides.size()) - 1))] : c.p.stride_h;
    c.p.pad = {uni(0, kh - 1), uni(0, kw - 1), uni(0, kh - 1), uni(0, kw - 1)};
    if (uni(0, 1)) c.p.pad.bottom = c.p.pad.top, c.p.pad.right = c.p.pad.left;  // symmetric often
    c.p.output_padding_h = uni(0, c.p.stride_h - 1);
    c.p.output_padding_w = uni(0, c.p.stride_w - 1);
    c.p.activation = test::activation_case(uni(0, test::kBoundedActivationCases - 1));
    c.bias = uni(0, 3) != 0;
    // channels 1..67, but keep C_in*C_out moderate so the double-precision oracle stays fast
    int ci = uni(1, 67), co = uni(1, 67);
    if (ci * co > 600) (uni(0, 1) ? ci : co) = uni(1, 8);
    const int n = uni(1, 3), h = uni(1, 9), wd = uni(1, 9);
    c.x = {n, ci, h, wd};
    c.w = {ci, co, kh, kw};
    const int64_t ho = out_size(h, c.p.stride_h, c.p.pad.top, c.p.pad.bottom, kh, c.p.output_padding_h);
    const int64_t wo = out_size(wd, c.p.stride_w, c.p.pad.left, c.p.pad.right, kw, c.p.output_padding_w);
    if (ho < 1 || wo < 1) continue;
    c.y = {n, co, ho, wo};
    return c;
  }
}

}  // namespace

TEST_CASE("every variant matches the reference on >= 200 random shapes") {
  std::mt19937 rng(1234);
  struct Plan {
    std::string name;
    std::vector<int> strides;
  };
  // stride 2 is the paper's case; 1 and 3 exercise flipped_conv and the general s*s-phase path
  const std::vector<Plan> plans = {{"conventional", {1, 2, 2, 3}},
                                   {"segregated_unified", {1, 2, 2, 3}},
                                   {"segregated_gemm", {1, 2, 2, 3}},
                                   {"flipped_conv", {1}},
                                   {"gemm_col2im", {1, 2, 2, 3}}};
  for (const auto& plan : plans) {
    int ran = 0;
    for (int i = 0; i < 210; ++i) ran += check_case(random_case(rng, plan.strides), {plan.name}, 77 + 3 * i);
    CHECK_MESSAGE(ran >= 200, plan.name << " ran on " << ran << " shapes");
  }
}

const std::vector<std::string> kAllVariants = {"conventional", "segregated_unified", "segregated_gemm",
                                               "flipped_conv", "gemm_col2im"};

// Groups in {1, 2, C_in}, dilation 1-3, strides 1-4, output_padding < max(stride, dilation), odd
// sizes (test::random_grouped_conv_transpose2d_shapes): gemm_col2im on every case; the other variants
// on the plain ones (groups 1, dilation 1) only, and never applicable otherwise; the session's default
// choice for a grouped or dilated node is gemm_col2im.
TEST_CASE("groups and dilation: gemm_col2im matches the reference; the other variants refuse them") {
  std::mt19937_64 rng(4141);
  int col2im_ran = 0, grouped = 0, depthwise = 0, dilated = 0, plain = 0;
  std::vector<float> w1(1), b1(1);
  for (int t = 0; t < 240; ++t) {
    const test::RandomGroupedTconv r = test::random_grouped_conv_transpose2d_shapes(rng, t);
    Case c;
    c.p = r.p;
    c.x = r.inputs[0];
    c.w = r.inputs[1];
    c.y = r.y;
    c.bias = r.inputs.size() == 3;
    const bool is_plain = c.p.groups == 1 && c.p.dilation_h == 1 && c.p.dilation_w == 1;
    plain += is_plain;
    grouped += c.p.groups > 1;
    depthwise += c.p.groups > 1 && c.p.groups == c.x[1];
    dilated += c.p.dilation_h > 1 || c.p.dilation_w > 1;
    const NodeDesc node = make_node(c, w1, b1);
    if (!is_plain) {
      for (const auto& name : kAllVariants)
        CHECK_MESSAGE(variant(name).applicable(node) == (name == "gemm_col2im"), name << " on case " << t);
      CHECK(test::default_variant("cpu", "conv_transpose2d", node) == "gemm_col2im");
    }
    const int ran = check_case(c, kAllVariants, 9000 + 5 * uint64_t(t));
    CHECK(ran >= 1);
    col2im_ran += variant("gemm_col2im").applicable(node);
  }
  CHECK(col2im_ran == 240);
  CHECK(grouped >= 140);
  CHECK(depthwise >= 70);
  CHECK(dilated >= 140);
  CHECK(plain >= 10);
}

TEST_CASE("groups and dilation: gemm_col2im over several row bands (dilated band overlap)") {
  Case a;  // groups 2, dilation (2, 3): one input row's columns are ~1/5 of the tile: 1-row bands
  a.p.stride_h = a.p.stride_w = 2;
  a.p.groups = 2;
  a.p.dilation_h = 2;
  a.p.dilation_w = 3;
  a.p.pad = {5, 4, 2, 7};
  a.p.output_padding_h = 1;
  a.p.activation.kind = ActivationKind::Tanh;
  a.x = {1, 8, 40, 64};
  a.w = {8, 32, 7, 7};
  a.y = {1, 64, out_size(40, 2, 5, 2, 13, 1), out_size(64, 2, 4, 7, 19, 0)};
  CHECK(check_case(a, {"gemm_col2im"}, 31) == 1);
  Case b;  // depthwise-transposed (16 groups, 4 outputs each), stride 4x3, dilation 2x3: 16-row bands
  b.p.stride_h = 4;
  b.p.stride_w = 3;
  b.p.groups = 16;
  b.p.dilation_h = 2;
  b.p.dilation_w = 3;
  b.p.pad = {3, 5, 1, 2};
  b.p.output_padding_h = 3;
  b.p.output_padding_w = 2;
  b.p.activation.kind = ActivationKind::LeakyRelu;
  b.p.activation.alpha = 0.2f;
  b.x = {2, 16, 20, 200};
  b.w = {16, 4, 3, 5};
  b.y = {2, 64, out_size(20, 4, 3, 1, 5, 3), out_size(200, 3, 5, 2, 13, 2)};
  CHECK(check_case(b, {"gemm_col2im"}, 32) == 1);
}

// segregated_unified's paths at the level this process runs (ctest: each level): the pixel-
// vectorised tile (C_out <= 4 on rows wider than a vector), the channel-vectorised one with C_out
// not a multiple of the vector width, several C_in chunks (partial sums on the stack between them),
// several channel groups per item (outputs above 32x32), phases without taps (stride > kernel);
// every padding up to k-1, output_padding, odd sizes, batch 1-3, every activation, NaN-poisoned
// outputs. The layout counts make sure each path ran.
TEST_CASE("segregated_unified: both micro-kernels, C_in chunks, channel groups, borders") {
  std::mt19937 rng(2718);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const KernelVariant& v = variant("segregated_unified");
  int pixel = 0, channel = 0, chunked = 0, multi_group = 0, tapless = 0, ran = 0;
  std::vector<float> w1(1), b1(1);
  for (int t = 0; t < 160; ++t) {
    Case c;
    int ci, co, h, wd, kh, kw;
    c.p.stride_h = uni(1, 3);
    c.p.stride_w = uni(0, 3) == 0 ? uni(1, 3) : c.p.stride_h;
    switch (t % 4) {
      case 0:  // few output channels on wide rows: the pixel tile
        ci = uni(1, 40), co = uni(1, 4), h = uni(1, 12), wd = uni(8, 48), kh = uni(1, 5), kw = uni(1, 5);
        break;
      case 1:  // many input channels and taps: several chunks
        ci = uni(200, 360), co = uni(17, 24), h = uni(1, 3), wd = uni(1, 3), kh = uni(4, 7), kw = uni(4, 7);
        break;
      case 2:  // large outputs, more channels than one group (96 on AVX-512): several groups per item
        ci = uni(1, 4), co = uni(20, 200), h = uni(17, 24), wd = uni(17, 24), kh = uni(3, 4), kw = uni(3, 4);
        c.p.stride_h = c.p.stride_w = 2;
        break;
      default:  // anything small, C_out 1..67
        ci = uni(1, 67), co = uni(1, 67), h = uni(1, 9), wd = uni(1, 9), kh = uni(1, 7), kw = uni(1, 7);
        if (ci * co > 600) (uni(0, 1) ? ci : co) = uni(1, 8);
        break;
    }
    c.p.pad = {uni(0, kh - 1), uni(0, kw - 1), uni(0, kh - 1), uni(0, kw - 1)};
    c.p.output_padding_h = uni(0, c.p.stride_h - 1);
    c.p.output_padding_w = uni(0, c.p.stride_w - 1);
    c.p.activation = test::activation_case(uni(0, test::kBoundedActivationCases - 1));
    c.bias = uni(0, 3) != 0;
    const int n = t % 4 == 1 ? 1 : uni(1, 3);
    c.x = {n, ci, h, wd};
    c.w = {ci, co, kh, kw};
    const int64_t ho = out_size(h, c.p.stride_h, c.p.pad.top, c.p.pad.bottom, kh, c.p.output_padding_h);
    const int64_t wo = out_size(wd, c.p.stride_w, c.p.pad.left, c.p.pad.right, kw, c.p.output_padding_w);
    if (ho < 1 || wo < 1) continue;
    c.y = {n, co, ho, wo};
    const NodeDesc node = make_node(c, w1, b1);
    REQUIRE(v.applicable(node));
    const cpu::UnifiedLayout l = cpu::conv_transpose2d_unified_layout(node);
    pixel += l.pixel;
    channel += !l.pixel;
    chunked += l.chunks > 1;
    multi_group += !l.pixel && l.groups_per_item > 1;
    tapless += c.p.stride_h > kh || c.p.stride_w > kw;
    ran += check_case(c, {"segregated_unified"}, 500 + 7 * uint64_t(t));
  }
  INFO("level " << std::string(cpu_isa_name(cpu_isa_default())));
  CHECK(ran >= 130);
  CHECK(pixel >= 15);
  CHECK(channel >= 60);
  CHECK(chunked >= 15);
  CHECK(multi_group >= 10);
  CHECK(tapless >= 5);
}

// The Table-4 layer shapes (k4 s2 p1; here with bias and ReLU, batch 2) at reduced C_in / C_out,
// one per input size, and the -> 3 output layers (the pixel tile).
TEST_CASE("segregated_unified: Table-4 layer shapes") {
  struct L {
    int n, ci, co;
  };
  for (const L& l : {L{4, 512, 256}, L{8, 256, 128}, L{16, 128, 64}, L{32, 64, 3}, L{32, 128, 3}, L{64, 32, 32}}) {
    Case c;
    c.p.stride_h = c.p.stride_w = 2;
    c.p.pad = {1, 1, 1, 1};
    c.p.activation.kind = ActivationKind::Relu;
    c.x = {2, l.ci, l.n, l.n};
    c.w = {l.ci, l.co, 4, 4};
    c.y = {2, l.co, 2 * l.n, 2 * l.n};
    CHECK(check_case(c, {"segregated_unified"}, 40 + uint64_t(l.n)) == 1);
  }
}

TEST_CASE("the paper's 4x4 input, 5x5 kernel, stride 2, padding 2 example through every variant") {
  for (int op : {0, 1})
    for (int pad : {2, 1}) {  // padding 2 (even: phase order kept) and 1 (odd: phases swapped)
      Case c;
      c.p.stride_h = c.p.stride_w = 2;
      c.p.pad = {pad, pad, pad, pad};
      c.p.output_padding_h = c.p.output_padding_w = op;
      c.x = {1, 1, 4, 4};
      c.w = {1, 1, 5, 5};
      const int64_t o = out_size(4, 2, pad, pad, 5, op);
      c.y = {1, 1, o, o};
      CHECK(check_case(c, {"conventional", "segregated_unified", "segregated_gemm", "gemm_col2im"}, 5) == 4);
    }
}

TEST_CASE("zoo-like layers: DCGAN k4 s2 p1 and the stride-1 4x4 projection") {
  Case c;
  c.p.stride_h = c.p.stride_w = 2;
  c.p.pad = {1, 1, 1, 1};
  c.p.activation.kind = ActivationKind::Relu;
  c.x = {1, 64, 8, 8};
  c.w = {64, 32, 4, 4};
  c.y = {1, 32, 16, 16};
  CHECK(check_case(c, {"conventional", "segregated_unified", "segregated_gemm", "gemm_col2im"}, 9) == 4);
  Case z;  // z 1x1 -> 4x4, k4 s1 p0
  z.x = {2, 100, 1, 1};
  z.w = {100, 48, 4, 4};
  z.y = {2, 48, 4, 4};
  CHECK(check_case(z, {"flipped_conv", "conventional", "segregated_gemm", "segregated_unified", "gemm_col2im"},
                   11) == 5);
}

TEST_CASE("gemm_col2im: several bands of output rows, one-row bands, stride 3 with asymmetric padding") {
  // The random shapes above fit one band; these make the columns of one band exceed the 4 MiB tile
  // so that bands (and the input rows they share) are exercised.
  Case a;  // M*W = 3136*64 floats per input row: 5 input rows, 4 output rows per band
  a.p.stride_h = a.p.stride_w = 2;
  a.p.pad = {3, 2, 1, 3};
  a.p.activation.kind = ActivationKind::Tanh;
  a.x = {1, 8, 40, 64};
  a.w = {8, 64, 7, 7};
  a.y = {1, 64, out_size(40, 2, 3, 1, 7, 0), out_size(64, 2, 2, 3, 7, 0)};
  CHECK(check_case(a, {"gemm_col2im"}, 21) == 1);
  Case b = a;  // a single input row's columns exceed the tile: one output row per band
  b.p.output_padding_h = 1;
  b.x = {1, 4, 6, 300};
  b.w = {4, 64, 7, 7};
  b.y = {1, 64, out_size(6, 2, 3, 1, 7, 1), out_size(300, 2, 2, 3, 7, 0)};
  CHECK(check_case(b, {"gemm_col2im"}, 22) == 1);
  Case c;  // stride 3 x 2, output_padding: two bands
  c.p.stride_h = 3;
  c.p.stride_w = 2;
  c.p.pad = {2, 1, 4, 3};
  c.p.output_padding_h = c.p.output_padding_w = 1;
  c.p.activation.kind = ActivationKind::LeakyRelu;
  c.p.activation.alpha = 0.2f;
  c.x = {2, 5, 30, 50};
  c.w = {5, 40, 5, 4};
  c.y = {2, 40, out_size(30, 3, 2, 4, 5, 1), out_size(50, 2, 1, 3, 4, 1)};
  CHECK(check_case(c, {"gemm_col2im", "segregated_gemm"}, 23) == 2);
}

TEST_CASE("the default heuristic: segregated_unified, except where OpenBLAS runs wider kernels") {
  std::vector<float> w(1), b(1);
  // As the session chooses (test::default_variant): the highest (shape-dependent) priority.
  auto pick = [&](int stride, int pad, const Shape& x, const Shape& ws) -> std::string {
    Case c;
    c.p.stride_h = c.p.stride_w = stride;
    c.p.pad = {pad, pad, pad, pad};
    c.x = x;
    c.w = ws;
    c.y = {x[0], ws[1], out_size(x[2], stride, pad, pad, ws[2], 0), out_size(x[3], stride, pad, pad, ws[3], 0)};
    return test::default_variant("cpu", "conv_transpose2d", make_node(c, w, b));
  };
  // OpenBLAS runs its own level (or OPENBLAS_CORETYPE's) whatever INFER_CPU_ISA says: only a cap
  // below OpenBLAS's level pits segregated_unified's narrower tiles against wider GEMMs.
  const bool capped = cpu_isa_default() < std::min(cpu_isa_supported(), infer::openblas_isa());
  const bool avx2 = cpu_isa_default() == CpuIsa::Avx2;
  INFO("level " << std::string(cpu_isa_name(cpu_isa_default())) << ", CPU "
                 << std::string(cpu_isa_name(cpu_isa_supported())) << ", OpenBLAS "
                 << std::string(cpu_isa_name(infer::openblas_isa())));
  const std::string U = "segregated_unified";
  auto expect = [&](const std::string& when_capped) { return capped ? when_capped : U; };
  CHECK(pick(1, 0, {1, 100, 1, 1}, {100, 1024, 4, 4}) == U);  // the z projection
  CHECK(pick(1, 1, {1, 64, 16, 16}, {64, 32, 3, 3}) == expect("flipped_conv"));
  CHECK(pick(2, 1, {1, 1024, 4, 4}, {1024, 512, 4, 4}) == expect(avx2 ? U : "gemm_col2im"));
  CHECK(pick(2, 1, {1, 256, 8, 8}, {256, 128, 4, 4}) == expect("gemm_col2im"));
  CHECK(pick(2, 1, {1, 128, 16, 16}, {128, 128, 4, 4}) == expect("segregated_gemm"));  // C_out > C_in / 2
  CHECK(pick(2, 1, {1, 256, 16, 16}, {256, 128, 4, 4}) == expect("gemm_col2im"));
  CHECK(pick(2, 1, {1, 128, 32, 32}, {128, 3, 4, 4}) == expect("gemm_col2im"));
  CHECK(pick(2, 1, {1, 1024, 8, 8}, {1024, 512, 4, 4}) == expect("gemm_col2im"));
  CHECK(pick(2, 1, {1, 128, 64, 64}, {128, 64, 4, 4}) == expect("gemm_col2im"));
  CHECK(pick(2, 1, {1, 512, 16, 16}, {512, 512, 4, 4}) == expect("segregated_gemm"));
  CHECK(pick(2, 1, {1, 64, 128, 128}, {64, 64, 4, 4}) == expect("segregated_gemm"));
  CHECK(pick(3, 1, {1, 64, 16, 16}, {64, 8, 4, 4}) == expect("segregated_gemm"));  // other strides
}

TEST_CASE("Table 4 memory column: the conventional upsampled buffer") {
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = 2;
  p.pad = {1, 1, 1, 1};
  // DCGAN layer 2: 4x4x1024 input, 4x4 kernel -> 11x11x1024 floats
  CHECK(conv_transpose2d_upsampled_bytes(p, {1, 1024, 4, 4}, {1024, 512, 4, 4}) == 495616);
  // EB-GAN: (N, C_in, C_out) = (4,2048,1024) (8,1024,512) (16,512,256) (32,256,128) (64,128,64)
  // (128,64,64)
  const int64_t layers[][3] = {{4, 2048, 1024}, {8, 1024, 512}, {16, 512, 256},
                               {32, 256, 128},  {64, 128, 64},  {128, 64, 64}};
  uint64_t total = 0;
  for (const auto& l : layers)
    total += conv_transpose2d_upsampled_bytes(p, {1, l[1], l[0], l[0]}, {l[1], l[2], 4, 4});
  CHECK(total == 35534592);

  // the conventional variant's workspace holds that buffer; segregated_unified needs none
  Case c;
  c.p = p;
  c.x = {1, 1024, 4, 4};
  c.w = {1024, 512, 4, 4};
  c.y = {1, 512, 8, 8};
  std::vector<float> w(1), b(1);
  const NodeDesc node = make_node(c, w, b);
  CHECK(variant("conventional").workspace_bytes(node) >= 495616);
  CHECK(!variant("segregated_unified").workspace_bytes);
}

TEST_CASE("bad nodes are not applicable and bad calls throw infer::Error") {
  Case c;
  c.p.stride_h = c.p.stride_w = 2;
  c.x = {1, 3, 4, 4};
  c.w = {3, 2, 3, 3};
  c.y = {1, 2, 9, 9};
  const auto x = random_vector(48, 1), w = random_vector(54, 2), b = random_vector(2, 3);
  NodeDesc good = make_node(c, w, b);
  for (const char* name : {"conventional", "segregated_unified", "segregated_gemm"})
    CHECK(variant(name).applicable(good));
  CHECK(!variant("flipped_conv").applicable(good));
  CHECK(variant("gemm_col2im").applicable(good));

  NodeDesc wrong_out = good;
  wrong_out.output_shapes = {{1, 2, 8, 9}};
  NodeDesc wrong_ch = good;
  wrong_ch.input_shapes[1] = {4, 2, 3, 3};
  NodeDesc no_const = good;
  no_const.constants = {nullptr, nullptr, nullptr};
  for (const char* name : {"conventional", "segregated_unified", "segregated_gemm", "flipped_conv"}) {
    const KernelVariant& v = variant(name);
    CHECK(!v.applicable(wrong_out));
    CHECK(!v.applicable(wrong_ch));
    CHECK(!v.applicable(no_const));
    CHECK_THROWS_AS(v.prepare(wrong_out), Error);
    std::vector<float> y(162);
    KernelCall unprepared{good, {x.data(), w.data(), b.data()}, {y.data()}, nullptr, nullptr};
    CHECK_THROWS_AS(v.run(unprepared), Error);
  }
  // gemm_col2im reads the weight at run time (no prepare): a non-constant weight is fine, a bad node
  // is not, and a call without its workspace or with a null input throws
  const KernelVariant& col2im = variant("gemm_col2im");
  CHECK(col2im.applicable(no_const));
  CHECK(!col2im.applicable(wrong_out));
  CHECK(!col2im.applicable(wrong_ch));
  {
    std::vector<float> y(162);
    KernelCall no_workspace{good, {x.data(), w.data(), b.data()}, {y.data()}, nullptr, nullptr};
    CHECK_THROWS_AS(col2im.run(no_workspace), Error);
    std::vector<float> ws(col2im.workspace_bytes(good) / sizeof(float) + 1);
    KernelCall null_input{good, {x.data(), nullptr, b.data()}, {y.data()}, ws.data(), nullptr};
    CHECK_THROWS_AS(col2im.run(null_input), Error);
    KernelCall bad_node{wrong_out, {x.data(), w.data(), b.data()}, {y.data()}, ws.data(), nullptr};
    CHECK_THROWS_AS(col2im.run(bad_node), Error);
  }
  CHECK_THROWS_AS(conv_transpose2d_upsampled_bytes(c.p, {1, 3, 4}, c.w), Error);
  ConvTranspose2DParams big_pad = c.p;
  big_pad.pad = {3, 3, 3, 3};
  CHECK_THROWS_AS(conv_transpose2d_upsampled_bytes(big_pad, c.x, c.w), Error);
}
