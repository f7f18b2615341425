// ModelBuilder -> bytes -> Model round trips: metadata, shapes, exact f32 weights, f16 weights within
// binary16 rounding, 64-byte alignment of weight data, determinism, save() and the builder's errors.
// Also the fp16 conversion itself (half.h): exhaustive round trip and round-to-nearest-even.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "graph.h"
#include "half.h"
#include "infer/error.h"
#include "infer/model.h"
#include "infer/model_builder.h"
#include "infer/version.h"
#include "model_generated.h"
#include "test_util.h"

using namespace infer;
using doctest::Contains;

namespace {

std::string temp_path(const std::string& name) {
  return "/tmp/infer_test_builder_" + std::to_string(::getpid()) + "_" + name;
}

// A small classifier: conv (bias, f32) -> relu -> flatten -> dense (weight stored as `dense_dtype`).
ModelBuilder small_model(DType dense_dtype, const std::vector<float>& wc, const std::vector<float>& wd) {
  ModelBuilder b("small");
  b.set_description("a test model");
  b.set_metadata("task", "classifier");
  b.set_metadata("labels", "a\nb\nc");
  b.set_metadata("input.mean", "0.5,0.5");
  int x = b.input("x", {-1, 2, 5, 5});
  int w = b.constant("conv.weight", {4, 2, 3, 3}, wc);
  int bias = b.constant("conv.bias", {4}, {0.1f, -0.2f, 0.3f, -0.4f});
  Conv2DParams cp;
  cp.pad = {1, 1, 1, 1};
  cp.activation.kind = ActivationKind::Relu;
  int c = b.node("conv", cp, {x, w, bias});
  int f = b.node("flatten", FlattenParams{1}, {c});
  int d = b.constant("dense.weight", {3, 100}, wd, dense_dtype);
  int y = b.node("dense", DenseParams{}, {f, d});
  b.output(y);
  return b;
}

const detail::Value* find_value(const detail::Graph& g, const std::string& name) {
  for (const auto& v : g.values)
    if (v.name == name) return &v;
  return nullptr;
}

}  // namespace

TEST_CASE("half: every binary16 value survives half -> float -> half") {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = detail::half_to_float(h);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
      CHECK(std::isnan(f));
      CHECK(std::isnan(detail::half_to_float(detail::float_to_half(f))));
    } else {
      CHECK(detail::float_to_half(f) == h);
    }
  }
}

