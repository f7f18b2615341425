// Shape inference: every op's output shape (odd sizes, asymmetric padding, transposed convs with
// output_padding) and the parameter / input errors, each checked for the field it must name; then
// whole-graph inference for a batch, including the declared-shape check.
#include <doctest/doctest.h>

#include <limits>
#include <cmath>

#include "infer/error.h"
#include "shape_inference.h"

using infer::Error;
using infer::Shape;
using infer::detail::infer_node_shapes;
using namespace infer;

namespace {

const std::string kWhere = "m.fb: node 3 'n' (op)";

Shape one(const OpParams& p, const std::vector<Shape>& in) {
  auto out = infer_node_shapes(p, in, kWhere);
  REQUIRE(out.size() == 1);
  return out[0];
}

Conv2DParams conv(int stride, int pad) {
  Conv2DParams p;
  p.stride_h = p.stride_w = stride;
  p.pad = {pad, pad, pad, pad};
  return p;
}

ConvTranspose2DParams tconv(int stride, int pad, int output_padding = 0) {
  ConvTranspose2DParams p;
  p.stride_h = p.stride_w = stride;
  p.pad = {pad, pad, pad, pad};
  p.output_padding_h = p.output_padding_w = output_padding;
  return p;
}

Pool2DParams pool(PoolKind kind, int k, int s, int pad = 0) {
  Pool2DParams p;
  p.kind = kind;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad = {pad, pad, pad, pad};
  return p;
}

}  // namespace

TEST_CASE("conv2d output sizes") {
  CHECK(one(conv(1, 1), {{1, 3, 8, 8}, {4, 3, 3, 3}}) == Shape{1, 4, 8, 8});
  CHECK(one(conv(2, 1), {{1, 3, 7, 9}, {8, 3, 3, 3}, {8}}) == Shape{1, 8, 4, 5});
  CHECK(one(conv(4, 2), {{2, 3, 224, 224}, {64, 3, 11, 11}}) == Shape{2, 64, 55, 55});
  CHECK(one(conv(1, 0), {{1, 6, 14, 14}, {16, 6, 5, 5}}) == Shape{1, 16, 10, 10});
  // Asymmetric padding and a non-square kernel.
  Conv2DParams p;
  p.pad = {0, 1, 2, 0};
  p.stride_h = 2;
  CHECK(one(p, {{1, 1, 5, 6}, {2, 1, 3, 2}}) == Shape{1, 2, 3, 6});
}

TEST_CASE("conv2d groups and dilation") {
  using doctest::Contains;
  Conv2DParams p = conv(1, 1);
  p.groups = 32;  // depthwise 3x3
  CHECK(one(p, {{2, 32, 9, 9}, {32, 1, 3, 3}, {32}}) == Shape{2, 32, 9, 9});
  p.stride_h = p.stride_w = 2;
  CHECK(one(p, {{1, 32, 9, 9}, {64, 1, 3, 3}}) == Shape{1, 64, 5, 5});  // channel multiplier 2
  p = conv(1, 0);
  p.groups = 4;
  CHECK(one(p, {{1, 12, 5, 5}, {20, 3, 3, 3}}) == Shape{1, 20, 3, 3});
  // dilation 2: the 3x3 kernel spans 5; (9 + 2*2 - 5) / 1 + 1 = 9
  p = conv(1, 2);
  p.dilation_h = p.dilation_w = 2;
  CHECK(one(p, {{1, 3, 9, 9}, {4, 3, 3, 3}}) == Shape{1, 4, 9, 9});
  p = conv(2, 0);
  p.dilation_w = 3;  // width: (10 - 7) / 2 + 1 = 2; height: (10 - 3) / 2 + 1 = 4
  CHECK(one(p, {{1, 3, 10, 10}, {4, 3, 3, 3}}) == Shape{1, 4, 4, 2});
  p = conv(1, 3);  // padding 3 < dilated kernel 5 is fine
  p.dilation_h = p.dilation_w = 2;
  CHECK(one(p, {{1, 1, 4, 4}, {1, 1, 3, 3}}) == Shape{1, 1, 6, 6});

  p = conv(1, 0);
  p.groups = 0;
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 8, 8}, {4, 4, 3, 3}}), Contains("field groups must be > 0 (got 0)"),
                       Error);
  p.groups = 3;
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 8, 8}, {6, 1, 3, 3}}),
                       Contains("field groups 3 must divide input channels 4 and output channels 6"),
                       Error);
  p.groups = 2;
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 8, 8}, {5, 2, 3, 3}}),
                       Contains("must divide input channels 4 and output channels 5"), Error);
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 8, 8}, {4, 4, 3, 3}}),
                       Contains("has 4 input channels per group but input 0 has 4 in 2 groups"), Error);
  p = conv(1, 0);
  p.dilation_h = 0;
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 8, 8}, {4, 4, 3, 3}}), Contains("field dilation_h must be > 0"),
                       Error);
  p = conv(1, 0);
  p.dilation_h = 4;  // 3x3 spans 9 > 8
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 8, 8}, {4, 4, 3, 3}}),
                       Contains("kernel height 9 is larger than the padded input height 8"), Error);
  // conv_pool2d keeps groups and dilation 1
  ConvPool2DParams cp;
  cp.conv = conv(1, 0);
  cp.conv.groups = 2;
  CHECK_THROWS_WITH_AS(one(cp, {{1, 4, 8, 8}, {4, 2, 3, 3}}), Contains("field conv.groups must be 1 (got 2)"),
                       Error);
  cp.conv.groups = 1;
  cp.conv.dilation_w = 2;
  CHECK_THROWS_WITH_AS(one(cp, {{1, 4, 8, 8}, {4, 4, 3, 3}}),
                       Contains("field conv.dilation_w must be 1 (dilation 2 is not supported)"), Error);
}

