// The squeeze_excite node and the fuse_squeeze_excite pass (issue 14 must 3): the shape rule and its
// errors, the reference on hand-computed values, the cpu "direct" kernel against the reference on
// random shapes (odd sizes, every bounded activation in each of the three slots, outputs poisoned),
// and the pass on built graphs: what fuses (either mul order, convs with and without bias, an
// activation after the mul), what must not (the pool read twice, the gate multiplying another tensor
// than the one pooled, a padded pool), the same outputs with the pass on and off, the profile and
// the pass log.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "infer/kernel.h"
#include "infer/error.h"
#include "infer/infer.h"
#include "passes.h"
#include "shape_inference.h"
#include "test_util.h"

using namespace infer;
using infer::detail::infer_node_shapes;
using infer::test::poison;
using infer::test::random_vector;
using infer::test::rel_error;
using infer::test::uniform;

namespace {

std::string error_of(const OpParams& p, const std::vector<Shape>& in) {
  return infer::test::shape_error(p, in, "se");
}

std::vector<float> run_cpu(const std::string& name, const NodeDesc& node,
                           const std::vector<std::vector<float>>& inputs) {
  return infer::test::run_cpu_variant(name, node, inputs);
}

NodeDesc se_node(const SqueezeExciteParams& p, const Shape& x, int64_t r) {
  NodeDesc node;
  node.params = p;
  node.input_shapes = {x, {r, x[1], 1, 1}, {r}, {x[1], r, 1, 1}, {x[1]}};
  node.output_shapes = infer_node_shapes(node.params, node.input_shapes, "test", nullptr, true);
  node.constants.assign(5, nullptr);
  return node;
}

std::vector<std::string> node_list(const Session& s) {
  std::vector<std::string> out;
  for (const NodeInfo& n : s.nodes()) out.push_back(n.name + ":" + n.op);
  return out;
}

int conv1x1(ModelBuilder& b, const std::string& name, int x, int64_t cin, int64_t cout, bool bias,
            uint64_t seed, ActivationKind act) {
  Conv2DParams p;
  p.activation.kind = act;
  if (act == ActivationKind::HardSigmoid) p.activation = {act, 0.2f, 0.5f};
  std::vector<int> in = {x, b.constant(name + ".w", {cout, cin, 1, 1},
                                       random_vector(size_t(cout * cin), seed, -0.5f, 0.5f))};
  if (bias) in.push_back(b.constant(name + ".b", {cout}, random_vector(size_t(cout), seed + 1)));
  return b.node(name, p, in);
}

int global_pool(ModelBuilder& b, const std::string& name, int x, int h, int w) {
  Pool2DParams p;
  p.kind = PoolKind::Average;
  p.kernel_h = p.stride_h = h;
  p.kernel_w = p.stride_w = w;
  return b.node(name, p, {x});
}

// One squeeze-excitation block on x [-1, C, H, W]; returns the mul's output.
int se_block(ModelBuilder& b, const std::string& prefix, int x, int64_t C, int64_t R, int H, int W,
             bool gate_first, bool bias, ActivationKind hidden, ActivationKind gate, uint64_t seed) {
  const int s = global_pool(b, prefix + "_pool", x, H, W);
  const int h = conv1x1(b, prefix + "_fc1", s, C, R, bias, seed, hidden);
  const int g = conv1x1(b, prefix + "_fc2", h, R, C, true, seed + 2, gate);
  BinaryParams mul;
  mul.kind = BinaryKind::Mul;
  return b.node(prefix + "_mul", mul, gate_first ? std::vector<int>{g, x} : std::vector<int>{x, g});
}

}  // namespace

TEST_CASE("squeeze_excite: shape rule and its errors") {
  SqueezeExciteParams p;
  CHECK(infer_node_shapes(p, {{2, 8, 5, 3}, {2, 8, 1, 1}, {2}, {8, 2, 1, 1}, {8}}, "t")[0] ==
        Shape{2, 8, 5, 3});
  CHECK(error_of(p, {{2, 8, 5, 3}, {2, 8, 1, 1}, {2}, {8, 2, 1, 1}}) ==
        "m.fb: node 1 'se': expects 5 inputs, got 4");
  CHECK(error_of(p, {{2, 8, 5, 3}, {2, 7, 1, 1}, {2}, {8, 2, 1, 1}, {8}}).find(
            "input 1 (w1) has shape 2x7x1x1 but must be [C_r,8,1,1]") != std::string::npos);
  CHECK(error_of(p, {{2, 8, 5, 3}, {2, 8, 1, 1}, {2}, {8, 3, 1, 1}, {8}}).find(
            "input 3 (w2) has shape 8x3x1x1 but must be [8,2,1,1]") != std::string::npos);
  CHECK(error_of(p, {{2, 8, 5, 3}, {2, 8, 1, 1}, {3}, {8, 2, 1, 1}, {8}}).find("input 2 (b1)") !=
        std::string::npos);
  CHECK(error_of(p, {{2, 8, 15}, {2, 8, 1, 1}, {2}, {8, 2, 1, 1}, {8}}).find("must have rank 4") !=
        std::string::npos);
  p.gate_activation = {ActivationKind::Clip, 2.f, 1.f};
  CHECK(error_of(p, {{2, 8, 5, 3}, {2, 8, 1, 1}, {2}, {8, 2, 1, 1}, {8}}).find("gate_activation") !=
        std::string::npos);
}

