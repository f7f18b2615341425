// pad2d and instance_norm through the stack (issue 14): shape rules and their one-line errors, the
// reference on hand-checked values (reflect / edge / constant on a 3x4 plane as numpy.pad gives them,
// instance norm of small planes), the cpu "direct" kernels against the reference on random shapes
// (odd sizes, reflect pads up to size-1, every mode and activation, outputs poisoned with NaN), the
// .fb round trip (builder -> loader), and a session where fuse_activation folds a relu into
// instance_norm.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/infer.h"
#include "infer/kernel.h"
#include "kernels/reference/reference.h"
#include "shape_inference.h"
#include "test_util.h"

using namespace infer;
using infer::detail::infer_node_shapes;
using infer::test::poison;
using infer::test::shaped_node;
using infer::test::random_vector;
using infer::test::rel_error;
using infer::test::uniform;

namespace {

Pad2DParams pad(PadMode mode, int top, int left, int bottom, int right, float value = 0.f) {
  Pad2DParams p;
  p.mode = mode;
  p.pad = {top, left, bottom, right};
  p.value = value;
  return p;
}

Shape one(const OpParams& p, const std::vector<Shape>& in) {
  auto out = infer_node_shapes(p, in, "m.fb: node 1 'n'");
  REQUIRE(out.size() == 1);
  return out[0];
}

std::string error_of(const OpParams& p, const std::vector<Shape>& in) { return infer::test::shape_error(p, in); }

std::vector<float> run_variant(const std::string& name, const NodeDesc& node,
                               const std::vector<std::vector<float>>& inputs) {
  return infer::test::run_cpu_variant(name, node, inputs);
}


}  // namespace

TEST_CASE("pad2d and instance_norm shapes") {
  CHECK(one(pad(PadMode::Reflect, 2, 2, 2, 2), {{1, 3, 3, 4}}) == Shape{1, 3, 7, 8});
  CHECK(one(pad(PadMode::Constant, 0, 1, 5, 0, 0.5f), {{2, 1, 1, 1}}) == Shape{2, 1, 6, 2});
  CHECK(one(pad(PadMode::Edge, 9, 0, 0, 9), {{1, 2, 1, 1}}) == Shape{1, 2, 10, 10});
  CHECK(one(pad(PadMode::Reflect, 0, 0, 0, 0), {{1, 2, 1, 1}}) == Shape{1, 2, 1, 1});
  CHECK(one(InstanceNormParams{}, {{2, 3, 5, 7}, {3}, {3}}) == Shape{2, 3, 5, 7});
  CHECK(one(InstanceNormParams{}, {{2, 3, 5}, {3}, {3}}) == Shape{2, 3, 5});

  CHECK(error_of(pad(PadMode::Reflect, 3, 0, 0, 0), {{1, 1, 3, 4}}) ==
        "m.fb: node 1 'n': field padding.top 3 must be < input height 3 in reflect mode");
  CHECK(error_of(pad(PadMode::Reflect, 0, 0, 0, 4), {{1, 1, 3, 4}}) ==
        "m.fb: node 1 'n': field padding.right 4 must be < input width 4 in reflect mode");
  CHECK(error_of(pad(PadMode::Constant, 0, -1, 0, 0), {{1, 1, 3, 4}}) ==
        "m.fb: node 1 'n': field padding.left must be >= 0 (got -1)");
  CHECK(error_of(pad(static_cast<PadMode>(7), 0, 0, 0, 0), {{1, 1, 3, 4}}) ==
        "m.fb: node 1 'n': field mode has unknown value 7");
  CHECK(error_of(pad(PadMode::Constant, 1, 1, 1, 1, NAN), {{1, 1, 3, 4}}) ==
        "m.fb: node 1 'n': field value must be finite");
  CHECK(error_of(pad(PadMode::Edge, 1, 1, 1, 1), {{1, 3, 4}}) ==
        "m.fb: node 1 'n': input 0 has shape 1x3x4 but must have rank 4 [N,C,H,W]");
  CHECK(error_of(InstanceNormParams{}, {{1, 3, 4}, {4}, {3}}) ==
        "m.fb: node 1 'n': input 1 (scale) has shape 4 but must be [3] (C)");
  CHECK(error_of(InstanceNormParams{}, {{1, 3}, {3}, {3}}) ==
        "m.fb: node 1 'n': input 0 has shape 1x3 but must have rank >= 3 [N,C,...]");
  CHECK(error_of(InstanceNormParams{-1.f, {}}, {{1, 3, 4}, {3}, {3}}).find("field epsilon") !=
        std::string::npos);
  CHECK(error_of(InstanceNormParams{}, {{1, 3, 4}, {3}}) ==
        "m.fb: node 1 'n': expects 3 inputs, got 2");
}

