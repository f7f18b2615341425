// The cpu backend's channels-last path (docs/kernels.md "CPU: the channels-last path"): every NHWC
// kernel variant against the reference on random shapes (odd sizes, channel counts that are not
// multiples of 16 / 8 / 4, every padding and stride, batch > 1, outputs and workspaces poisoned with
// NaN), its inputs converted to NHWC first and its output back; the layout conversions bit-exact; the
// priorities that make the channels_last pass switch a graph at its first depthwise convolution (or a
// mobile stem before it) and nowhere else; and whole MobileNet- / EfficientNet- / ShuffleNet-style graphs run with the pass on
// and off and on the reference backend. Run per CPU ISA level by ctest (INFER_CPU_ISA).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "infer/kernel.h"
#include "infer/error.h"
#include "infer/infer.h"
#include "shape_inference.h"
#include "test_util.h"

using namespace infer;
using infer::test::poison;
using infer::test::shaped_node;
using infer::test::random_activation;
using infer::test::random_vector;
using infer::test::rel_error;
using infer::test::to_nchw;
using infer::test::to_nhwc;
using infer::test::uniform;

namespace {

constexpr double kTol = 1e-5;


const KernelVariant& variant(const std::string& op, const std::string& name) {
  const KernelVariant* v = KernelRegistry::global().find("cpu", op, name);
  REQUIRE_MESSAGE(v != nullptr, "no variant cpu/" << op << "/" << name);
  return *v;
}

// Runs `name` on a node in `layout` with NCHW-ordered host inputs: in NHWC the 4-D activation inputs
// (no constant) are converted first and the output back. prepare() if present, workspace and output
// poisoned. Returns the output in NCHW order.
std::vector<float> run_in(Layout layout, const std::string& name, NodeDesc node,
                          const std::vector<std::vector<float>>& inputs) {
  node.layout = layout;
  const KernelVariant& v = variant(op_name(op_type(node.params)), name);
  REQUIRE_MESSAGE(variant_applies(v, node), name << " does not apply");
  std::vector<std::vector<float>> in = inputs;
  const bool nhwc = layout == Layout::NHWC;
  for (size_t k = 0; k < in.size(); ++k)
    if (nhwc && node.input_shapes[k].size() == 4 && !node.constants[k]) in[k] = to_nhwc(in[k], node.input_shapes[k]);
  std::vector<float> workspace(v.workspace_bytes ? v.workspace_bytes(node) / sizeof(float) + 1 : 0);
  poison(workspace);
  const std::shared_ptr<void> prepared = v.prepare ? v.prepare(node) : nullptr;
  const Shape& ys = node.output_shapes.at(0);
  std::vector<float> out(static_cast<size_t>(shape_numel(ys)));
  poison(out);
  KernelCall call{node, {}, {out.data()}, workspace.empty() ? nullptr : workspace.data(), prepared.get()};
  for (const auto& x : in) call.inputs.push_back(x.data());
  v.run(call);
  return nhwc && ys.size() == 4 ? to_nchw(out, ys) : out;
}


std::vector<std::vector<float>> random_inputs(const std::vector<Shape>& shapes, uint64_t seed) {
  std::vector<std::vector<float>> v;
  for (const Shape& s : shapes) v.push_back(random_vector(static_cast<size_t>(shape_numel(s)), seed++));
  return v;
}

// The NHWC variant against the reference, its constant inputs (indices) marked constant.
void check_nhwc(const std::string& name, NodeDesc node, const std::vector<std::vector<float>>& inputs,
                const std::vector<size_t>& constant_inputs = {}, double tol = kTol) {
  for (size_t k : constant_inputs)
    if (k < inputs.size()) node.constants[k] = inputs[k].data();
  const std::vector<float> ref = run_in(Layout::NCHW, "reference", node, inputs);
  const std::vector<float> got = run_in(Layout::NHWC, name, node, inputs);
  CHECK(rel_error(got, ref) <= tol);
}

std::string conv_str(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  std::string s;
  for (const Shape& in : node.input_shapes) s += shape_str(in) + " ";
  return s + "-> " + shape_str(node.output_shapes[0]) + fmt::format(
      " groups {} s {}x{} d {}x{} pad {},{},{},{} act {} res {}", p.groups, p.stride_h, p.stride_w, p.dilation_h,
      p.dilation_w, p.pad.top, p.pad.left, p.pad.bottom, p.pad.right, int(p.activation.kind), p.add_residual);
}

// The default variant in `layout` and its priority (test_util.h's default_variant, with the layout).
std::pair<std::string, int> chosen(NodeDesc node, Layout layout) {
  node.layout = layout;
  const KernelVariant* best = nullptr;
  int priority = 0;
  for (const KernelVariant* v : KernelRegistry::global().variants("cpu", op_name(op_type(node.params)))) {
    if (!variant_applies(*v, node)) continue;
    const int p = v->priority_for ? v->priority_for(node) : v->priority;
    if (!best || p > priority) best = v, priority = p;
  }
  return {best ? best->name : "", best ? priority : -1};
}

}  // namespace