TEST_CASE("conv_pool2d output sizes (floor after the conv)") {
  ConvPool2DParams p;
  p.conv = conv(1, 2);
  p.pool = 2;
  CHECK(one(p, {{1, 1, 28, 28}, {6, 1, 5, 5}, {6}}) == Shape{1, 6, 14, 14});
  CHECK(one(p, {{1, 1, 29, 27}, {6, 1, 5, 5}}) == Shape{1, 6, 14, 13});
  p.pool = 3;
  CHECK(one(p, {{3, 2, 10, 10}, {4, 2, 3, 3}}) == Shape{3, 4, 4, 4});  // conv: 12, pool: 4
}

TEST_CASE("conv_transpose2d output sizes") {
  CHECK(one(tconv(1, 0), {{1, 100, 1, 1}, {100, 1024, 4, 4}}) == Shape{1, 1024, 4, 4});
  CHECK(one(tconv(2, 1), {{1, 1024, 4, 4}, {1024, 512, 4, 4}, {512}}) == Shape{1, 512, 8, 8});
  CHECK(one(tconv(2, 1), {{2, 128, 32, 32}, {128, 3, 4, 4}}) == Shape{2, 3, 64, 64});
  // (5-1)*2 - 2 + 3 + 1 = 10: output_padding makes the size even.
  CHECK(one(tconv(2, 1, 1), {{1, 2, 5, 5}, {2, 3, 3, 3}}) == Shape{1, 3, 10, 10});
  CHECK(one(tconv(2, 1, 0), {{1, 2, 5, 5}, {2, 3, 3, 3}}) == Shape{1, 3, 9, 9});
  ConvTranspose2DParams p = tconv(3, 0);
  p.stride_w = 2;
  p.output_padding_h = 2;
  p.pad = {1, 0, 0, 2};
  // H: (3-1)*3 - 1 + 2 + 2 = 9; W: (4-1)*2 - 2 + 5 = 9
  CHECK(one(p, {{1, 1, 3, 4}, {1, 1, 2, 5}}) == Shape{1, 1, 9, 9});
}