TEST_CASE("pad2d reference: 3x4 plane with pads 2 as numpy.pad gives it") {
  // x = arange(12).reshape(3, 4)
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = float(i);
  std::vector<float> y(7 * 8);
  // numpy.pad(x, 2, mode="reflect")
  const float reflect[7][8] = {{10, 9, 8, 9, 10, 11, 10, 9}, {6, 5, 4, 5, 6, 7, 6, 5},
                               {2, 1, 0, 1, 2, 3, 2, 1},     {6, 5, 4, 5, 6, 7, 6, 5},
                               {10, 9, 8, 9, 10, 11, 10, 9}, {6, 5, 4, 5, 6, 7, 6, 5},
                               {2, 1, 0, 1, 2, 3, 2, 1}};
  poison(y);
  ref::pad2d(pad(PadMode::Reflect, 2, 2, 2, 2), x.data(), {1, 1, 3, 4}, y.data(), {1, 1, 7, 8});
  for (int r = 0; r < 7; ++r)
    for (int c = 0; c < 8; ++c) CHECK(y[r * 8 + c] == reflect[r][c]);
  // numpy.pad(x, 2, mode="edge")
  const float edge[7][8] = {{0, 0, 0, 1, 2, 3, 3, 3},     {0, 0, 0, 1, 2, 3, 3, 3},
                            {0, 0, 0, 1, 2, 3, 3, 3},     {4, 4, 4, 5, 6, 7, 7, 7},
                            {8, 8, 8, 9, 10, 11, 11, 11}, {8, 8, 8, 9, 10, 11, 11, 11},
                            {8, 8, 8, 9, 10, 11, 11, 11}};
  poison(y);
  ref::pad2d(pad(PadMode::Edge, 2, 2, 2, 2), x.data(), {1, 1, 3, 4}, y.data(), {1, 1, 7, 8});
  for (int r = 0; r < 7; ++r)
    for (int c = 0; c < 8; ++c) CHECK(y[r * 8 + c] == edge[r][c]);
  // Constant, asymmetric: top 1, left 0, bottom 0, right 2, value -1.5 -> 4 x 6.
  std::vector<float> z(4 * 6);
  poison(z);
  ref::pad2d(pad(PadMode::Constant, 1, 0, 0, 2, -1.5f), x.data(), {1, 1, 3, 4}, z.data(), {1, 1, 4, 6});
  const float constant[4][6] = {{-1.5f, -1.5f, -1.5f, -1.5f, -1.5f, -1.5f},
                                {0, 1, 2, 3, -1.5f, -1.5f},
                                {4, 5, 6, 7, -1.5f, -1.5f},
                                {8, 9, 10, 11, -1.5f, -1.5f}};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) CHECK(z[r * 6 + c] == constant[r][c]);
  CHECK(ref::pad_source_index(PadMode::Reflect, -3, 4) == 3);
  CHECK(ref::pad_source_index(PadMode::Reflect, 6, 4) == 0);
  CHECK(ref::pad_source_index(PadMode::Edge, -5, 4) == 0);
  CHECK(ref::pad_source_index(PadMode::Constant, 4, 4) == -1);
}

TEST_CASE("instance_norm reference: hand-computed planes, affine and relu") {
  // Two planes of 4: {1,2,3,4} (mean 2.5, biased var 1.25) and {-2,-2,2,2} (mean 0, var 4).
  const std::vector<float> x{1, 2, 3, 4, -2, -2, 2, 2};
  const std::vector<float> scale{2.f, 0.5f}, bias{1.f, -1.f};
  std::vector<float> y(8);
  poison(y);
  InstanceNormParams p;
  p.epsilon = 0.f;
  ref::instance_norm(p, x.data(), {1, 2, 2, 2}, scale.data(), bias.data(), y.data());
  const double s = 1.0 / std::sqrt(1.25);
  const double want[8] = {2 * -1.5 * s + 1, 2 * -0.5 * s + 1, 2 * 0.5 * s + 1, 2 * 1.5 * s + 1,
                          -1.5, -1.5, -0.5, -0.5};
  for (int i = 0; i < 8; ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-6));
  p.activation.kind = ActivationKind::Relu;
  p.epsilon = 1e-5f;
  ref::instance_norm(p, x.data(), {2, 1, 4}, scale.data(), bias.data(), y.data());  // N=2, C=1
  const double s2 = 1.0 / std::sqrt(1.25 + 1e-5), s3 = 1.0 / std::sqrt(4 + 1e-5);
  CHECK(y[0] == 0.f);  // 2 * -1.5 * s2 + 1 < 0
  CHECK(y[3] == doctest::Approx(2 * 1.5 * s2 + 1).epsilon(1e-6));
  CHECK(y[4] == doctest::Approx(std::max(0.0, 2 * -2 * s3 + 1)).epsilon(1e-6));
  CHECK(y[7] == doctest::Approx(2 * 2 * s3 + 1).epsilon(1e-6));
}