TEST_CASE("layout.transpose_tiled: NCHW <-> NHWC bit-exact on random shapes") {
  std::mt19937_64 rng(20261127);
  for (int t = 0; t < 120; ++t) {
    // every fifth case an image (C = 2..4: the pixel-interleaving path)
    const int64_t C = t % 10 == 0 ? 1 : t % 5 == 1 ? uniform(rng, 2, 4) : uniform(rng, 1, 70);
    const Shape s{uniform(rng, 1, 3), C, uniform(rng, 1, 23), uniform(rng, 1, 23)};
    CAPTURE(shape_str(s));
    const std::vector<float> x = random_vector(size_t(shape_numel(s)), 100 + t);
    for (Layout to : {Layout::NHWC, Layout::NCHW}) {
      NodeDesc node = shaped_node(LayoutParams{to == Layout::NHWC ? Layout::NCHW : Layout::NHWC, to}, {s});
      node.layout = to;
      const KernelVariant& v = variant("layout", "transpose_tiled");
      REQUIRE(variant_applies(v, node));
      const std::vector<float> in = to == Layout::NHWC ? x : to_nhwc(x, s);
      std::vector<float> out(in.size());
      poison(out);
      v.run(KernelCall{node, {in.data()}, {out.data()}});
      CHECK(out == (to == Layout::NHWC ? to_nhwc(x, s) : x));
    }
  }
  // conversions large enough to be split over the threads: channels and an image
  for (const Shape& big : {Shape{1, 67, 71, 75}, Shape{2, 3, 224, 223}}) {
    const std::vector<float> x = random_vector(size_t(shape_numel(big)), 7);
    NodeDesc node = shaped_node(LayoutParams{Layout::NCHW, Layout::NHWC}, {big});
    node.layout = Layout::NHWC;
    std::vector<float> out(x.size());
    poison(out);
    variant("layout", "transpose_tiled").run(KernelCall{node, {x.data()}, {out.data()}});
    CHECK(out == to_nhwc(x, big));
  }
}

namespace {

// A random ungrouped conv2d: 1x1 in half the cases (strided one time in three), else kernels up
// to 5 (non-square too), strides 1-3, asymmetric padding < kernel, channels 1-67, batch 1-3, H, W
// 1-17, bias or not, every bounded activation, a residual every third case.
NodeDesc random_conv(std::mt19937_64& rng, int t) {
  Conv2DParams p;
  const bool one = t % 2 == 0;
  const int kh = one ? 1 : uniform(rng, 1, 5), kw = one ? 1 : (rng() % 4 == 0 ? uniform(rng, 1, 5) : kh);
  p.stride_h = one && rng() % 3 ? 1 : uniform(rng, 1, 3);
  p.stride_w = rng() % 4 == 0 ? uniform(rng, 1, 3) : p.stride_h;
  if (!one) {  // a 1x1 kernel takes no padding (padding < kernel)
    p.pad.top = uniform(rng, 0, kh - 1);
    p.pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, kh - 1) : p.pad.top;
    p.pad.left = uniform(rng, 0, kw - 1);
    p.pad.right = rng() % 3 == 0 ? uniform(rng, 0, kw - 1) : p.pad.left;
  }
  p.activation = random_activation(rng);
  p.add_residual = t % 3 == 1;
  const int64_t N = uniform(rng, 1, 3), CI = uniform(rng, 1, 67), CO = uniform(rng, 1, 67);
  int64_t H, W;
  do {
    H = uniform(rng, 1, 17), W = uniform(rng, 1, 17);
  } while (H + p.pad.top + p.pad.bottom < kh || W + p.pad.left + p.pad.right < kw);
  const int64_t HO = (H + p.pad.top + p.pad.bottom - kh) / p.stride_h + 1;
  const int64_t WO = (W + p.pad.left + p.pad.right - kw) / p.stride_w + 1;
  std::vector<Shape> in{{N, CI, H, W}, {CO, CI, kh, kw}};
  if (rng() % 4 != 0 || p.add_residual) in.push_back({CO});
  if (p.add_residual) in.push_back({N, CO, HO, WO});
  return shaped_node(p, in);
}

}  // namespace