TEST_CASE("squeeze_excite reference: one sample by hand") {
  // x: channel 0 = {1, 3} (mean 2), channel 1 = {-2, 6} (mean 2); hidden = relu(1*2 - 1*2 + 0.5) = 0.5;
  // gates: sigmoid(2 * 0.5 + 0) = sigmoid(1), sigmoid(-4 * 0.5 + 2) = sigmoid(0) = 0.5.
  SqueezeExciteParams p;
  p.hidden_activation.kind = ActivationKind::Relu;
  p.gate_activation.kind = ActivationKind::Sigmoid;
  const NodeDesc node = se_node(p, {1, 2, 1, 2}, 1);
  const std::vector<std::vector<float>> in{{1, 3, -2, 6}, {1, -1}, {0.5f}, {2, -4}, {0, 2}};
  const double g0 = 1.0 / (1.0 + std::exp(-1.0));
  const std::vector<float> want{float(1 * g0), float(3 * g0), -1.f, 3.f};
  for (const char* variant : {"reference", "direct"}) {
    CAPTURE(variant);
    CHECK(rel_error(run_cpu(variant, node, in), want) <= 1e-6);
  }
}

TEST_CASE("squeeze_excite cpu direct matches the reference on random shapes and activations") {
  std::mt19937_64 rng(77);
  for (int t = 0; t < 150; ++t) {
    const int64_t N = uniform(rng, 1, 3), C = uniform(rng, 1, 40), R = uniform(rng, 1, 12);
    const Shape x{N, C, uniform(rng, 1, 19), uniform(rng, 1, 19)};
    SqueezeExciteParams p;
    p.hidden_activation = infer::test::random_activation(rng);
    p.gate_activation = infer::test::random_activation(rng);
    if (t % 3 == 0) p.activation = infer::test::random_activation(rng);
    const NodeDesc node = se_node(p, x, R);
    const std::vector<std::vector<float>> in{random_vector(size_t(shape_numel(x)), 500 + t, -3.f, 3.f),
                                             random_vector(size_t(R * C), 600 + t, -0.5f, 0.5f),
                                             random_vector(size_t(R), 700 + t),
                                             random_vector(size_t(C * R), 800 + t, -0.5f, 0.5f),
                                             random_vector(size_t(C), 900 + t)};
    const auto ref = run_cpu("reference", node, in), got = run_cpu("direct", node, in);
    CAPTURE(t);
    CAPTURE(shape_str(x));
    CHECK(infer::test::all_finite(got));
    CHECK(rel_error(got, ref) <= 1e-5);
  }
}