TEST_CASE("pad2d direct matches the reference on 300 random shapes, every mode") {
  std::mt19937_64 rng(14);
  for (int t = 0; t < 300; ++t) {
    const int64_t N = uniform(rng, 1, 3), C = uniform(rng, 1, 5), H = uniform(rng, 1, 13),
                  W = uniform(rng, 1, 13);
    const PadMode mode = static_cast<PadMode>(t % 3);
    const int hmax = mode == PadMode::Reflect ? int(H) - 1 : 6, wmax = mode == PadMode::Reflect ? int(W) - 1 : 6;
    const Pad2DParams p = pad(mode, uniform(rng, 0, hmax), uniform(rng, 0, wmax), uniform(rng, 0, hmax),
                              uniform(rng, 0, wmax), float(uniform(rng, -3, 3)) * 0.25f);
    const NodeDesc node = shaped_node(p, {{N, C, H, W}});
    const std::vector<std::vector<float>> in{random_vector(size_t(N * C * H * W), 100 + t)};
    const auto ref = run_variant("reference", node, in), got = run_variant("direct", node, in);
    CAPTURE(t);
    CHECK(got == ref);  // a copy: bit-exact
  }
}

TEST_CASE("instance_norm direct matches the reference on random shapes and activations") {
  std::mt19937_64 rng(41);
  for (int t = 0; t < 120; ++t) {
    const int64_t N = uniform(rng, 1, 3), C = uniform(rng, 1, 9);
    Shape x{N, C, uniform(rng, 1, 17), uniform(rng, 1, 17)};
    if (t % 5 == 0) x = {N, C, uniform(rng, 1, 40)};  // rank 3
    // planes over the kernel's 2048-float summing blocks, values far from 0 (a large mean next to a
    // small spread: cancellation in the variance)
    const bool big = t % 7 == 3;
    if (big) x = {1, C, uniform(rng, 45, 80), uniform(rng, 45, 80)};
    InstanceNormParams p;
    p.epsilon = t % 2 ? 1e-5f : 1e-3f;
    p.activation = infer::test::random_activation(rng);
    const NodeDesc node = shaped_node(p, {x, {C}, {C}});
    std::vector<std::vector<float>> in{random_vector(size_t(shape_numel(x)), 200 + t, big ? 97.f : -3.f,
                                                     big ? 103.f : 5.f),
                                       random_vector(size_t(C), 300 + t, 0.5f, 2.f),
                                       random_vector(size_t(C), 400 + t)};
    const auto ref = run_variant("reference", node, in), got = run_variant("direct", node, in);
    CAPTURE(t);
    CHECK(rel_error(got, ref) <= 1e-5);
  }
}