TEST_CASE("conv_transpose2d groups and dilation") {
  using doctest::Contains;
  // weight [C_in, C_out/groups, KH, KW]: C_out = w[1] * groups
  ConvTranspose2DParams p = tconv(2, 1);
  p.groups = 32;  // depthwise-transposed k4 s2 p1: 8 -> 16
  CHECK(one(p, {{1, 32, 8, 8}, {32, 1, 4, 4}, {32}}) == Shape{1, 32, 16, 16});
  p.groups = 4;
  CHECK(one(p, {{2, 8, 8, 8}, {8, 3, 4, 4}, {12}}) == Shape{2, 12, 16, 16});
  CHECK_THROWS_WITH_AS(one(p, {{2, 8, 8, 8}, {8, 3, 4, 4}, {3}}), Contains("must be [12] (C_out)"), Error);
  // dilation 2: the 3x3 kernel spans 5; (4-1)*2 - 2 + 5 = 9
  p = tconv(2, 1);
  p.dilation_h = p.dilation_w = 2;
  CHECK(one(p, {{1, 2, 4, 4}, {2, 3, 3, 3}}) == Shape{1, 3, 9, 9});
  p.dilation_w = 3;  // W: (4-1)*2 - 2 + 7 = 11
  CHECK(one(p, {{1, 2, 4, 4}, {2, 3, 3, 3}}) == Shape{1, 3, 9, 11});
  // output_padding below max(stride, dilation) (PyTorch's rule): 2 < dilation 3 with stride 2
  p.output_padding_w = 2;
  CHECK(one(p, {{1, 2, 4, 4}, {2, 3, 3, 3}}) == Shape{1, 3, 9, 13});
  p.output_padding_w = 3;
  CHECK_THROWS_WITH_AS(one(p, {{1, 2, 4, 4}, {2, 3, 3, 3}}),
                       Contains("field output_padding_w must be < dilation 3 (got 3)"), Error);
  p = tconv(1, 0);
  p.groups = 0;
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 4, 4}, {4, 2, 3, 3}}), Contains("field groups must be > 0 (got 0)"),
                       Error);
  p.groups = 3;
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 4, 4}, {4, 2, 3, 3}}),
                       Contains("field groups 3 must divide input channels 4"), Error);
  p.groups = 2;  // the weight's dim 0 is C_in, not C_in/groups
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 4, 4}, {2, 2, 3, 3}}),
                       Contains("has 2 input channels but input 0 has 4"), Error);
  p.groups = 1;
  p.dilation_w = 1 << 30;  // the dilated kernel would overflow
  CHECK_THROWS_WITH_AS(one(p, {{1, 4, 4, 4}, {4, 2, 3, 1 << 12}}),
                       Contains("dilated kernel is too large"), Error);
}

TEST_CASE("pool2d output sizes") {
  CHECK(one(pool(PoolKind::Max, 3, 2), {{1, 64, 55, 55}}) == Shape{1, 64, 27, 27});
  CHECK(one(pool(PoolKind::Max, 2, 2), {{1, 3, 7, 7}}) == Shape{1, 3, 3, 3});
  CHECK(one(pool(PoolKind::Average, 3, 2, 1), {{1, 2, 7, 8}}) == Shape{1, 2, 4, 4});
  CHECK(one(pool(PoolKind::Average, 3, 1, 1), {{1, 2, 5, 5}}) == Shape{1, 2, 5, 5});
  CHECK(one(pool(PoolKind::Max, 4, 4), {{1, 1, 4, 4}}) == Shape{1, 1, 1, 1});
}

TEST_CASE("resize output sizes and parameter errors") {
  ResizeParams p;
  p.scale_h = p.scale_w = 2;
  CHECK(one(p, {{3, 4, 5, 7}}) == Shape{3, 4, 10, 14});
  p.scale_h = 0.5f, p.scale_w = 1.5f;  // floor(4.5), floor(10.5)
  CHECK(one(p, {{1, 2, 9, 7}}) == Shape{1, 2, 4, 10});
  p.out_h = 7, p.out_w = 9;  // an explicit size wins; the scales still map coordinates
  CHECK(one(p, {{1, 2, 3, 4}}) == Shape{1, 2, 7, 9});
  ResizeParams q;
  q.out_h = 5;
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 3, 3}}), doctest::Contains("needs field out_w or scale_w > 0"), Error);
  q.out_w = -2;
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 3, 3}}), doctest::Contains("field out_w must be >= 0 (got -2)"), Error);
  q.out_w = 0, q.scale_w = 0.2f;
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 3, 3}}), doctest::Contains("output width floor(3 * 0.2"), Error);
  q.scale_w = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 3, 3}}), doctest::Contains("field scale_w must be finite"), Error);
  q.scale_w = 1;
  q.coord = static_cast<ResizeCoord>(9);
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 3, 3}}), doctest::Contains("field coord has unknown value 9"), Error);
  q.coord = ResizeCoord::Asymmetric;
  q.mode = static_cast<ResizeMode>(2);
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 3, 3}}), doctest::Contains("field mode has unknown value 2"), Error);
  q.mode = ResizeMode::Linear;
  q.nearest = static_cast<ResizeNearest>(4);
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 3, 3}}), doctest::Contains("field nearest has unknown value 4"), Error);
  q.nearest = ResizeNearest::Floor;
  CHECK_THROWS_WITH_AS(one(q, {{1, 3, 3}}), doctest::Contains("[N,C,H,W]"), Error);
}

