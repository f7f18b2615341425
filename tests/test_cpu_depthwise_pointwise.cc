// The depthwise_pointwise node and the fuse_depthwise_pointwise pass (issue 27 must 3): the shape rule
// and its errors; the cpu "fused_nhwc" kernel against the reference on random shapes (odd channel
// counts and sizes, 3x3 / 5x5 at stride 1 and 2, every padding below the kernel, random activations in
// both slots, a residual, batch > 1; outputs and workspaces poisoned) and bit for bit against the two
// unfused NHWC kernels it replaces; and the pass on a MobileNetV2-like graph: what fuses (projections,
// with their residual), what must not (an expanding 1x1, a depthwise read twice, a 1x1 at stride 2, a
// 7x7 depthwise, an NCHW graph, the reference backend), the same outputs with it on and off. Run per
// CPU ISA level by ctest (INFER_CPU_ISA).
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/infer.h"
#include "infer/kernel.h"
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
using infer::test::pass_line;

namespace {



// Runs cpu variant `name` on `node` in `layout` with NCHW-ordered inputs (activations converted to
// NHWC first, the output back), constants at `constant` indices; output and workspace poisoned.
std::vector<float> run_in(Layout layout, const std::string& name, NodeDesc node,
                          const std::vector<std::vector<float>>& inputs, const std::vector<size_t>& constant) {
  node.layout = layout;
  for (size_t k : constant) node.constants[k] = inputs[k].data();
  const std::string op = op_name(op_type(node.params));
  const KernelVariant* v = KernelRegistry::global().find("cpu", op, name);
  REQUIRE_MESSAGE(v != nullptr, "no variant cpu/" << op << "/" << name);
  REQUIRE_MESSAGE(variant_applies(*v, node), name << " does not apply");
  std::vector<std::vector<float>> in = inputs;
  const bool nhwc = layout == Layout::NHWC;
  for (size_t k = 0; k < in.size(); ++k)
    if (nhwc && !node.constants[k] && node.input_shapes[k].size() == 4) in[k] = to_nhwc(in[k], node.input_shapes[k]);
  std::vector<float> workspace(v->workspace_bytes ? v->workspace_bytes(node) / sizeof(float) + 1 : 0);
  poison(workspace);
  const std::shared_ptr<void> prepared = v->prepare ? v->prepare(node) : nullptr;
  const Shape& ys = node.output_shapes.at(0);
  std::vector<float> out(static_cast<size_t>(shape_numel(ys)));
  poison(out);
  KernelCall call{node, {}, {out.data()}, workspace.empty() ? nullptr : workspace.data(), prepared.get()};
  for (const auto& x : in) call.inputs.push_back(x.data());
  v->run(call);
  return nhwc ? to_nchw(out, ys) : out;
}

std::vector<Shape> dp_shapes(const Shape& x, int64_t k, int64_t co, bool residual, const Shape& y = {}) {
  std::vector<Shape> s{x, {x[1], 1, k, k}, {x[1]}, {co, x[1], 1, 1}, {co}};
  if (residual) s.push_back(y);
  return s;
}

std::string error_of(const DepthwisePointwiseParams& p, const std::vector<Shape>& in) {
  return infer::test::shape_error(p, in, "dp");
}

DepthwisePointwiseParams dp_params(int64_t C, int k, int s, bool residual) {
  DepthwisePointwiseParams p;
  p.depthwise.groups = static_cast<int>(C);
  p.depthwise.stride_h = p.depthwise.stride_w = s;
  p.depthwise.pad = {k / 2, k / 2, k / 2, k / 2};
  p.pointwise.add_residual = residual;
  return p;
}

}  // namespace