TEST_CASE("fuse_squeeze_excite: blocks fused where the pattern holds, same values, profile and log") {
  ModelBuilder b("se_net");
  const int x = b.input("x", {-1, 12, 7, 5});
  const int a = conv1x1(b, "expand", x, 12, 16, true, 1, ActivationKind::Silu);
  // EfficientNet's block: SiLU hidden, sigmoid gate, x * gate.
  int y = se_block(b, "se1", a, 16, 4, 7, 5, false, true, ActivationKind::Silu, ActivationKind::Sigmoid, 10);
  // MobileNetV3's: ReLU hidden, hard-sigmoid gate, gate * x, fc1 without bias, a relu after the mul.
  y = se_block(b, "se2", y, 16, 8, 7, 5, true, false, ActivationKind::Relu, ActivationKind::HardSigmoid, 20);
  ActivationParams relu;
  y = b.node("relu", relu, {y});
  // Not fused: the pooled value has a second reader (added to the gate).
  const int s3 = global_pool(b, "se3_pool", y, 7, 5);
  const int h3 = conv1x1(b, "se3_fc1", s3, 16, 4, true, 30, ActivationKind::Relu);
  const int g3 = conv1x1(b, "se3_fc2", h3, 4, 16, true, 32, ActivationKind::Sigmoid);
  BinaryParams add;
  const int g3b = b.node("se3_add", add, {g3, s3});
  BinaryParams mul;
  mul.kind = BinaryKind::Mul;
  y = b.node("se3_mul", mul, {y, g3b});
  // Not fused: the gate multiplies another tensor than the one pooled.
  const int s4 = global_pool(b, "se4_pool", y, 7, 5);
  const int h4 = conv1x1(b, "se4_fc1", s4, 16, 4, true, 40, ActivationKind::Relu);
  const int g4 = conv1x1(b, "se4_fc2", h4, 4, 16, true, 42, ActivationKind::Sigmoid);
  ActivationParams tanh;
  tanh.activation.kind = ActivationKind::Tanh;
  const int t4 = b.node("se4_tanh", tanh, {y});
  y = b.node("se4_mul", mul, {t4, g4});
  // Not fused: a padded 1x1 pool counting its padding (sum / 40, not the mean of the 35 pixels).
  Pool2DParams padded;
  padded.kind = PoolKind::Average;
  padded.kernel_h = padded.stride_h = 7;
  padded.kernel_w = padded.stride_w = 5;
  padded.pad.top = 1;
  padded.count_include_pad = true;
  const int s5 = b.node("se5_pool", padded, {y});
  const int h5 = conv1x1(b, "se5_fc1", s5, 16, 4, true, 50, ActivationKind::Relu);
  const int g5 = conv1x1(b, "se5_fc2", h5, 4, 16, true, 52, ActivationKind::Sigmoid);
  y = b.node("se5_mul", mul, {y, g5});
  b.output(y);
  const Model m = Model::from_bytes(b.finish(), "se_net.fb");

  for (const char* backend : {"cpu", "reference"}) {
    CAPTURE(backend);
    SessionOptions on, off;
    on.backend = off.backend = backend;
    on.batch = off.batch = 3;
    off.passes.fuse_squeeze_excite = false;
    Session fused(m, on), plain(m, off);
    const std::string got = fmt::format("{}", fmt::join(node_list(fused), " "));
    CAPTURE(got);
    CHECK(node_list(fused) ==
          std::vector<std::string>{"expand:conv2d", "se1_pool:squeeze_excite", "se2_pool:squeeze_excite",
                                   "se3_pool:pool2d", "se3_fc1:conv2d", "se3_fc2:conv2d", "se3_add:binary",
                                   "se3_mul:binary", "se4_pool:pool2d", "se4_fc1:conv2d", "se4_fc2:conv2d",
                                   "se4_tanh:activation", "se4_mul:binary", "se5_pool:pool2d",
                                   "se5_fc1:conv2d", "se5_fc2:conv2d", "se5_mul:binary"});
    CHECK(fused.passes()[6] ==
          "fuse_squeeze_excite: 2 squeeze-excitation blocks (global average pool, two 1x1 conv2d, mul) fused");
    CHECK(plain.passes()[6] == "fuse_squeeze_excite: off");
    CHECK(fused.nodes()[1].fused == std::vector<std::string>{"se1_fc1", "se1_fc2", "se1_mul"});
    CHECK(fused.nodes()[2].fused == std::vector<std::string>{"se2_fc1", "se2_fc2", "se2_mul", "relu"});
    CHECK(fused.nodes()[1].variant == (std::string(backend) == "cpu" ? "direct" : "reference"));
    std::vector<Tensor> in;
    in.emplace_back(Shape{3, 12, 7, 5}, random_vector(3 * 12 * 7 * 5, 5));
    const auto u = fused.run(in), v = plain.run(in);
    REQUIRE(u.size() == 1);
    CHECK(infer::test::all_finite(u[0].data));
    CHECK(rel_error(u[0].data, v[0].data) <= 1e-5);
    const Profile prof = fused.profile(in, 1);
    CHECK(prof.table().find("squeeze_excite") != std::string::npos);
    CHECK(prof.table().find("se1_fc1+se1_fc2+se1_mul") != std::string::npos);
    CHECK(prof.nodes[1].flops == doctest::Approx(2.0 * 3 * 16 * 35 + 4.0 * 3 * 16 * 4));
  }

  // The node has no file form.
  ModelBuilder nb("n");
  const int nx = nb.input("x", {1, 2, 2, 2});
  CHECK_THROWS_WITH_AS(nb.node("se", SqueezeExciteParams{}, {nx}),
                       doctest::Contains("an engine-internal op (made by a graph pass)"), Error);
}

TEST_CASE("fuse_squeeze_excite: an intermediate a session reads back stays unfused") {
  ModelBuilder b("se_extra");
  const int x = b.input("x", {-1, 6, 4, 4});
  b.output(se_block(b, "se", x, 6, 2, 4, 4, false, true, ActivationKind::Relu, ActivationKind::Sigmoid, 3));
  const Model m = Model::from_bytes(b.finish(), "se_extra.fb");
  SessionOptions o;
  o.backend = "cpu";
  o.extra_outputs = {"se_fc2"};
  Session s(m, o);
  CHECK(s.passes()[6] == "fuse_squeeze_excite: no squeeze-excitation block to fuse");
  CHECK(s.nodes().size() == 4);
}