TEST_CASE("depth_to_space output sizes and parameter errors") {
  CHECK(one(DepthToSpaceParams{2, DepthToSpaceMode::CRD}, {{3, 8, 3, 5}}) == Shape{3, 2, 6, 10});
  CHECK(one(DepthToSpaceParams{3, DepthToSpaceMode::DCR}, {{1, 9, 1, 2}}) == Shape{1, 1, 3, 6});
  CHECK(one(DepthToSpaceParams{1, DepthToSpaceMode::DCR}, {{1, 5, 2, 2}}) == Shape{1, 5, 2, 2});
  CHECK_THROWS_WITH_AS(one(DepthToSpaceParams{2, DepthToSpaceMode::DCR}, {{1, 6, 2, 2}}),
                       doctest::Contains("input 0 has 6 channels, not a multiple of block^2 = 4"), Error);
  CHECK_THROWS_WITH_AS(one(DepthToSpaceParams{0, DepthToSpaceMode::DCR}, {{1, 4, 2, 2}}),
                       doctest::Contains("field block must be in [1, 4096] (got 0)"), Error);
  CHECK_THROWS_WITH_AS(one(DepthToSpaceParams{2, static_cast<DepthToSpaceMode>(5)}, {{1, 4, 2, 2}}),
                       doctest::Contains("field mode has unknown value 5"), Error);
}

TEST_CASE("pool2d output sizes with ceil_mode (PyTorch's rule)") {
  const auto ceil = [](Pool2DParams p) {
    p.ceil_mode = true;
    return p;
  };
  CHECK(one(ceil(pool(PoolKind::Max, 3, 2)), {{1, 64, 112, 112}}) == Shape{1, 64, 56, 56});  // GoogLeNet; floor 55
  CHECK(one(ceil(pool(PoolKind::Max, 3, 2)), {{1, 64, 55, 55}}) == Shape{1, 64, 27, 27});    // exact: as floor
  CHECK(one(ceil(pool(PoolKind::Max, 3, 2)), {{2, 3, 10, 9}}) == Shape{2, 3, 5, 4});
  CHECK(one(ceil(pool(PoolKind::Average, 3, 2, 1)), {{1, 1, 4, 4}}) == Shape{1, 1, 3, 3});  // floor 2
  // ceil gives 4 on 5 rows with k 2, s 2, pad 1, but that window would start at row 6 = H + top, wholly
  // in the bottom padding: dropped, 3. On 7 columns likewise 5 -> 4.
  CHECK(one(ceil(pool(PoolKind::Average, 2, 2, 1)), {{1, 2, 5, 7}}) == Shape{1, 2, 3, 4});
  CHECK(one(ceil(pool(PoolKind::Max, 1, 3)), {{1, 1, 7, 6}}) == Shape{1, 1, 3, 2});  // 1, 4, 7 | 1, 4
  CHECK_THROWS_WITH_AS(one(ceil(pool(PoolKind::Max, 2, 2)), {{1, 1, 1, 1}}),
                       doctest::Contains("kernel height 2 is larger than the padded input height 1"), Error);
}