TEST_CASE("depthwise_pointwise: shape rule and its errors") {
  const DepthwisePointwiseParams p = dp_params(8, 3, 2, false);
  CHECK(detail::infer_node_shapes(p, dp_shapes({2, 8, 9, 7}, 3, 5, false), "t")[0] == Shape{2, 5, 5, 4});
  CHECK(error_of(p, {{2, 8, 9, 7}, {8, 1, 3, 3}, {8}, {5, 8, 1, 1}}) == "m.fb: node 1 'dp': expects 5 inputs, got 4");
  CHECK(error_of(p, dp_shapes({2, 8, 9, 7}, 3, 5, true, {2, 5, 5, 4})) ==
        "m.fb: node 1 'dp': expects 5 inputs, got 6");
  CHECK(error_of(p, {{2, 8, 9, 7}, {8, 1, 3, 3}, {8}, {5, 7, 1, 1}, {5}})
            .find("input 3 (pw_weight) has shape 5x7x1x1 but must be [C_out,8,1,1]") != std::string::npos);
  CHECK(error_of(p, {{2, 8, 9, 7}, {8, 1, 3, 3}, {8}, {5, 8, 1, 1}, {4}}).find("input 4 (pw_bias)") !=
        std::string::npos);
  CHECK(error_of(p, {{2, 8, 9, 7}, {8, 1, 3, 3}, {7}, {5, 8, 1, 1}, {5}}).find("input 2 (dw_bias)") !=
        std::string::npos);
  DepthwisePointwiseParams grouped = p;
  grouped.depthwise.groups = 4;
  CHECK(error_of(grouped, {{2, 8, 9, 7}, {8, 2, 3, 3}, {8}, {5, 8, 1, 1}, {5}}).find("groups == C_out == C = 8") !=
        std::string::npos);
  DepthwisePointwiseParams strided = p;
  strided.pointwise.stride_h = 2;
  CHECK(error_of(strided, dp_shapes({2, 8, 9, 7}, 3, 5, false)).find("must have stride 1") != std::string::npos);
  DepthwisePointwiseParams res = dp_params(8, 3, 2, true);
  CHECK(error_of(res, dp_shapes({2, 8, 9, 7}, 3, 5, true, {2, 5, 9, 7}))
            .find("input 5 (residual) has shape 2x5x9x7 but the output is 2x5x5x4") != std::string::npos);
  DepthwisePointwiseParams prelu = p;
  prelu.depthwise.activation.kind = ActivationKind::PRelu;
  CHECK(error_of(prelu, dp_shapes({2, 8, 9, 7}, 3, 5, false)).find("depthwise.activation prelu") != std::string::npos);
  // no file form
  ModelBuilder nb("n");
  const int nx = nb.input("x", {1, 2, 4, 4});
  CHECK_THROWS_WITH_AS(nb.node("dp", DepthwisePointwiseParams{}, {nx}),
                       doctest::Contains("an engine-internal op (made by a graph pass)"), Error);
}