TEST_CASE("conv2d.gemm_nhwc matches the reference on 240 random shapes") {
  std::mt19937_64 rng(20261128);
  int strided = 0, padded = 0, residual = 0, batched = 0, odd_co = 0;
  for (int t = 0; t < 240; ++t) {
    const NodeDesc node = random_conv(rng, t);
    const std::string desc = conv_str(node);
    CAPTURE(desc);
    check_nhwc("gemm_nhwc", node, random_inputs(node.input_shapes, 1000 + t), {1, 2});
    const auto& p = std::get<Conv2DParams>(node.params);
    strided += p.stride_h > 1 || p.stride_w > 1;
    padded += p.pad.top + p.pad.left + p.pad.bottom + p.pad.right > 0;
    residual += p.add_residual;
    batched += node.input_shapes[0][0] > 1;
    odd_co += node.input_shapes[1][0] % 4 != 0;
  }
  CHECK(strided >= 60);
  CHECK(padded >= 60);
  CHECK(residual >= 60);
  CHECK(batched >= 100);
  CHECK(odd_co >= 100);
}

TEST_CASE("conv2d.gemm_nhwc on MobileNet-sized layers: several pixel blocks and panels, threads") {
  struct Case { int64_t n, ci, co, h, k, s; bool residual; };
  for (const Case c : {Case{1, 16, 96, 40, 1, 1, false}, Case{2, 96, 24, 23, 1, 1, true},
                       Case{1, 160, 960, 7, 1, 1, false}, Case{1, 320, 1280, 7, 1, 1, false},
                       Case{1, 64, 130, 29, 1, 2, false}, Case{1, 24, 40, 31, 3, 1, true},
                       Case{1, 3, 32, 57, 3, 2, false}}) {
    Conv2DParams p;
    p.stride_h = p.stride_w = int(c.s);
    p.pad = c.k == 3 ? Padding2D{1, 1, 1, 1} : Padding2D{};
    p.activation = {ActivationKind::Clip, 0.f, 6.f};
    p.add_residual = c.residual;
    const int64_t ho = (c.h + 2 * (c.k / 2) - c.k) / c.s + 1;
    std::vector<Shape> in{{c.n, c.ci, c.h, c.h}, {c.co, c.ci, c.k, c.k}, {c.co}};
    if (c.residual) in.push_back({c.n, c.co, ho, ho});
    const NodeDesc node = shaped_node(p, in);
    const std::string desc = conv_str(node);
    CAPTURE(desc);
    check_nhwc("gemm_nhwc", node, random_inputs(in, 77), {1, 2});
  }
}

TEST_CASE("conv2d.depthwise_nhwc matches the reference on 240 random shapes") {
  std::mt19937_64 rng(20261129);
  int k3 = 0, k5 = 0, strided = 0, dilated = 0, odd_c = 0;
  for (int t = 0; t < 240; ++t) {
    Conv2DParams p;
    const int kh = t % 3 == 0 ? 3 : t % 3 == 1 ? 5 : uniform(rng, 1, 7);
    const int kw = t % 3 == 2 && rng() % 3 == 0 ? uniform(rng, 1, 7) : kh;
    p.stride_h = uniform(rng, 1, 3);
    p.stride_w = rng() % 4 == 0 ? uniform(rng, 1, 3) : p.stride_h;
    p.dilation_h = rng() % 5 == 0 ? uniform(rng, 2, 3) : 1;
    p.dilation_w = rng() % 5 == 0 ? uniform(rng, 2, 3) : p.dilation_h;
    const int ekh = p.dilation_h * (kh - 1) + 1, ekw = p.dilation_w * (kw - 1) + 1;
    p.pad.top = uniform(rng, 0, ekh - 1);
    p.pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, ekh - 1) : p.pad.top;
    p.pad.left = uniform(rng, 0, ekw - 1);
    p.pad.right = rng() % 3 == 0 ? uniform(rng, 0, ekw - 1) : p.pad.left;
    p.activation = random_activation(rng);
    const int64_t N = uniform(rng, 1, 3), C = rng() % 3 == 0 ? 8 * uniform(rng, 1, 12) : uniform(rng, 2, 67);
    p.groups = int(C);
    int64_t H, W;
    do {
      H = uniform(rng, 1, 21), W = uniform(rng, 1, 21);
    } while (H + p.pad.top + p.pad.bottom < ekh || W + p.pad.left + p.pad.right < ekw);
    std::vector<Shape> in{{N, C, H, W}, {C, 1, kh, kw}};
    if (rng() % 4 != 0) in.push_back({C});
    const NodeDesc node = shaped_node(p, in);
    const std::string desc = conv_str(node);
    CAPTURE(desc);
    check_nhwc("depthwise_nhwc", node, random_inputs(in, 3000 + t), {1, 2});
    k3 += kh == 3 && kw == 3;
    k5 += kh == 5 && kw == 5;
    strided += p.stride_h > 1 || p.stride_w > 1;
    dilated += p.dilation_h > 1 || p.dilation_w > 1;
    odd_c += C % 4 != 0;
  }
  CHECK(k3 >= 70);
  CHECK(k5 >= 70);
  CHECK(strided >= 100);
  CHECK(dilated >= 30);
  CHECK(odd_c >= 60);
}