TEST_CASE("dense, batchnorm, activation, add") {
  CHECK(one(DenseParams{}, {{2, 400}, {120, 400}, {120}}) == Shape{2, 120});
  CHECK(one(DenseParams{}, {{1, 3}, {1, 3}}) == Shape{1, 1});
  CHECK(one(BatchNormParams{}, {{1, 4, 5, 5}, {4}, {4}, {4}, {4}}) == Shape{1, 4, 5, 5});
  CHECK(one(BatchNormParams{}, {{3, 7}, {7}, {7}, {7}, {7}}) == Shape{3, 7});
  CHECK(one(ActivationParams{}, {{2, 3, 1, 5}}) == Shape{2, 3, 1, 5});
  CHECK(one(AddParams{}, {{2, 3, 4, 5}, {2, 3, 4, 5}}) == Shape{2, 3, 4, 5});
}

TEST_CASE("flatten, reshape, softmax, concat") {
  CHECK(one(FlattenParams{1}, {{2, 16, 5, 5}}) == Shape{2, 400});
  CHECK(one(FlattenParams{2}, {{2, 16, 5, 5}}) == Shape{2, 16, 25});
  CHECK(one(FlattenParams{3}, {{2, 16, 5, 5}}) == Shape{2, 16, 5, 5});
  CHECK(one(ReshapeParams{{16, -1, 5}}, {{2, 400}}) == Shape{2, 16, 5, 5});
  CHECK(one(ReshapeParams{{400}}, {{3, 16, 5, 5}}) == Shape{3, 400});
  CHECK(one(ReshapeParams{{-1}}, {{3, 16, 5, 5}}) == Shape{3, 400});
  CHECK(one(ReshapeParams{{100, 1, 1}}, {{1, 100}}) == Shape{1, 100, 1, 1});
  // A batch of 0 is refused, in one line, before any shape rule runs (reshape's never divides by it).
  CHECK_THROWS_WITH_AS(one(ReshapeParams{{-1}}, {{0, 16, 5, 5}}), doctest::Contains("dimension 0 is not >= 1"), Error);
  CHECK(one(SoftmaxParams{1}, {{2, 10}}) == Shape{2, 10});
  CHECK(one(SoftmaxParams{3}, {{2, 10, 3, 3}}) == Shape{2, 10, 3, 3});
  CHECK(one(ConcatParams{1}, {{1, 2, 4, 4}, {1, 3, 4, 4}, {1, 1, 4, 4}}) == Shape{1, 6, 4, 4});
  CHECK(one(ConcatParams{3}, {{1, 2, 4, 4}, {1, 2, 4, 1}}) == Shape{1, 2, 4, 5});
  CHECK(one(ConcatParams{1}, {{5, 7}}) == Shape{5, 7});
}