TEST_CASE("depthwise_pointwise cpu fused_nhwc matches the reference and the unfused NHWC kernels") {
  std::mt19937_64 rng(2727);
  for (int t = 0; t < 240; ++t) {
    const int k = t % 2 ? 5 : 3, s = t % 4 < 2 ? 1 : 2;
    const int64_t N = uniform(rng, 1, 2);
    // odd counts, and whole vectors (16, 32, 48) one time in four
    const int64_t C = rng() % 4 == 0 ? 16 * uniform(rng, 1, 3) : uniform(rng, 2, 41);
    const int64_t CO = rng() % 3 == 0 ? uniform(rng, 1, 60) : uniform(rng, 1, int(C));
    const bool residual = rng() % 3 == 0;
    DepthwisePointwiseParams p = dp_params(C, k, s, residual);
    p.depthwise.pad = {uniform(rng, 0, k - 1), uniform(rng, 0, k - 1), uniform(rng, 0, k - 1), uniform(rng, 0, k - 1)};
    int64_t H = uniform(rng, 1, 17), W = uniform(rng, 1, 17);
    H = std::max<int64_t>(H, k - p.depthwise.pad.top - p.depthwise.pad.bottom);
    W = std::max<int64_t>(W, k - p.depthwise.pad.left - p.depthwise.pad.right);
    p.depthwise.activation = random_activation(rng);
    p.pointwise.activation = random_activation(rng);
    const Shape x{N, C, H, W};
    DepthwisePointwiseParams plain = p;
    plain.pointwise.add_residual = false;
    const NodeDesc probe = shaped_node(plain, dp_shapes(x, k, CO, false));
    const Shape y = probe.output_shapes[0];
    const NodeDesc node = residual ? shaped_node(p, dp_shapes(x, k, CO, true, y)) : probe;
    std::vector<std::vector<float>> in{random_vector(size_t(shape_numel(x)), 100 + t, -2.f, 2.f),
                                       random_vector(size_t(C * k * k), 200 + t, -0.5f, 0.5f),
                                       random_vector(size_t(C), 300 + t, -0.5f, 0.5f),
                                       random_vector(size_t(CO * C), 400 + t, -0.5f, 0.5f),
                                       random_vector(size_t(CO), 500 + t, -0.5f, 0.5f)};
    if (residual) in.push_back(random_vector(size_t(shape_numel(y)), 600 + t));
    CAPTURE(t);
    CAPTURE(fmt::format("x {} k {} s {} pad {},{},{},{} C_out {} res {} acts {} {}", shape_str(x), k, s,
                        p.depthwise.pad.top, p.depthwise.pad.left, p.depthwise.pad.bottom, p.depthwise.pad.right,
                        CO, residual, int(p.depthwise.activation.kind), int(p.pointwise.activation.kind)));
    const std::vector<size_t> constant{1, 2, 3, 4};
    const auto ref = run_in(Layout::NCHW, "reference", node, in, constant);
    const auto got = run_in(Layout::NHWC, "fused_nhwc", node, in, constant);
    CHECK(infer::test::all_finite(got));
    CHECK(rel_error(got, ref) <= 1e-5);
    // the two nodes it replaces, on the NHWC path: the same operations in the same order
    const NodeDesc dw = shaped_node(p.depthwise, {x, {C, 1, k, k}, {C}});
    const auto mid = run_in(Layout::NHWC, "depthwise_nhwc", dw, {in[0], in[1], in[2]}, {1, 2});
    std::vector<Shape> pw_shapes{dw.output_shapes[0], {CO, C, 1, 1}, {CO}};
    std::vector<std::vector<float>> pw_in{mid, in[3], in[4]};
    if (residual) pw_shapes.push_back(y), pw_in.push_back(in[5]);
    const auto unfused = run_in(Layout::NHWC, "gemm_nhwc", shaped_node(p.pointwise, pw_shapes), pw_in, {1, 2});
    CHECK(got == unfused);
  }
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

// MobileNetV2-like blocks on 16 x 15 x 13: two inverted residuals whose projections fuse (one with its
// residual add, one 5x5 stride 2 without biases), then what must stay: a depthwise before an
// expanding 1x1, a depthwise read twice, a 1x1 at stride 2, a 7x7 depthwise.
Model block_graph() {
  ModelBuilder b("mbv2_blocks");
  const Activation relu6{ActivationKind::Clip, 0.f, 6.f}, hswish{ActivationKind::HardSwish, 0.f, 0.f}, none{};
  const int x = b.input("x", {-1, 16, 15, 13});
  int e = conv_node(b, "b1_exp", x, 16, 48, 1, 1, 1, relu6, 1);
  e = conv_node(b, "b1_dw", e, 48, 48, 3, 1, 48, relu6, 3);
  e = conv_node(b, "b1_proj", e, 48, 16, 1, 1, 1, none, 5);
  AddParams add;
  int y = b.node("b1_add", add, {e, x});
  e = conv_node(b, "b2_exp", y, 16, 64, 1, 1, 1, hswish, 7);
  e = conv_node(b, "b2_dw", e, 64, 64, 5, 2, 64, hswish, 9, false);  // 8 x 7
  y = conv_node(b, "b2_proj", e, 64, 24, 1, 1, 1, none, 11, false);
  e = conv_node(b, "b3_dw", y, 24, 24, 3, 1, 24, relu6, 13);
  y = conv_node(b, "b3_pw", e, 24, 40, 1, 1, 1, relu6, 15);  // expanding: not fused
  e = conv_node(b, "b4_dw", y, 40, 40, 3, 1, 40, relu6, 17);
  const int p1 = conv_node(b, "b4_pw", e, 40, 24, 1, 1, 1, none, 19);
  BinaryParams mul;
  mul.kind = BinaryKind::Mul;
  const int p2 = conv_node(b, "b4_pw2", e, 40, 24, 1, 1, 1, none, 21);  // the depthwise's second reader
  y = b.node("b4_mul", mul, {p1, p2});
  e = conv_node(b, "b5_dw", y, 24, 24, 3, 1, 24, relu6, 23);
  y = conv_node(b, "b5_pw", e, 24, 16, 1, 2, 1, none, 25);  // 1x1 at stride 2: not fused
  e = conv_node(b, "b6_dw", y, 16, 16, 7, 1, 16, relu6, 27);  // 7x7: not fused
  y = conv_node(b, "b6_pw", e, 16, 8, 1, 1, 1, none, 29);
  b.output(y);
  return Model::from_bytes(b.finish(), "mbv2_blocks.fb");
}


}  // namespace