TEST_CASE("conv2d.depthwise_nhwc on MobileNet / EfficientNet layers (threads, 5x5, channel tails)") {
  struct Case { int64_t n, c, h, k, s; };
  for (const Case c : {Case{1, 32, 56, 3, 1}, Case{1, 144, 29, 3, 2}, Case{2, 40, 28, 5, 1},
                       Case{1, 960, 7, 3, 1}, Case{1, 672, 14, 5, 2}, Case{1, 24, 33, 3, 1}}) {
    Conv2DParams p;
    p.stride_h = p.stride_w = int(c.s);
    const int pad = int(c.k / 2);
    p.pad = {pad, pad, pad, pad};
    p.groups = int(c.c);
    p.activation = {ActivationKind::Silu, 0.f, 0.f};
    const std::vector<Shape> in{{c.n, c.c, c.h, c.h}, {c.c, 1, c.k, c.k}, {c.c}};
    const NodeDesc node = shaped_node(p, in);
    const std::string desc = conv_str(node);
    CAPTURE(desc);
    check_nhwc("depthwise_nhwc", node, random_inputs(in, 91), {1, 2});
  }
}

TEST_CASE("pool2d.direct_nhwc matches the reference on 200 random pools and global pools") {
  std::mt19937_64 rng(20261130);
  for (int t = 0; t < 200; ++t) {
    const test::RandomPool2D r = test::random_pool2d(rng);
    NodeDesc node = shaped_node(r.p, {r.x});
    CAPTURE(shape_str(r.x));
    check_nhwc("direct_nhwc", node, random_inputs({r.x}, 5000 + t));
  }
  for (const Shape& s : {Shape{1, 1280, 7, 7}, Shape{2, 67, 9, 5}, Shape{3, 1, 4, 4}}) {
    Pool2DParams p;
    p.kind = PoolKind::Average;
    p.kernel_h = p.stride_h = int(s[2]);
    p.kernel_w = p.stride_w = int(s[3]);
    CAPTURE(shape_str(s));
    check_nhwc("direct_nhwc", shaped_node(p, {s}), random_inputs({s}, 9));
  }
}

TEST_CASE("squeeze_excite.direct_nhwc matches the reference on 80 random shapes") {
  std::mt19937_64 rng(20261131);
  for (int t = 0; t < 80; ++t) {
    SqueezeExciteParams p;
    p.hidden_activation = random_activation(rng);
    p.gate_activation = rng() % 2 ? Activation{ActivationKind::Sigmoid, 0.f, 0.f}
                                  : Activation{ActivationKind::HardSigmoid, 1.f / 6.f, 0.5f};
    p.activation = t % 3 == 0 ? random_activation(rng) : Activation{};
    const int64_t N = uniform(rng, 1, 3), C = t == 0 ? 1152 : uniform(rng, 1, 70), R = uniform(rng, 1, 12);
    const Shape x{N, C, uniform(rng, 1, 15), uniform(rng, 1, 15)};
    const std::vector<Shape> in{x, {R, C, 1, 1}, {R}, {C, R, 1, 1}, {C}};
    CAPTURE(shape_str(x));
    check_nhwc("direct_nhwc", shaped_node(p, in), random_inputs(in, 7000 + t), {1, 2, 3, 4});
  }
}

