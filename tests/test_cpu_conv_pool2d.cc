// Tests of the CPU fused convolution + average pooling variants (kernels/cpu/conv_pool2d.cc):
// unfused, fused_filter and direct_sum against the reference conv_pool2d on >= 200 random shapes
// each (kernel 1-7, asymmetric padding, conv stride 1-2, pool 2-4 with conv outputs not divisible by
// the pool, channels 1..67, batch 1..3, every activation), outputs and workspaces NaN-poisoned before
// each run; a LeNet-5 sized layer; and bad nodes/calls.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/kernel.h"
#include "kernels/reference/reference.h"
#include "test_util.h"

using namespace infer;
using infer::test::poison;
using infer::test::random_vector;
using infer::test::rel_error;

namespace {

const char* const kVariants[] = {"unfused", "fused_filter", "direct_sum"};

const KernelVariant& variant(const std::string& name) {
  const KernelVariant* v = KernelRegistry::global().find("cpu", "conv_pool2d", name);
  REQUIRE_MESSAGE(v != nullptr, "variant " << name << " is not registered");
  return *v;
}

struct Case {
  ConvPool2DParams p;
  Shape x, w, y;
  bool bias = true;
};

NodeDesc make_node(const Case& c, const std::vector<float>& w, const std::vector<float>& b) {
  NodeDesc node;
  node.params = c.p;
  node.input_shapes = {c.x, c.w};
  node.constants = {nullptr, w.data()};
  if (c.bias) {
    node.input_shapes.push_back({c.w[0]});
    node.constants.push_back(b.data());
  }
  node.output_shapes = {c.y};
  return node;
}

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

void check_case(const Case& c, uint64_t seed) {
  const auto x = random_vector(size_t(shape_numel(c.x)), seed);
  const auto w = random_vector(size_t(shape_numel(c.w)), seed + 1);
  const auto b = random_vector(size_t(c.w[0]), seed + 2);
  const NodeDesc node = make_node(c, w, b);
  std::vector<float> ref(size_t(shape_numel(c.y)));
  ref::conv_pool2d(c.p, x.data(), c.x, w.data(), c.w, c.bias ? b.data() : nullptr, ref.data(), c.y);
  for (const char* name : kVariants) {
    const KernelVariant& v = variant(name);
    REQUIRE(v.applicable(node));
    const double err = rel_error(run_variant(v, node, x, w, b), ref);
    CHECK_MESSAGE(err <= 1e-5, name << " x" << shape_str(c.x) << " w" << shape_str(c.w) << " s"
                                    << c.p.conv.stride_h << "x" << c.p.conv.stride_w << " pad "
                                    << c.p.conv.pad.top << "," << c.p.conv.pad.left << ","
                                    << c.p.conv.pad.bottom << "," << c.p.conv.pad.right << " pool "
                                    << c.p.pool << " err " << err);
  }
}

int64_t conv_out(int64_t in, int pa, int pb, int64_t k, int s) {
  const int64_t span = in + pa + pb - k;
  return span < 0 ? 0 : span / s + 1;
}

Case random_case(std::mt19937& rng) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (;;) {
    Case c;
    const int kh = uni(1, 7), kw = uni(1, 7);
    Conv2DParams& cv = c.p.conv;
    cv.stride_h = uni(0, 3) == 0 ? 2 : 1;
    cv.stride_w = uni(0, 3) == 0 ? 2 : cv.stride_h;
    cv.pad = {uni(0, kh - 1), uni(0, kw - 1), uni(0, kh - 1), uni(0, kw - 1)};
    if (uni(0, 1)) cv.pad.bottom = cv.pad.top, cv.pad.right = cv.pad.left;
    cv.activation = test::activation_case(uni(0, test::kBoundedActivationCases - 1));
    c.p.pool = uni(2, 4);
    c.bias = uni(0, 3) != 0;
    int ci = uni(1, 67), co = uni(1, 67);
    if (ci * co > 600) (uni(0, 1) ? ci : co) = uni(1, 8);
    const int n = uni(1, 3), h = uni(2, 17), wd = uni(2, 17);
    const int64_t ph = conv_out(h, cv.pad.top, cv.pad.bottom, kh, cv.stride_h) / c.p.pool;
    const int64_t pw = conv_out(wd, cv.pad.left, cv.pad.right, kw, cv.stride_w) / c.p.pool;
    if (ph < 1 || pw < 1) continue;
    c.x = {n, ci, h, wd};
    c.w = {co, ci, kh, kw};
    c.y = {n, co, ph, pw};
    return c;
  }
}

}  // namespace