TEST_CASE("half: known values, specials, subnormals and ties to even") {
  using detail::float_to_half;
  using detail::half_to_float;
  CHECK(float_to_half(0.f) == 0x0000);
  CHECK(float_to_half(-0.f) == 0x8000);
  CHECK(float_to_half(1.f) == 0x3c00);
  CHECK(float_to_half(-2.f) == 0xc000);
  CHECK(float_to_half(65504.f) == 0x7bff);                 // largest finite
  CHECK(float_to_half(65519.f) == 0x7bff);                 // rounds down
  CHECK(float_to_half(65520.f) == 0x7c00);                 // halfway to 2^16: ties to even = inf
  CHECK(float_to_half(1e10f) == 0x7c00);
  CHECK(float_to_half(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(float_to_half(std::ldexp(1.f, -14)) == 0x0400);    // smallest normal
  CHECK(float_to_half(std::ldexp(1.f, -24)) == 0x0001);    // smallest subnormal
  CHECK(float_to_half(std::ldexp(1.f, -25)) == 0x0000);    // halfway to 0: ties to even
  CHECK(float_to_half(std::ldexp(1.5f, -25)) == 0x0001);   // above halfway
  CHECK(float_to_half(std::ldexp(3.f, -25)) == 0x0002);    // 1.5 ulp: ties to even (2)
  CHECK(float_to_half(1e-30f) == 0x0000);
  CHECK(float_to_half(1.f + std::ldexp(1.f, -11)) == 0x3c00);   // tie: stays even
  CHECK(float_to_half(1.f + 3 * std::ldexp(1.f, -11)) == 0x3c02);  // tie: rounds up to even
  CHECK(half_to_float(0x0001) == std::ldexp(1.f, -24));
  CHECK(half_to_float(0x3555) == doctest::Approx(0.333251953125));
}

TEST_CASE("half: float -> half picks the nearest half (random floats)") {
  auto v = test::random_vector(20000, 7, -70000.f, 70000.f);
  auto small = test::random_vector(20000, 8, -1e-3f, 1e-3f);
  v.insert(v.end(), small.begin(), small.end());
  for (float f : v) {
    const uint16_t h = detail::float_to_half(f);
    const double got = detail::half_to_float(h);
    if (std::isinf(got)) {
      CHECK(std::fabs(f) >= 65520.f);
      continue;
    }
    const double err = std::fabs(got - double(f));
    // Neighbours (same sign) may not be strictly closer.
    for (int step : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + step);
      if ((h & 0x7fff) == 0 && step < 0) continue;
      const double other = detail::half_to_float(n);
      if (std::isinf(other) || std::isnan(other)) continue;
      CHECK(err <= std::fabs(other - double(f)));
    }
  }
}

TEST_CASE("builder round trip: metadata, shapes, f32 weights exact") {
  const auto wc = test::random_vector(4 * 2 * 3 * 3, 1);
  const auto wd = test::random_vector(3 * 100, 2);
  const std::vector<uint8_t> bytes = small_model(DType::F32, wc, wd).finish();
  const Model m = Model::from_bytes(bytes, "small.fb");

  CHECK(m.name() == "small");
  CHECK(m.description() == "a test model");
  CHECK(m.producer() == std::string("infer ") + version());
  CHECK(m.format_version() == kFormatVersion);
  CHECK(m.metadata().size() == 3);
  CHECK(m.meta("task") == "classifier");
  CHECK(m.meta("labels") == "a\nb\nc");
  CHECK(m.meta("input.mean") == "0.5,0.5");
  CHECK(m.meta("latent.dim", "none") == "none");
  CHECK(m.num_nodes() == 3);
  CHECK(m.weight_bytes() == (wc.size() + 4 + wd.size()) * 4);

  REQUIRE(m.inputs().size() == 1);
  CHECK(m.inputs()[0].name == "x");
  CHECK(m.inputs()[0].shape == Shape{-1, 2, 5, 5});
  REQUIRE(m.outputs().size() == 1);
  CHECK(m.outputs()[0].name == "dense");
  CHECK(m.outputs()[0].shape == Shape{-1, 3});

  const detail::Graph& g = m.graph();
  const detail::Value* w = find_value(g, "conv.weight");
  REQUIRE(w);
  CHECK(w->shape == Shape{4, 2, 3, 3});
  CHECK(std::memcmp(w->data, wc.data(), wc.size() * 4) == 0);
  const detail::Value* d = find_value(g, "dense.weight");
  REQUIRE(d);
  CHECK(std::memcmp(d->data, wd.data(), wd.size() * 4) == 0);
  const detail::Value* conv = find_value(g, "conv");
  REQUIRE(conv);
  CHECK(conv->shape == Shape{-1, 4, 5, 5});
  CHECK_FALSE(conv->is_constant());

  REQUIRE(g.nodes.size() == 3);
  const auto* p = std::get_if<Conv2DParams>(&g.nodes[0].params);
  REQUIRE(p);
  CHECK(p->pad.top == 1);
  CHECK(p->pad.right == 1);
  CHECK(p->activation.kind == ActivationKind::Relu);
  CHECK(g.nodes[0].inputs.size() == 3);
  CHECK(g.nodes[1].op() == OpType::Flatten);
  CHECK(g.nodes[2].op() == OpType::Dense);
}

TEST_CASE("builder round trip: every op's parameters survive") {
  ModelBuilder b("params");
  int x = b.input("x", {-1, 2, 8, 8});
  Conv2DParams c;
  c.stride_h = 2;
  c.stride_w = 1;
  c.pad = {1, 0, 2, 1};
  c.activation = {ActivationKind::LeakyRelu, 0.2f};
  int y = b.node("conv", c, {x, b.constant("w", {3, 2, 3, 2}, std::vector<float>(36, 1.f))});
  ConvTranspose2DParams t;
  t.stride_h = 2;
  t.stride_w = 3;
  t.pad = {1, 1, 0, 0};
  t.output_padding_h = 1;
  t.output_padding_w = 2;
  t.activation = {ActivationKind::Tanh, 0.01f};
  y = b.node("tconv", t, {y, b.constant("wt", {3, 2, 3, 3}, std::vector<float>(54, 1.f)),
                          b.constant("bt", {2}, {1, 2})});
  Pool2DParams p;
  p.kind = PoolKind::Average;
  p.kernel_h = 3;
  p.kernel_w = 2;
  p.stride_h = 1;
  p.stride_w = 2;
  p.pad = {1, 0, 1, 0};
  p.count_include_pad = true;
  p.ceil_mode = true;
  y = b.node("pool", p, {y});
  BatchNormParams bn;
  bn.epsilon = 1e-3f;
  bn.activation = {ActivationKind::Sigmoid, 0.01f};
  std::vector<float> two(2, 1.f);
  y = b.node("bn", bn, {y, b.constant("s", {2}, two), b.constant("b", {2}, two),
                        b.constant("m", {2}, two), b.constant("v", {2}, two)});
  ConvPool2DParams cp;
  cp.conv.pad = {1, 1, 1, 1};
  cp.pool = 3;
  cp.conv.activation = {ActivationKind::Relu, 0.01f};
  y = b.node("convpool", cp, {y, b.constant("wc", {2, 2, 3, 3}, std::vector<float>(36, 1.f))});
  int a = b.node("add", AddParams{{ActivationKind::Relu, 0.01f}}, {y, y});
  y = b.node("concat", ConcatParams{2}, {a, y});
  y = b.node("act", ActivationParams{{ActivationKind::LeakyRelu, 0.3f}}, {y});
  y = b.node("flat", FlattenParams{2}, {y});
  y = b.node("reshape", ReshapeParams{{-1, 2}}, {y});
  y = b.node("softmax", SoftmaxParams{2}, {y});
  b.output(y);
  b.output(a);
  const Shape expected = b.shape(y);

  const Model m = Model::from_bytes(b.finish());
  const auto& g = m.graph();
  REQUIRE(g.nodes.size() == 11);
  const auto& gc = std::get<Conv2DParams>(g.nodes[0].params);
  CHECK(gc.stride_h == 2);
  CHECK(gc.stride_w == 1);
  CHECK((gc.pad.top == 1 && gc.pad.left == 0 && gc.pad.bottom == 2 && gc.pad.right == 1));
  CHECK(gc.activation.kind == ActivationKind::LeakyRelu);
  CHECK(gc.activation.alpha == 0.2f);
  const auto& gt = std::get<ConvTranspose2DParams>(g.nodes[1].params);
  CHECK((gt.stride_h == 2 && gt.stride_w == 3 && gt.output_padding_h == 1 && gt.output_padding_w == 2));
  CHECK((gt.pad.top == 1 && gt.pad.left == 1 && gt.pad.bottom == 0));
  CHECK(gt.activation.kind == ActivationKind::Tanh);
  const auto& gp = std::get<Pool2DParams>(g.nodes[2].params);
  CHECK((gp.kind == PoolKind::Average && gp.kernel_h == 3 && gp.kernel_w == 2 && gp.stride_w == 2));
  CHECK(gp.count_include_pad);
  CHECK(gp.ceil_mode);
  const auto& gb = std::get<BatchNormParams>(g.nodes[3].params);
  CHECK(gb.epsilon == 1e-3f);
  CHECK(gb.activation.kind == ActivationKind::Sigmoid);
  const auto& gcp = std::get<ConvPool2DParams>(g.nodes[4].params);
  CHECK(gcp.pool == 3);
  CHECK(gcp.conv.pad.left == 1);
  CHECK(gcp.conv.activation.kind == ActivationKind::Relu);
  CHECK(std::get<AddParams>(g.nodes[5].params).activation.kind == ActivationKind::Relu);
  CHECK(std::get<ConcatParams>(g.nodes[6].params).axis == 2);
  CHECK(std::get<ActivationParams>(g.nodes[7].params).activation.alpha == 0.3f);
  CHECK(std::get<FlattenParams>(g.nodes[8].params).axis == 2);
  CHECK(std::get<ReshapeParams>(g.nodes[9].params).shape == Shape{-1, 2});
  CHECK(std::get<SoftmaxParams>(g.nodes[10].params).axis == 2);
  REQUIRE(m.outputs().size() == 2);
  CHECK(m.outputs()[0].shape == expected);
  CHECK(m.outputs()[1].name == "add");
}

TEST_CASE("builder round trip: resize parameters") {
  ModelBuilder b("resize");
  const int x = b.input("x", {-1, 3, 5, 7});
  ResizeParams p;
  p.mode = ResizeMode::Linear;
  p.coord = ResizeCoord::PytorchHalfPixel;
  p.nearest = ResizeNearest::Ceil;
  p.out_h = 9;
  p.scale_w = 1.5f;
  const int y = b.node("up", p, {x});
  CHECK(b.shape(y) == Shape{-1, 3, 9, 10});
  b.output(y);
  const Model m = Model::from_bytes(b.finish());
  const auto& g = std::get<ResizeParams>(m.graph().nodes.at(0).params);
  CHECK((g.mode == ResizeMode::Linear && g.coord == ResizeCoord::PytorchHalfPixel &&
         g.nearest == ResizeNearest::Ceil && g.out_h == 9 && g.out_w == 0 && g.scale_h == 0.f &&
         g.scale_w == 1.5f));
  p.coord = static_cast<ResizeCoord>(7);
  CHECK_THROWS_WITH_AS(b.node("bad", p, {x}), doctest::Contains("field coord has unknown value 7"), Error);
}

TEST_CASE("builder: f16 weights are stored as binary16 and widened within rounding") {
  const auto wc = test::random_vector(4 * 2 * 3 * 3, 3);
  const auto wd = test::random_vector(3 * 100, 4, -100.f, 100.f);
  const auto f32 = small_model(DType::F32, wc, wd).finish();
  const auto f16 = small_model(DType::F16, wc, wd).finish();
  CHECK(f32.size() - f16.size() >= wd.size() * 2 - 128);  // half the bytes (up to alignment padding)

  const Model m = Model::from_bytes(f16);
  CHECK(m.weight_bytes() == (wc.size() + 4) * 4 + wd.size() * 2);
  const detail::Value* d = find_value(m.graph(), "dense.weight");
  REQUIRE(d);
  CHECK(d->dtype == DType::F16);
  for (size_t i = 0; i < wd.size(); ++i) {
    CHECK(d->data[i] == detail::half_to_float(detail::float_to_half(wd[i])));
    CHECK(std::fabs(d->data[i] - wd[i]) <= std::fabs(wd[i]) * (1.0 / 2048) + 1e-7);
  }
}

TEST_CASE("builder: weight data is 64-byte aligned in the file and in place when mapped") {
  const auto wc = test::random_vector(4 * 2 * 3 * 3, 5);
  const auto wd = test::random_vector(3 * 100, 6);
  for (DType dt : {DType::F32, DType::F16}) {
    ModelBuilder b = small_model(dt, wc, wd);
    const std::vector<uint8_t> bytes = b.finish();
    const fb::Model* fm = fb::GetModel(bytes.data());
    REQUIRE(fm->buffers());
    REQUIRE(fm->buffers()->size() == 4);
    CHECK((!fm->buffers()->Get(0)->data() || fm->buffers()->Get(0)->data()->size() == 0));
    for (unsigned i = 1; i < fm->buffers()->size(); ++i) {
      const uint8_t* p = fm->buffers()->Get(i)->data()->Data();
      CHECK((p - bytes.data()) % 64 == 0);
    }
    // Mapped from a file (page aligned): f32 weights are used in place, so 64-byte aligned in memory.
    const std::string path = temp_path("aligned.fb");
    b.save(path);
    const Model m = Model::load(path);
    std::remove(path.c_str());
    const detail::Value* w = find_value(m.graph(), "conv.weight");
    REQUIRE(w);
    CHECK(reinterpret_cast<uintptr_t>(w->data) % 64 == 0);
    CHECK(std::memcmp(w->data, wc.data(), wc.size() * 4) == 0);
  }
}

TEST_CASE("builder: finish() is deterministic") {
  const auto wc = test::random_vector(4 * 2 * 3 * 3, 9);
  const auto wd = test::random_vector(3 * 100, 10);
  ModelBuilder a = small_model(DType::F16, wc, wd);
  ModelBuilder b = small_model(DType::F16, wc, wd);
  const auto bytes = a.finish();
  CHECK(bytes == a.finish());
  CHECK(bytes == b.finish());
  b.set_metadata("task", "generator");
  CHECK(bytes != b.finish());
}

TEST_CASE("builder: metadata is sorted by key and the last value wins") {
  ModelBuilder b("meta");
  b.set_metadata("z", "1");
  b.set_metadata("a", "2");
  b.set_metadata("m", "3");
  b.set_metadata("a", "4");
  b.set_producer("test suite");
  int x = b.input("x", {-1, 4});
  b.output(b.node("relu", ActivationParams{}, {x}));
  const auto bytes = b.finish();
  const fb::Model* fm = fb::GetModel(bytes.data());
  REQUIRE(fm->metadata());
  REQUIRE(fm->metadata()->size() == 3);
  CHECK(fm->metadata()->Get(0)->key()->str() == "a");
  CHECK(fm->metadata()->Get(1)->key()->str() == "m");
  CHECK(fm->metadata()->Get(2)->key()->str() == "z");
  CHECK(fm->metadata()->LookupByKey("a")->value()->str() == "4");
  const Model m = Model::from_bytes(bytes);
  CHECK(m.meta("a") == "4");
  CHECK(m.producer() == "test suite");
}

TEST_CASE("builder: save() writes atomically and reports failures") {
  const auto wc = test::random_vector(4 * 2 * 3 * 3, 11);
  const auto wd = test::random_vector(3 * 100, 12);
  ModelBuilder b = small_model(DType::F32, wc, wd);
  const std::string path = temp_path("saved.fb");
  b.save(path);
  CHECK(::access((path + ".tmp").c_str(), F_OK) != 0);
  const Model m = Model::load(path);
  CHECK(m.name() == "small");
  CHECK(m.num_nodes() == 3);
  std::remove(path.c_str());

  CHECK_THROWS_WITH_AS(b.save("/nonexistent-dir/x.fb"),
                       "/nonexistent-dir/x.fb: cannot write: No such file or directory", Error);
  CHECK_THROWS_WITH_AS(b.save("/etc/passwd/x.fb"), "/etc/passwd/x.fb: cannot write: Not a directory", Error);
}

TEST_CASE("builder: errors") {
  ModelBuilder b("bad");
  int x = b.input("x", {-1, 3, 8, 8});
  int w = b.constant("w", {4, 3, 3, 3}, std::vector<float>(108, 0.f));
  CHECK(b.shape(x) == Shape{-1, 3, 8, 8});
  CHECK_THROWS_WITH_AS(b.input("x", {1, 2}), Contains("tensor name 'x' is already used"), Error);
  CHECK_THROWS_WITH_AS(b.constant("w", {1}, {1.f}), Contains("'w' is already used"), Error);
  CHECK_THROWS_WITH_AS(b.constant("w2", {4, 3, 3, 3}, std::vector<float>(107, 0.f)),
                       Contains("data has 107 floats but shape 4x3x3x3 needs 108"), Error);
  CHECK_THROWS_WITH_AS(b.constant("w3", {-1, 3}, {1, 2, 3}), Contains("dimension -1"), Error);
  CHECK_THROWS_WITH_AS(b.input("y", {-1, 0, 3}), Contains("dimension 0"), Error);
  CHECK_THROWS_WITH_AS(b.input("y", {3, -1}), Contains("only the leading one may be -1"), Error);
  CHECK_THROWS_WITH_AS(b.input("y", {}), Contains("rank"), Error);
  CHECK_THROWS_WITH_AS(b.input("", {1}), Contains("must not be empty"), Error);

  Conv2DParams bad;
  bad.stride_h = 0;
  CHECK_THROWS_WITH_AS(b.node("c", bad, {x, w}),
                       "model builder: node 'c' (conv2d): field stride_h must be > 0 (got 0)", Error);
  CHECK_THROWS_WITH_AS(b.node("c", Conv2DParams{}, {x, x}),
                       Contains("input 1 'x' is an activation; it must be a constant"), Error);
  CHECK_THROWS_WITH_AS(b.node("c", Conv2DParams{}, {w, w}),
                       Contains("input 0 'w' is a constant; it must be an activation"), Error);
  CHECK_THROWS_WITH_AS(b.node("c", Conv2DParams{}, {x, 99}), Contains("tensor id 99"), Error);
  CHECK_THROWS_WITH_AS(b.node("w", Conv2DParams{}, {x, w}), Contains("'w' is already used"), Error);
  CHECK_THROWS_WITH_AS(b.shape(-1), Contains("tensor id -1"), Error);
  CHECK_THROWS_WITH_AS(b.output(x), Contains("output 'x' is not produced by any node"), Error);
  CHECK_THROWS_WITH_AS(b.finish(), Contains("has no outputs"), Error);

  // A failed node() leaves the builder usable and the name free.
  int c = b.node("c", Conv2DParams{}, {x, w});
  CHECK(b.shape(c) == Shape{-1, 4, 6, 6});
  b.output(c);
  CHECK_THROWS_WITH_AS(b.output(c), Contains("listed twice"), Error);
  CHECK(Model::from_bytes(b.finish()).num_nodes() == 1);

  ModelBuilder fixed("fixed");  // a fixed batch stays fixed
  int fx = fixed.input("x", {2, 5});
  int fy = fixed.node("soft", SoftmaxParams{1}, {fx});
  CHECK(fixed.shape(fy) == Shape{2, 5});
  ModelBuilder moved = std::move(fixed);
  moved.output(fy);
  CHECK(Model::from_bytes(moved.finish()).outputs()[0].shape == Shape{2, 5});
}