TEST_CASE("concat, slice, channel_shuffle, flatten, reshape direct_nhwc match the reference") {
  std::mt19937_64 rng(20261132);
  for (int t = 0; t < 60; ++t) {
    const int64_t N = uniform(rng, 1, 3), H = uniform(rng, 1, 9), W = uniform(rng, 1, 9);
    const int axis = t % 4 == 3 ? uniform(rng, 2, 3) : 1;
    std::vector<Shape> in;
    for (int k = 0, n = uniform(rng, 1, 3); k < n; ++k) {
      Shape s{N, uniform(rng, 1, 40), H, W};
      if (axis != 1) s[1] = 7, s[size_t(axis)] = uniform(rng, 1, 9);
      in.push_back(s);
    }
    ConcatParams cp;
    cp.axis = axis;
    CAPTURE(t);
    check_nhwc("direct_nhwc", shaped_node(cp, in), random_inputs(in, 100 + t));

    const Shape x{N, uniform(rng, 2, 40), H, W};
    SliceParams sp;
    sp.axis = t % 3 == 0 ? uniform(rng, 2, 3) : 1;
    sp.start = uniform(rng, 0, int(x[size_t(sp.axis)]) - 1);
    sp.end = uniform(rng, int(sp.start) + 1, int(x[size_t(sp.axis)]));
    check_nhwc("direct_nhwc", shaped_node(sp, {x}), random_inputs({x}, 200 + t));

    ChannelShuffleParams shp;
    shp.groups = uniform(rng, 1, 4);
    const Shape xs{N, shp.groups * uniform(rng, 1, 30), H, W};
    check_nhwc("direct_nhwc", shaped_node(shp, {xs}), random_inputs({xs}, 300 + t));
  }
  // flatten / reshape apply in NHWC only where the memory order is NCHW's (H*W == 1 or C == 1)
  const Shape pooled{3, 37, 1, 1};
  check_nhwc("direct_nhwc", shaped_node(FlattenParams{}, {pooled}), random_inputs({pooled}, 1));
  ReshapeParams rp;
  rp.shape = {37};
  check_nhwc("direct_nhwc", shaped_node(rp, {pooled}), random_inputs({pooled}, 2));
  NodeDesc spatial = shaped_node(FlattenParams{}, {Shape{1, 4, 2, 2}});
  spatial.layout = Layout::NHWC;
  CHECK_FALSE(variant_applies(variant("flatten", "direct_nhwc"), spatial));
}

TEST_CASE("depth_to_space direct_nhwc matches the reference (DCR and CRD, blocks 1-4)") {
  std::mt19937_64 rng(20261130);
  for (int t = 0; t < 60; ++t) {
    const DepthToSpaceParams d{uniform(rng, 1, 4), static_cast<DepthToSpaceMode>(t % 2)};
    const int64_t co = t % 5 == 0 ? uniform(rng, 17, 70) : uniform(rng, 1, 9);
    const Shape x{uniform(rng, 1, 3), co * d.block * d.block, uniform(rng, 1, 9), uniform(rng, 1, 9)};
    CAPTURE(t);
    check_nhwc("direct_nhwc", shaped_node(d, {x}), random_inputs({x}, 400 + t));
  }
}

TEST_CASE("activation, add and binary run in NHWC (binary broadcasting with NCHW constants)") {
  std::mt19937_64 rng(20261133);
  for (int t = 0; t < 40; ++t) {
    const Shape x{uniform(rng, 1, 3), uniform(rng, 1, 40), uniform(rng, 1, 9), uniform(rng, 1, 9)};
    CAPTURE(shape_str(x));
    ActivationParams ap;
    ap.activation = random_activation(rng);
    check_nhwc("direct", shaped_node(ap, {x}), random_inputs({x}, 400 + t));
    AddParams add;
    add.activation = random_activation(rng);
    check_nhwc("direct", shaped_node(add, {x, x}), random_inputs({x, x}, 500 + t));
    BinaryParams bp;
    bp.kind = static_cast<BinaryKind>(t % 3);  // add, sub, mul
    bp.activation = random_activation(rng);
    // an SE-style gate [N, C, 1, 1] (an activation, so NHWC too), then a per-channel constant [C, 1, 1]
    const Shape gate{x[0], x[1], 1, 1};
    check_nhwc("broadcast", shaped_node(bp, {x, gate}), random_inputs({x, gate}, 600 + t));
    const Shape scale{x[1], 1, 1};
    check_nhwc("broadcast", shaped_node(bp, {scale, x}), random_inputs({scale, x}, 700 + t), {0});
  }
}