TEST_CASE("unfused, fused_filter and direct_sum match the reference on >= 200 random shapes") {
  std::mt19937 rng(4321);
  for (int i = 0; i < 220; ++i) check_case(random_case(rng), 1000 + 3 * i);
}

TEST_CASE("LeNet-5 layers: conv 1->6 k5 p2 + avgpool 2 and conv 6->16 k5 + avgpool 2, tanh") {
  Case a;
  a.p.conv.pad = {2, 2, 2, 2};
  a.p.conv.activation.kind = ActivationKind::Tanh;
  a.x = {3, 1, 28, 28};
  a.w = {6, 1, 5, 5};
  a.y = {3, 6, 14, 14};
  check_case(a, 7);
  Case b;
  b.p.conv.activation.kind = ActivationKind::Tanh;
  b.x = {2, 6, 14, 14};
  b.w = {16, 6, 5, 5};
  b.y = {2, 16, 5, 5};
  check_case(b, 8);
}

TEST_CASE("odd conv outputs drop the partial pooling window; zero-size outputs are fine") {
  Case c;  // conv 8x7 -> pool 3 -> 2x2 (rows 6-7 and column 6 dropped)
  c.p.pool = 3;
  c.p.conv.pad = {1, 0, 0, 1};
  c.x = {1, 5, 8, 7};
  c.w = {4, 5, 2, 2};
  c.y = {1, 4, 2, 2};
  check_case(c, 9);
}

TEST_CASE("bad nodes are not applicable and bad calls throw infer::Error") {
  Case c;
  c.x = {1, 3, 8, 8};
  c.w = {2, 3, 3, 3};
  c.y = {1, 2, 3, 3};
  const auto x = random_vector(192, 1), w = random_vector(54, 2), b = random_vector(2, 3);
  const NodeDesc good = make_node(c, w, b);
  NodeDesc wrong_out = good;
  wrong_out.output_shapes = {{1, 2, 4, 3}};
  NodeDesc wrong_ch = good;
  wrong_ch.input_shapes[1] = {2, 4, 3, 3};
  NodeDesc zero_pool = good;
  std::get<ConvPool2DParams>(zero_pool.params).pool = 0;
  NodeDesc no_const = good;
  no_const.constants = {nullptr, nullptr, nullptr};
  for (const char* name : kVariants) {
    const KernelVariant& v = variant(name);
    CHECK(v.applicable(good));
    CHECK(!v.applicable(wrong_out));
    CHECK(!v.applicable(wrong_ch));
    CHECK(!v.applicable(zero_pool));
    if (v.prepare) {
      CHECK(!v.applicable(no_const));
      CHECK_THROWS_AS(v.prepare(wrong_out), Error);
      CHECK_THROWS_AS(v.prepare(no_const), Error);
    }
    std::vector<float> y(18);
    KernelCall bad{wrong_out, {x.data(), w.data(), b.data()}, {y.data()}, nullptr, nullptr};
    CHECK_THROWS_AS(v.run(bad), Error);
    KernelCall unprepared{good, {x.data(), w.data(), b.data()}, {y.data()}, nullptr, nullptr};
    CHECK_THROWS_AS(v.run(unprepared), Error);  // no prepared weights or no workspace
  }
}