TEST_CASE("pad2d and instance_norm: .fb round trip, session, relu fused into instance_norm") {
  ModelBuilder b("pad_in");
  const int x = b.input("x", {-1, 2, 5, 6});
  const int p1 = b.node("pad", pad(PadMode::Reflect, 1, 2, 3, 1), {x});
  const int s = b.constant("scale", {2}, {1.5f, 0.5f});
  const int bi = b.constant("bias", {2}, {0.25f, -0.5f});
  const int n = b.node("in", InstanceNormParams{1e-5f, {}}, {p1, s, bi});
  ActivationParams relu;
  const int r = b.node("relu", relu, {n});
  const int p2 = b.node("pad2", pad(PadMode::Constant, 0, 1, 1, 0, 0.5f), {r});
  const int p3 = b.node("pad3", pad(PadMode::Edge, 2, 0, 0, 3), {p2});
  b.output(p3);
  const Model m = Model::from_bytes(b.finish(), "pad_in.fb");
  CHECK(m.num_nodes() == 5);

  std::vector<Tensor> in{Tensor({2, 2, 5, 6}, random_vector(120, 7))};
  SessionOptions ref_opts;
  ref_opts.backend = "reference";
  ref_opts.batch = 2;
  ref_opts.passes.fuse_activation = false;
  Session ref(m, ref_opts);
  SessionOptions cpu_opts;
  cpu_opts.backend = "cpu";
  cpu_opts.batch = 2;
  Session cpu(m, cpu_opts);
  REQUIRE(cpu.nodes().size() == 4);
  CHECK(cpu.nodes()[1].op == "instance_norm");
  CHECK(cpu.nodes()[1].variant == "direct");
  REQUIRE(cpu.nodes()[1].fused.size() == 1);
  CHECK(cpu.nodes()[1].fused[0] == "relu");
  CHECK(cpu.nodes()[0].variant == "direct");
  const auto want = ref.run(in), got = cpu.run(in);
  CHECK(got[0].shape == Shape{2, 2, 12, 13});
  CHECK(rel_error(got[0].data, want[0].data) <= 1e-5);
  // The padded border rows hold 0.5 (constant pad), copied down by the edge pad's bottom... top rows.
  CHECK(got[0].data[2 * 13 + 0] == 0.5f);
}

TEST_CASE("channel_shuffle and slice: shapes, reference values, cpu direct") {
  CHECK(one(ChannelShuffleParams{3}, {{2, 6, 5, 1}}) == Shape{2, 6, 5, 1});
  CHECK(one(SliceParams{1, 2, 5}, {{2, 6, 5, 1}}) == Shape{2, 3, 5, 1});
  CHECK(one(SliceParams{3, 0, 1}, {{2, 6, 5, 4}}) == Shape{2, 6, 5, 1});
  CHECK(error_of(ChannelShuffleParams{4}, {{1, 6, 2, 2}}) ==
        "m.fb: node 1 'n': field groups 4 does not divide the 6 channels of input 0");
  CHECK(error_of(ChannelShuffleParams{0}, {{1, 6, 2, 2}}) ==
        "m.fb: node 1 'n': field groups must be > 0 (got 0)");
  CHECK(error_of(SliceParams{1, 3, 3}, {{1, 6, 2, 2}}) ==
        "m.fb: node 1 'n': fields start 3, end 3 must satisfy 0 <= start < end <= 6 (axis 1 of input 0)");
  CHECK(error_of(SliceParams{0, 0, 1}, {{1, 6, 2, 2}}).find("field axis must be in [1, 3]") !=
        std::string::npos);

  // 6 channels of one pixel, values = channel index; groups 2: [0,3,1,4,2,5]; groups 3: [0,2,4,1,3,5].
  const std::vector<float> x{0, 1, 2, 3, 4, 5};
  std::vector<float> y(6);
  ref::channel_shuffle(ChannelShuffleParams{2}, x.data(), {1, 6, 1, 1}, y.data());
  CHECK(y == std::vector<float>{0, 3, 1, 4, 2, 5});
  ref::channel_shuffle(ChannelShuffleParams{3}, x.data(), {1, 6, 1, 1}, y.data());
  CHECK(y == std::vector<float>{0, 2, 4, 1, 3, 5});
  std::vector<float> z(4);
  ref::slice(SliceParams{2, 1, 3}, x.data(), {1, 2, 3}, z.data(), {1, 2, 2});  // [[0,1,2],[3,4,5]]
  CHECK(z == std::vector<float>{1, 2, 4, 5});

  std::mt19937_64 rng(5);
  for (int t = 0; t < 100; ++t) {
    const int64_t g = uniform(rng, 1, 4), C = g * uniform(rng, 1, 5);
    const Shape xs{uniform(rng, 1, 3), C, uniform(rng, 1, 9), uniform(rng, 1, 9)};
    const std::vector<std::vector<float>> in{random_vector(size_t(shape_numel(xs)), 900 + t)};
    const NodeDesc shuffle = shaped_node(ChannelShuffleParams{int(g)}, {xs});
    CHECK(run_variant("direct", shuffle, in) == run_variant("reference", shuffle, in));
    const int axis = uniform(rng, 1, 3);
    const int64_t dim = xs[size_t(axis)], start = uniform(rng, 0, int(dim) - 1);
    const NodeDesc sl = shaped_node(SliceParams{axis, start, uniform(rng, int(start) + 1, int(dim))}, {xs});
    CHECK(run_variant("direct", sl, in) == run_variant("reference", sl, in));
  }
}