TEST_CASE("prelu.direct runs NHWC: per-channel and shared slopes match the reference") {
  std::mt19937_64 rng(2828);
  for (int t = 0; t < 60; ++t) {
    const Shape s{uniform(rng, 1, 3), uniform(rng, 1, 37), uniform(rng, 1, 9), uniform(rng, 1, 11)};
    const Shape slope{t % 4 == 0 ? 1 : s[1]};
    CAPTURE(t);
    const NodeDesc node = shaped_node(PReluParams{}, {s, slope});
    const auto in = random_inputs({s, slope}, 2800 + t);
    check_nhwc("direct", node, in, {1}, 0.0);  // bit-exact: one multiply either way
  }
}

TEST_CASE("priorities: NHWC outranks NCHW only at depthwise convolutions; 1x1 and the rest follow") {
  auto conv = [](int64_t c, int64_t co, int k, int groups, int64_t h) {
    Conv2DParams p;
    p.groups = groups;
    p.pad = {k / 2, k / 2, k / 2, k / 2};
    const std::vector<Shape> in{{1, c, h, h}, {co, c / groups, k, k}, {co}};
    NodeDesc node = shaped_node(p, in);
    static std::vector<float> weights(1 << 22, 0.5f);  // constants for the variants that need them
    node.constants = {nullptr, weights.data(), weights.data()};
    return node;
  };
  // depthwise: strictly higher in NHWC, so the pass switches there
  const NodeDesc dw = conv(32, 32, 3, 32, 112);
  CHECK(chosen(dw, Layout::NHWC).first == "depthwise_nhwc");
  CHECK(chosen(dw, Layout::NHWC).second > chosen(dw, Layout::NCHW).second);
  // 1x1, small and large: equal, so it follows its input's layout (ResNets stay NCHW)
  for (const NodeDesc& one : {conv(16, 96, 1, 1, 112), conv(8, 4, 1, 1, 3), conv(1024, 256, 1, 1, 14)}) {
    CHECK(chosen(one, Layout::NHWC).first == "gemm_nhwc");
    CHECK(chosen(one, Layout::NHWC).second == chosen(one, Layout::NCHW).second);
  }
  // 3x3 stride 1: lower in NHWC (Winograd in NCHW): such a conv leaves an NHWC region
  const NodeDesc k3 = conv(64, 64, 3, 1, 56);
  CHECK(chosen(k3, Layout::NHWC).second < chosen(k3, Layout::NCHW).second);
  // a mobile stem (3x3 stride 2 from 3 channels): higher, the graph switches at its input; ResNet's
  // 7x7 conv1 lower (it stays NCHW); a strided 3x3 from many channels follows its input
  auto strided = [&](int64_t c, int64_t co, int k, int64_t h) {
    NodeDesc node = conv(c, co, k, 1, h);
    auto p = std::get<Conv2DParams>(node.params);
    p.stride_h = p.stride_w = 2;
    node.params = p;
    node.output_shapes = detail::infer_node_shapes(node.params, node.input_shapes, "test", nullptr, true);
    return node;
  };
  const NodeDesc stem = strided(3, 32, 3, 224), conv1 = strided(3, 64, 7, 224), s2 = strided(128, 128, 3, 56);
  CHECK(chosen(stem, Layout::NHWC).second > chosen(stem, Layout::NCHW).second);
  CHECK(chosen(conv1, Layout::NHWC).second < chosen(conv1, Layout::NCHW).second);
  CHECK(chosen(s2, Layout::NHWC).second == chosen(s2, Layout::NCHW).second);
  // a global pool follows its input
  Pool2DParams gp;
  gp.kind = PoolKind::Average;
  gp.kernel_h = gp.kernel_w = gp.stride_h = gp.stride_w = 7;
  const NodeDesc pool = shaped_node(gp, {{1, 1280, 7, 7}});
  CHECK(chosen(pool, Layout::NHWC).second == chosen(pool, Layout::NCHW).second);
}