TEST_CASE("fuse_depthwise_pointwise: MobileNetV2 projections fuse on cpu, same outputs, the rest stays") {
  const Model m = block_graph();
  for (int64_t batch : {1, 3}) {
    CAPTURE(batch);
    SessionOptions on, off, ref;
    on.backend = off.backend = "cpu";
    ref.backend = "reference";
    on.batch = off.batch = ref.batch = batch;
    off.passes.fuse_depthwise_pointwise = false;
    Session fused(m, on), plain(m, off), reference(m, ref);
    std::vector<std::string> names;
    for (const NodeInfo& n : fused.nodes())
      if (n.op != "layout") names.push_back(n.name + ":" + n.op);
    CAPTURE(fmt::format("{}", fmt::join(names, " ")));
    CHECK(names == std::vector<std::string>{"b1_exp:conv2d", "b1_dw:depthwise_pointwise", "b2_exp:conv2d",
                                            "b2_dw:depthwise_pointwise", "b3_dw:conv2d", "b3_pw:conv2d",
                                            "b4_dw:conv2d", "b4_pw:conv2d", "b4_pw2:conv2d", "b4_mul:binary",
                                            "b5_dw:conv2d", "b5_pw:conv2d", "b6_dw:conv2d", "b6_pw:conv2d"});
    CHECK(pass_line(fused, "fuse_depthwise_pointwise") ==
          "fuse_depthwise_pointwise: 2 depthwise + 1x1 conv2d pairs fused");
    CHECK(fused.passes().back() == pass_line(fused, "fuse_depthwise_pointwise"));  // logged last
    CHECK(pass_line(plain, "fuse_depthwise_pointwise") == "fuse_depthwise_pointwise: off");
    CHECK(pass_line(reference, "fuse_depthwise_pointwise").empty());  // no line on other backends
    CHECK(plain.passes().size() == reference.passes().size() + 1);
    for (const NodeInfo& n : fused.nodes())
      if (n.op == "depthwise_pointwise") {
        CHECK(n.variant == "fused_nhwc");
        CHECK(n.layout == Layout::NHWC);
      }
    CHECK(fused.nodes().size() + 2 == plain.nodes().size());
    for (const NodeInfo& n : reference.nodes()) CHECK(n.op != "depthwise_pointwise");
    std::vector<Tensor> in;
    in.emplace_back(Shape{batch, 16, 15, 13}, random_vector(size_t(batch * 16 * 15 * 13), 7 + batch));
    const auto u = fused.run(in), v = plain.run(in), r = reference.run(in);
    REQUIRE(u.size() == 1);
    CHECK(infer::test::all_finite(u[0].data));
    CHECK(u[0].data == v[0].data);  // the fused kernel computes what the two NHWC kernels did
    CHECK(rel_error(u[0].data, r[0].data) <= 1e-5);
    const Profile prof = fused.profile(in, 1);
    for (const auto& n : prof.nodes)
      if (n.name == "b1_dw") {
        CHECK(n.fused == std::vector<std::string>{"b1_proj", "b1_add"});
        // 3x3 depthwise on 48 channels + 48 -> 16 1x1, at 15 x 13, per image
        CHECK(n.flops == doctest::Approx(2.0 * batch * 15 * 13 * (48 * 9 + 48 * 16)));
      }
  }
}

TEST_CASE("fuse_depthwise_pointwise: not on an NCHW graph, nor an intermediate a session reads back") {
  const Model m = block_graph();
  SessionOptions nchw;
  nchw.backend = "cpu";
  nchw.passes.channels_last = false;
  Session s(m, nchw);
  CHECK(pass_line(s, "fuse_depthwise_pointwise") == "fuse_depthwise_pointwise: no depthwise + 1x1 conv2d pair to fuse");
  SessionOptions extra;
  extra.backend = "cpu";
  extra.extra_outputs = {"b1_dw"};
  Session e(m, extra);
  CHECK(pass_line(e, "fuse_depthwise_pointwise") == "fuse_depthwise_pointwise: 1 depthwise + 1x1 conv2d pair fused");
  // forcing the reference variant of the fused op leaves no variant worth fusing for
  SessionOptions forced;
  forced.backend = "cpu";
  forced.kernels["depthwise_pointwise"] = "reference";
  Session f(m, forced);
  CHECK(pass_line(f, "fuse_depthwise_pointwise") == "fuse_depthwise_pointwise: no depthwise + 1x1 conv2d pair to fuse");
}