TEST_CASE("parameter errors name the field") {
  using doctest::Contains;
  Conv2DParams p = conv(1, 0);
  p.stride_h = 0;
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}),
                       "m.fb: node 3 'n' (op): field stride_h must be > 0 (got 0)", Error);
  p = conv(1, 0);
  p.stride_w = -2;
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}), Contains("field stride_w must be > 0"),
                       Error);
  p = conv(1, 3);
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}),
                       Contains("field padding.top must be < kernel height 3 (got 3)"), Error);
  p = conv(1, 0);
  p.pad.right = -1;
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}),
                       Contains("field padding.right must be >= 0 (got -1)"), Error);
  p = conv(1, 0);
  p.dilation_w = -1;
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}),
                       Contains("field dilation_w must be > 0 (got -1)"), Error);
  p = conv(1, 0);
  // past the file's kinds: PRelu (15, engine-internal, the fuse_prelu pass's) wants its slope input,
  // 16 is no kind at all
  p.activation.kind = static_cast<ActivationKind>(kNumActivationKinds);
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}), Contains("expects 4 inputs, got 2"), Error);
  p.activation.kind = static_cast<ActivationKind>(kNumActivationKinds + 1);
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}),
                       Contains("field activation has unknown value 16"), Error);
  p = conv(1, 0);
  p.activation = {ActivationKind::Clip, 6.5f, 6.f};
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}),
                       Contains("field activation_alpha (clip min 6.5) must be <= activation_beta (clip max 6)"),
                       Error);
  p.activation = {ActivationKind::Clip, 6.f, 6.f};  // min == max: a constant, allowed
  CHECK_NOTHROW(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}));
  p.activation = {ActivationKind::HardSigmoid, 0.2f, INFINITY};
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}), Contains("field activation_beta must be finite"),
                       Error);
  ActivationParams clip;
  clip.activation = {ActivationKind::Clip, 1.f, -1.f};
  CHECK_THROWS_WITH_AS(one(clip, {{1, 3}}), Contains("field alpha (clip min 1) must be <= beta (clip max -1)"),
                       Error);
  clip.activation = {ActivationKind::Silu, 0.01f, std::nanf("")};
  CHECK_THROWS_WITH_AS(one(clip, {{1, 3}}), Contains("field beta must be finite"), Error);

  p = conv(1, 0);
  p.activation.alpha = std::nanf("");
  CHECK_THROWS_WITH_AS(one(p, {{1, 3, 8, 8}, {4, 3, 3, 3}}),
                       Contains("field activation_alpha must be finite"), Error);
  ActivationParams ap;
  ap.activation.alpha = INFINITY;
  CHECK_THROWS_WITH_AS(one(ap, {{1, 3}}), Contains("field alpha must be finite"), Error);

  ConvTranspose2DParams t = tconv(2, 1, 2);
  CHECK_THROWS_WITH_AS(one(t, {{1, 2, 4, 4}, {2, 3, 4, 4}}),
                       Contains("field output_padding_h must be < stride 2 (got 2)"), Error);
  t = tconv(2, 1);
  t.output_padding_w = -1;
  CHECK_THROWS_WITH_AS(one(t, {{1, 2, 4, 4}, {2, 3, 4, 4}}),
                       Contains("field output_padding_w must be >= 0"), Error);
  t = tconv(0, 0);
  CHECK_THROWS_WITH_AS(one(t, {{1, 2, 4, 4}, {2, 3, 4, 4}}), Contains("field stride_h"), Error);
  t = tconv(1, 0);
  t.dilation_h = 0;
  CHECK_THROWS_WITH_AS(one(t, {{1, 2, 4, 4}, {2, 3, 4, 4}}), Contains("field dilation_h must be > 0 (got 0)"),
                       Error);
  t = tconv(1, 3);  // padding crops: (5-1) - 6 + 4 = 2 is fine, (1-1) - 6 + 4 is not
  CHECK(one(t, {{1, 2, 5, 5}, {2, 3, 4, 4}}) == Shape{1, 3, 2, 2});
  CHECK_THROWS_WITH_AS(one(t, {{1, 2, 1, 1}, {2, 3, 4, 4}}), Contains("dimension -2"), Error);

  Pool2DParams q = pool(PoolKind::Max, 0, 1);
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 4, 4}}), Contains("field kernel_h must be > 0 (got 0)"), Error);
  q = pool(PoolKind::Max, 2, 2, 2);
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 4, 4}}), Contains("field padding.top must be < kernel height 2"),
                       Error);
  q = pool(PoolKind::Max, 5, 1, 0);
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 4, 6}}),
                       Contains("kernel height 5 is larger than the padded input height 4"), Error);
  q = pool(static_cast<PoolKind>(7), 2, 2);
  CHECK_THROWS_WITH_AS(one(q, {{1, 1, 4, 4}}), Contains("field kind has unknown value 7"), Error);

  ConvPool2DParams cp;
  cp.pool = 0;
  CHECK_THROWS_WITH_AS(one(cp, {{1, 1, 8, 8}, {2, 1, 3, 3}}), Contains("field pool must be >= 1 (got 0)"),
                       Error);
  cp.pool = 7;
  CHECK_THROWS_WITH_AS(one(cp, {{1, 1, 8, 8}, {2, 1, 3, 3}}), Contains("smaller than the pool window 7"),
                       Error);
  cp.pool = 2;
  cp.conv.stride_h = 0;
  CHECK_THROWS_WITH_AS(one(cp, {{1, 1, 8, 8}, {2, 1, 3, 3}}), Contains("field conv.stride_h"), Error);

  BatchNormParams bn;
  bn.epsilon = -1;
  CHECK_THROWS_WITH_AS(one(bn, {{1, 2, 3, 3}, {2}, {2}, {2}, {2}}), Contains("field epsilon"), Error);
}