namespace {

int conv_node(ModelBuilder& b, const std::string& name, int x, int64_t ci, int64_t co, int k, int s, int groups,
              Activation act, uint64_t seed, bool bias = true) {
  Conv2DParams p;
  p.stride_h = p.stride_w = s;
  p.pad = {k / 2, k / 2, k / 2, k / 2};
  p.groups = groups;
  p.activation = act;
  std::vector<int> in{x, b.constant(name + ".w", {co, ci / groups, k, k},
                                    random_vector(size_t(co * ci / groups * k * k), seed, -0.4f, 0.4f))};
  if (bias) in.push_back(b.constant(name + ".b", {co}, random_vector(size_t(co), seed + 1, -0.2f, 0.2f)));
  return b.node(name, p, in);
}

// A squeeze-excitation block as PyTorch exports it (pool, 1x1, 1x1, mul: fuse_squeeze_excite).
int se(ModelBuilder& b, const std::string& name, int x, int64_t c, int64_t r, int h, int w, uint64_t seed) {
  Pool2DParams gp;
  gp.kind = PoolKind::Average;
  gp.kernel_h = gp.stride_h = h;
  gp.kernel_w = gp.stride_w = w;
  int s = b.node(name + "_pool", gp, {x});
  s = conv_node(b, name + "_fc1", s, c, r, 1, 1, 1, {ActivationKind::Silu, 0.f, 0.f}, seed);
  s = conv_node(b, name + "_fc2", s, r, c, 1, 1, 1, {ActivationKind::Sigmoid, 0.f, 0.f}, seed + 2);
  BinaryParams mul;
  mul.kind = BinaryKind::Mul;
  return b.node(name + "_mul", mul, {x, s});
}

// MobileNetV2 / EfficientNet / ShuffleNet pieces on a 3 x 23 x 21 image: stem conv, depthwise 3x3 and
// 5x5 at strides 1 and 2, 1x1 expansions and projections, SE blocks, a residual add, a max pool, a
// channel split / concat / shuffle, a per-channel constant scale, a global pool and a classifier.
Model mobile_graph() {
  ModelBuilder b("mobile");
  const Activation relu6{ActivationKind::Clip, 0.f, 6.f}, silu{ActivationKind::Silu, 0.f, 0.f},
      hswish{ActivationKind::HardSwish, 0.f, 0.f}, none{};
  int x = b.input("image", {-1, 3, 23, 21});
  x = conv_node(b, "stem", x, 3, 24, 3, 2, 1, relu6, 1);                       // 12 x 11
  x = conv_node(b, "b1_dw", x, 24, 24, 3, 1, 24, relu6, 3);
  x = se(b, "b1_se", x, 24, 6, 12, 11, 5);
  x = conv_node(b, "b1_proj", x, 24, 16, 1, 1, 1, none, 7);
  int e = conv_node(b, "b2_exp", x, 16, 40, 1, 1, 1, hswish, 9);
  e = conv_node(b, "b2_dw", e, 40, 40, 5, 2, 40, silu, 11);                    // 6 x 6
  e = se(b, "b2_se", e, 40, 10, 6, 6, 13);
  const int b2 = conv_node(b, "b2_proj", e, 40, 24, 1, 1, 1, none, 15, false);
  int r = conv_node(b, "b3_exp", b2, 24, 72, 1, 1, 1, relu6, 17);
  r = conv_node(b, "b3_dw", r, 72, 72, 3, 1, 72, relu6, 19);
  r = conv_node(b, "b3_proj", r, 72, 24, 1, 1, 1, none, 21);
  AddParams add;
  x = b.node("b3_add", add, {r, b2});                                          // the residual
  Pool2DParams mp;
  mp.kind = PoolKind::Max;
  mp.kernel_h = mp.kernel_w = 3;
  mp.stride_h = mp.stride_w = 2;
  mp.pad = {1, 1, 1, 1};
  x = b.node("pool", mp, {x});                                                 // 3 x 3
  SliceParams left, right;
  left.axis = right.axis = 1;
  left.start = 0, left.end = 12, right.start = 12, right.end = 24;
  const int l = b.node("split_l", left, {x});
  int rr = b.node("split_r", right, {x});
  rr = conv_node(b, "br_dw", rr, 12, 12, 3, 1, 12, none, 23);
  rr = conv_node(b, "br_pw", rr, 12, 12, 1, 1, 1, {ActivationKind::Relu, 0.f, 0.f}, 25);
  ConcatParams cat;
  x = b.node("cat", cat, {l, rr});
  ChannelShuffleParams shuffle;
  shuffle.groups = 2;
  x = b.node("shuffle", shuffle, {x});
  BinaryParams scale;
  scale.kind = BinaryKind::Mul;
  x = b.node("scale", scale, {x, b.constant("scale.c", {24, 1, 1}, random_vector(24, 27, 0.5f, 1.5f))});
  x = conv_node(b, "head", x, 24, 37, 1, 1, 1, relu6, 29);
  Pool2DParams gp;
  gp.kind = PoolKind::Average;
  gp.kernel_h = gp.kernel_w = gp.stride_h = gp.stride_w = 3;
  x = b.node("gap", gp, {x});
  x = b.node("flatten", FlattenParams{}, {x});
  x = b.node("fc", DenseParams{}, {x, b.constant("fc.w", {10, 37}, random_vector(370, 31))});
  b.output(x);
  return Model::from_bytes(b.finish(), "mobile.fb");
}

}  // namespace

