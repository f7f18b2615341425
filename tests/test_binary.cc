// The binary op (add/sub/mul/div with NumPy broadcasting) through the engine: shape inference (valid
// and invalid broadcasts, the batch rules for constants), reference values checked by hand, the
// builder -> file -> loader round trip, old files with Add still loading as Add, and sessions on the
// cpu and reference backends with the fused activation visible in the node list and the profile.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/infer.h"
#include "infer/kernel.h"
#include "model_generated.h"
#include "shape_inference.h"
#include "test_util.h"

using namespace infer;
using doctest::Contains;
using infer::detail::infer_node_shapes;

namespace {

const std::string kWhere = "m.fb: node 3 'n' (binary)";

BinaryParams bin(BinaryKind k, ActivationKind act = ActivationKind::None) {
  BinaryParams p;
  p.kind = k;
  p.activation.kind = act;
  return p;
}

Shape shape_of(const std::vector<Shape>& in, const std::vector<bool>* constant = nullptr) {
  auto out = infer_node_shapes(bin(BinaryKind::Mul), in, kWhere, constant);
  REQUIRE(out.size() == 1);
  return out[0];
}

std::vector<float> run_reference(const BinaryParams& p, const Shape& a_shape, const std::vector<float>& a,
                                 const Shape& b_shape, const std::vector<float>& b, const Shape& y_shape) {
  NodeDesc node;
  node.params = p;
  node.input_shapes = {a_shape, b_shape};
  node.output_shapes = {y_shape};
  node.constants = {nullptr, nullptr};
  std::vector<float> y(static_cast<size_t>(shape_numel(y_shape)));
  test::poison(y);
  const KernelVariant* v = KernelRegistry::global().find("cpu", "binary", "reference");
  REQUIRE(v != nullptr);
  v->run(KernelCall{node, {a.data(), b.data()}, {y.data()}});
  return y;
}

}  // namespace

TEST_CASE("binary shape inference: NumPy broadcasting") {
  CHECK(shape_of({{2, 3, 4, 5}, {2, 3, 4, 5}}) == Shape{2, 3, 4, 5});  // residual
  CHECK(shape_of({{2, 3, 4, 5}, {1, 3, 1, 1}}) == Shape{2, 3, 4, 5});  // per-channel [1,C,1,1]
  CHECK(shape_of({{2, 3, 4, 5}, {3, 1, 1}}) == Shape{2, 3, 4, 5});     // per-channel [C,1,1]
  CHECK(shape_of({{2, 3, 1, 1}, {2, 3, 4, 5}}) == Shape{2, 3, 4, 5});  // SE gate first
  CHECK(shape_of({{2, 3, 4, 5}, {1}}) == Shape{2, 3, 4, 5});           // scalar
  CHECK(shape_of({{2, 3, 4, 5}, {}}) == Shape{2, 3, 4, 5});            // rank-0 scalar
  CHECK(shape_of({{2, 1, 4, 1}, {1, 3, 1, 5}}) == Shape{2, 3, 4, 5});  // both broadcast
  CHECK(shape_of({{7, 9}, {9}}) == Shape{7, 9});
  const std::vector<bool> second_const{false, true};
  CHECK(shape_of({{2, 3, 4, 5}, {1, 3, 1, 1}}, &second_const) == Shape{2, 3, 4, 5});
  CHECK(shape_of({{2, 3, 4, 5}, {5}}, &second_const) == Shape{2, 3, 4, 5});
}