TEST_CASE("input errors name the input") {
  using doctest::Contains;
  CHECK_THROWS_WITH_AS(one(conv(1, 0), {{1, 4, 8, 8}, {4, 3, 3, 3}}),
                       "m.fb: node 3 'n' (op): input 1 (weight) has 3 input channels but input 0 has 4",
                       Error);
  CHECK_THROWS_WITH_AS(one(conv(1, 0), {{1, 3, 8, 8}}), Contains("expects 2 or 3 inputs, got 1"), Error);
  CHECK_THROWS_WITH_AS(one(conv(1, 0), {{1, 3, 8, 8}, {4, 3, 3}}),
                       Contains("input 1 (weight) has shape 4x3x3 but must have rank 4"), Error);
  CHECK_THROWS_WITH_AS(one(conv(1, 0), {{1, 3, 8, 8}, {4, 3, 3, 3}, {5}}),
                       Contains("input 2 (bias) has shape 5 but must be [4]"), Error);
  CHECK_THROWS_WITH_AS(one(conv(1, 0), {{1, 3, 2, 8}, {4, 3, 3, 3}}),
                       Contains("kernel height 3 is larger than the padded input height 2"), Error);
  CHECK_THROWS_WITH_AS(one(tconv(2, 1), {{1, 3, 4, 4}, {4, 3, 4, 4}}),
                       Contains("input 1 (weight) has 4 input channels but input 0 has 3"), Error);
  CHECK_THROWS_WITH_AS(one(tconv(2, 1), {{1, 3, 4, 4}, {3, 2, 4, 4}, {3}}),
                       Contains("input 2 (bias) has shape 3 but must be [2]"), Error);
  CHECK_THROWS_WITH_AS(one(DenseParams{}, {{1, 400}, {120, 401}}),
                       Contains("input 1 (weight) has 401 input features but input 0 has 400"), Error);
  CHECK_THROWS_WITH_AS(one(DenseParams{}, {{1, 2, 5, 5}, {120, 50}}), Contains("rank 2 [N,F_in]"), Error);
  CHECK_THROWS_WITH_AS(one(BatchNormParams{}, {{1, 4, 5, 5}, {4}, {4}, {4}}),
                       Contains("expects 5 inputs, got 4"), Error);
  CHECK_THROWS_WITH_AS(one(BatchNormParams{}, {{1, 4, 5, 5}, {4}, {4}, {3}, {4}}),
                       Contains("input 3 (mean) has shape 3 but must be [4]"), Error);
  CHECK_THROWS_WITH_AS(one(AddParams{}, {{1, 4}, {1, 5}}), Contains("input 1 has shape 1x5 but input 0 has 1x4"),
                       Error);
  CHECK_THROWS_WITH_AS(one(AddParams{}, {{1, 4}, {1, 4}, {1, 4}}), Contains("expects 2 inputs, got 3"), Error);
  CHECK_THROWS_WITH_AS(one(ConcatParams{1}, {}), Contains("expects at least 1 inputs, got 0"), Error);
  CHECK_THROWS_WITH_AS(one(ConcatParams{1}, {{1, 2, 4, 4}, {1, 2, 4, 5}}),
                       Contains("input 1 has shape 1x2x4x5 but input 0 has 1x2x4x4"), Error);
  CHECK_THROWS_WITH_AS(one(ConcatParams{4}, {{1, 2, 4, 4}}), Contains("field axis must be in [1, 3] (got 4)"),
                       Error);
  CHECK_THROWS_WITH_AS(one(ConcatParams{0}, {{1, 2, 4, 4}}), Contains("field axis"), Error);
  CHECK_THROWS_WITH_AS(one(SoftmaxParams{2}, {{1, 10}}), Contains("field axis must be in [1, 1] (got 2)"), Error);
  CHECK_THROWS_WITH_AS(one(FlattenParams{0}, {{1, 10, 2}}), Contains("field axis"), Error);
  CHECK_THROWS_WITH_AS(one(ReshapeParams{{-1, -1}}, {{1, 10}}), Contains("field shape[1] is a second -1"), Error);
  CHECK_THROWS_WITH_AS(one(ReshapeParams{{0, 10}}, {{1, 10}}), Contains("field shape[0] must be > 0 or -1"), Error);
  CHECK_THROWS_WITH_AS(one(ReshapeParams{{3, 3}}, {{1, 10}}), Contains("has 9 elements per sample"), Error);
  CHECK_THROWS_WITH_AS(one(ReshapeParams{{3, -1}}, {{1, 10}}), Contains("cannot hold 10 elements"), Error);
  CHECK_THROWS_WITH_AS(one(ActivationParams{}, {{1, 0, 3}}), Contains("input 0 has shape 1x0x3"), Error);
}