TEST_CASE("channels_last on cpu: a mobile graph runs NHWC from its stem on, same outputs") {
  const Model m = mobile_graph();
  for (int64_t batch : {1, 3}) {
    CAPTURE(batch);
    SessionOptions on, off, ref;
    on.backend = off.backend = "cpu";
    ref.backend = "reference";
    on.batch = off.batch = ref.batch = batch;
    off.passes.channels_last = false;
    Session s_on(m, on), s_off(m, off), s_ref(m, ref);
    // one conversion (the image, before the 3x3 stride-2 stem from 3 channels), none back: the
    // classifier reads the pooled 1x1 map, whose NHWC order is its NCHW order
    const std::string log = s_on.passes()[3];
    CAPTURE(log);
    CHECK(log.find("1 layout conversion(s) (nhwc before stem)") != std::string::npos);
    for (const NodeInfo& n : s_on.nodes()) {
      CAPTURE(n.name);
      if (n.op == "dense" || n.op == "layout") continue;
      CHECK(n.layout == Layout::NHWC);
      if (n.op == "conv2d") CHECK((n.variant == "gemm_nhwc" || n.variant == "depthwise_nhwc"));
    }
    for (const NodeInfo& n : s_off.nodes()) CHECK(n.layout == Layout::NCHW);
    std::vector<Tensor> in;
    for (const TensorInfo& t : s_on.inputs())
      in.emplace_back(t.shape, random_vector(size_t(shape_numel(t.shape)), 42 + batch));
    const std::vector<Tensor> a = s_on.run(in), b = s_off.run(in), r = s_ref.run(in);
    REQUIRE(a.size() == 1);
    CHECK(a[0].shape == r[0].shape);
    CHECK(test::all_finite(a[0].data));
    CHECK(rel_error(a[0].data, b[0].data) <= 1e-5);
    CHECK(rel_error(a[0].data, r[0].data) <= 1e-5);
    // the profile shows the layouts and the conversion
    const Profile p = s_on.profile(in, 1);
    CHECK(p.table().find("nhwc") != std::string::npos);
    CHECK(p.table().find("transpose_tiled") != std::string::npos);
  }
}

TEST_CASE("channels_last on cpu: a KxK convolution inside an NHWC region goes back to NCHW") {
  ModelBuilder b("dw_then_3x3");
  int x = b.input("x", {-1, 8, 10, 10});
  x = conv_node(b, "dw", x, 8, 8, 3, 1, 8, {ActivationKind::Relu, 0.f, 0.f}, 1);
  x = conv_node(b, "pw", x, 8, 16, 1, 1, 1, {}, 3);
  x = conv_node(b, "c3", x, 16, 16, 3, 1, 1, {}, 5);
  x = conv_node(b, "pw2", x, 16, 8, 1, 1, 1, {}, 7);
  b.output(x);
  const Model m = Model::from_bytes(b.finish(), "dw_then_3x3.fb");
  SessionOptions on;
  on.backend = "cpu";
  Session s(m, on);
  CAPTURE(s.passes()[3]);
  // nhwc before dw, nchw before c3; pw2 follows c3 in NCHW: the graph output needs no conversion
  CHECK(s.passes()[3] == "channels_last: 2 node(s) run NHWC, 2 layout conversion(s) (nhwc before dw, nchw before c3)");
  SessionOptions ref;
  ref.backend = "reference";
  Session r(m, ref);
  const std::vector<Tensor> in{Tensor({1, 8, 10, 10}, random_vector(800, 3))};
  CHECK(rel_error(s.run(in)[0].data, r.run(in)[0].data) <= 1e-5);
  // forcing an NCHW conv2d variant keeps the whole graph NCHW
  SessionOptions forced = on;
  forced.kernels["conv2d"] = "im2col_gemm";
  Session f(m, forced);
  CHECK(f.passes()[3] == "channels_last: 0 node(s) run NHWC, 0 layout conversion(s)");
}