TEST_CASE("binary shape inference: errors name the node and what is wrong") {
  CHECK_THROWS_WITH_AS(shape_of({{2, 3, 4, 5}, {1, 4, 1, 1}}),
                       "m.fb: node 3 'n' (binary): input 1 has shape 1x4x1x1 which does not broadcast with "
                       "input 0's 2x3x4x5 (dim 1 of the aligned shapes: 3 vs 4; each pair must be equal or 1)",
                       Error);
  CHECK_THROWS_WITH_AS(shape_of({{2, 3}, {3, 2}}), Contains("does not broadcast"), Error);
  CHECK_THROWS_WITH_AS(infer_node_shapes(bin(BinaryKind::Add), {{1, 2}}, kWhere), Contains("expects 2 inputs, got 1"),
                       Error);
  BinaryParams bad = bin(BinaryKind::Add);
  bad.kind = static_cast<BinaryKind>(9);
  CHECK_THROWS_WITH_AS(infer_node_shapes(bad, {{1, 2}, {1, 2}}, kWhere), Contains("field kind has unknown value 9"),
                       Error);
  bad = bin(BinaryKind::Add);
  bad.activation.kind = static_cast<ActivationKind>(42);
  CHECK_THROWS_WITH_AS(infer_node_shapes(bad, {{1, 2}, {1, 2}}, kWhere), Contains("activation"), Error);

  // The batch rules, which need to know the constants.
  const std::vector<bool> second_const{false, true}, both_const{true, true}, none_const{false, false};
  CHECK_THROWS_WITH_AS(shape_of({{1, 3, 4, 5}, {2, 3, 1, 1}}, &second_const),
                       Contains("input 1 (constant) has shape 2x3x1x1 with dim 0 2 (a constant's dim 0 is the "
                                "batch axis and must be 1)"),
                       Error);
  CHECK_THROWS_WITH_AS(shape_of({{1, 3}, {1, 1, 3}}, &second_const),
                       Contains("input 1 (constant) has shape 1x1x3, of rank above the activation's 2"), Error);
  CHECK_THROWS_WITH_AS(shape_of({{1, 3, 4, 5}, {1, 5}}, &none_const),
                       Contains("activations must have equal rank"), Error);
  CHECK_THROWS_WITH_AS(shape_of({{1, 3}, {1, 3}}, &both_const), Contains("both inputs are constants"), Error);
}

TEST_CASE("binary reference: hand-checked values") {
  // Per-channel: [1,2,1,2] * [2,1,1] -> [1,2,1,2]... a [1,2,2,1] by c [2,1,1].
  const Shape x{1, 2, 2, 1}, c{2, 1, 1};
  const std::vector<float> xv{1, 2, 3, 4}, cv{10, -2};
  CHECK(run_reference(bin(BinaryKind::Mul), x, xv, c, cv, x) == std::vector<float>{10, 20, -6, -8});
  CHECK(run_reference(bin(BinaryKind::Add), x, xv, c, cv, x) == std::vector<float>{11, 12, 1, 2});
  CHECK(run_reference(bin(BinaryKind::Sub), x, xv, c, cv, x) == std::vector<float>{-9, -8, 5, 6});
  CHECK(run_reference(bin(BinaryKind::Sub), c, cv, x, xv, x) == std::vector<float>{9, 8, -5, -6});
  CHECK(run_reference(bin(BinaryKind::Div), x, xv, c, cv, x) == std::vector<float>{0.1f, 0.2f, -1.5f, -2.f});
  CHECK(run_reference(bin(BinaryKind::Div), c, cv, x, xv, x) == std::vector<float>{10.f, 5.f, -2.f / 3.f, -0.5f});
  // Fused relu after the subtraction.
  CHECK(run_reference(bin(BinaryKind::Sub, ActivationKind::Relu), x, xv, c, cv, x) ==
        std::vector<float>{0, 0, 5, 6});
  // Both broadcast: [2,1] + [1,3] -> [2,3] (outer sum).
  CHECK(run_reference(bin(BinaryKind::Add), {2, 1}, {1, 2}, {1, 3}, {10, 20, 30}, {2, 3}) ==
        std::vector<float>{11, 21, 31, 12, 22, 32});
  // Scalar divisor, division by zero is IEEE (inf), 0/0 is NaN.
  const auto d = run_reference(bin(BinaryKind::Div), {1, 3}, {1, 0, -1}, {1}, {0}, {1, 3});
  CHECK(std::isinf(d[0]));
  CHECK(d[0] > 0);
  CHECK(std::isnan(d[1]));
  CHECK(std::isinf(d[2]));
  CHECK(d[2] < 0);
}