TEST_CASE("no size arithmetic overflows") {
  using doctest::Contains;
  const int64_t big = int64_t(1) << 40;
  CHECK_THROWS_WITH_AS(one(ActivationParams{}, {{big, big}}), Contains("more than 2^40 elements"), Error);
  CHECK_THROWS_WITH_AS(one(ActivationParams{}, {{INT64_MAX, INT64_MAX, 2}}),
                       Contains("more than 2^40 elements"), Error);
  // A valid 2^40-element input whose transposed conv would overflow (H-1)*stride.
  ConvTranspose2DParams t = tconv(1 << 30, 0);
  CHECK_THROWS_WITH_AS(one(t, {{1, 1, int64_t(1) << 20, int64_t(1) << 20}, {1, 1, 1, 1}}),
                       Contains("too large"), Error);
  // Output too large although each input is fine.
  CHECK_THROWS_WITH_AS(one(DenseParams{}, {{int64_t(1) << 30, 2}, {int64_t(1) << 20, 2}}),
                       Contains("output shape"), Error);
  CHECK_THROWS_WITH_AS(one(ReshapeParams{{big, big, -1}}, {{1, 4}}), Contains("more than 2^40"), Error);
}

TEST_CASE("infer_shapes: a graph for a batch, checked against the declared shapes") {
  using doctest::Contains;
  std::vector<float> w(4 * 3 * 3 * 3, 0.5f);
  detail::Graph g;
  g.origin = "g.fb";
  g.values.resize(3);
  g.values[0] = {"x", {-1, 3, 8, 8}, DType::F32, nullptr};
  g.values[1] = {"w", {4, 3, 3, 3}, DType::F32, w.data()};
  g.values[2] = {"y", {-1, 4, 4, 4}, DType::F32, nullptr};
  detail::Node n;
  n.name = "conv";
  n.params = conv(2, 1);
  n.inputs = {0, 1};
  n.outputs = {2};
  g.nodes.push_back(n);
  g.inputs = {0};
  g.outputs = {2};

  auto s = detail::infer_shapes(g, 3);
  REQUIRE(s.size() == 3);
  CHECK(s[0] == Shape{3, 3, 8, 8});
  CHECK(s[1] == Shape{4, 3, 3, 3});
  CHECK(s[2] == Shape{3, 4, 4, 4});
  CHECK(detail::infer_shapes(g, 1)[2] == Shape{1, 4, 4, 4});
  CHECK_THROWS_WITH_AS(detail::infer_shapes(g, 0), Contains("g.fb: batch must be"), Error);

  g.values[2].shape = {-1, 4, 5, 4};
  CHECK_THROWS_WITH_AS(detail::infer_shapes(g, 2),
                       "g.fb: node 0 'conv' (conv2d): output 0 'y' is declared -1x4x5x4 but the op "
                       "computes 2x4x4x4",
                       Error);
  g.values[2].shape = {2, 4, 4, 4};  // a fixed batch matches only that batch
  CHECK(detail::infer_shapes(g, 2)[2] == Shape{2, 4, 4, 4});
  CHECK_THROWS_WITH_AS(detail::infer_shapes(g, 3), Contains("node 0 'conv'"), Error);

  g.values[2].shape = {-1, 4, 4, 4};
  g.inputs.clear();  // x now has no value
  CHECK_THROWS_WITH_AS(detail::infer_shapes(g, 1), Contains("input 0 'x' has no value yet"), Error);
}