TEST_CASE("binary through the builder, the file and the loader; sessions on cpu and reference") {
  // x [-1,3,4,5]: scale by a per-channel constant, subtract a squeeze-excitation style gate computed
  // from x (global pool), divide by a scalar constant on the left, relu fused by the pass.
  ModelBuilder b("binary_net");
  const int x = b.input("x", {-1, 3, 4, 5});
  const int scale = b.constant("scale", {1, 3, 1, 1}, {0.5f, -1.f, 2.f});
  const int two = b.constant("two", {1}, {2.f});
  Pool2DParams gp;
  gp.kind = PoolKind::Average;
  gp.kernel_h = 4;
  gp.kernel_w = 5;
  gp.stride_h = 4;
  gp.stride_w = 5;
  const int pooled = b.node("pool", gp, {x});                                          // [-1,3,1,1]
  const int scaled = b.node("scaled", bin(BinaryKind::Mul), {x, scale});                 // [-1,3,4,5]
  const int gated = b.node("gate", bin(BinaryKind::Sub), {scaled, pooled});             // [-1,3,4,5]
  const int divided = b.node("div", bin(BinaryKind::Div), {two, gated});                // 2 / gated
  CHECK(b.shape(divided) == Shape{-1, 3, 4, 5});
  const int y = b.node("relu", ActivationParams{}, {divided});
  b.output(y);
  // A constant spanning the batch and two constants are refused by the builder already.
  CHECK_THROWS_WITH_AS(b.node("bad", bin(BinaryKind::Add), {x, b.constant("k", {2, 3, 1, 1}, std::vector<float>(6))}),
                       Contains("model builder: node 'bad' (binary): input 1 (constant) has shape 2x3x1x1"), Error);
  CHECK_THROWS_WITH_AS(b.node("bad2", bin(BinaryKind::Add), {scale, two}), Contains("both inputs are constants"),
                       Error);

  const Model m = Model::from_bytes(b.finish(), "binary_net.fb");
  REQUIRE(m.num_nodes() == 5);
  CHECK(std::get<BinaryParams>(m.graph().nodes[3].params).kind == BinaryKind::Div);

  Tensor in({2, 3, 4, 5}, test::random_vector(120, 7));
  // Expected, computed here in double.
  std::vector<float> want(120);
  const double s[3] = {0.5, -1, 2};
  for (int n = 0; n < 2; ++n)
    for (int ch = 0; ch < 3; ++ch) {
      double mean = 0;
      for (int i = 0; i < 20; ++i) mean += in.data[size_t((n * 3 + ch) * 20 + i)];
      mean /= 20;
      for (int i = 0; i < 20; ++i) {
        const size_t k = size_t((n * 3 + ch) * 20 + i);
        const double v = 2.0 / (double(in.data[k]) * s[ch] - mean);
        want[k] = float(v < 0 ? 0 : v);
      }
    }
  for (const char* backend : {"cpu", "reference"}) {
    CAPTURE(backend);
    SessionOptions o;
    o.backend = backend;
    o.batch = 2;
    Session session(m, o);
    // fuse_activation put the relu into the division.
    REQUIRE(session.nodes().size() == 4);
    CHECK(session.nodes()[3].op == "binary");
    CHECK(session.nodes()[3].fused == std::vector<std::string>{"relu"});
    CHECK(session.nodes()[3].variant == (std::string(backend) == "cpu" ? "broadcast" : "reference"));
    const auto out = session.run({in});
    REQUIRE(out.size() == 1);
    CHECK(test::rel_error(out[0].data, want) <= 1e-5);
    const Profile p = session.profile({in}, 1);
    CHECK(p.table().find("binary") != std::string::npos);
    CHECK(p.nodes[3].flops == doctest::Approx(120));
  }
}

TEST_CASE("old files: Add keeps its union slot and meaning") {
  // The union's order is the format: Add stays 10, Binary is appended after ConvPool2D.
  static_assert(static_cast<int>(fb::Op::Add) == 10, "Add's union slot");
  static_assert(static_cast<int>(fb::Op::ConvPool2D) == 12, "ConvPool2D's union slot");
  static_assert(static_cast<int>(fb::Op::Binary) == 13, "Binary is appended");
  static_assert(static_cast<int>(OpType::Binary) + 1 == static_cast<int>(fb::Op::Binary), "OpType = fb::Op - 1");
  static_assert(static_cast<int>(OpType::Layout) == kNumFileOpTypes, "the internal ops stay last");
  // A file written before Binary existed (the committed fuzz seed, written by the format-1 builder)
  // loads, and its add node is still an equal-shape Add.
  const Model m = Model::load(std::string(INFER_SOURCE_DIR) + "/fuzz/corpus/model/valid_all_ops.fb");
  int adds = 0;
  for (const auto& n : m.graph().nodes) adds += n.op() == OpType::Add;
  CHECK(adds == 1);
  Session s(m, SessionOptions{});
  Shape shape = m.inputs()[0].shape;
  shape[0] = 1;
  const Tensor in(shape, test::random_vector(size_t(shape_numel(shape)), 3));
  const auto out = s.run({in});
  CHECK(test::all_finite(out[0].data));
}
