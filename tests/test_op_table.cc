// The op table (engine/ops/op_def.h): every op has one complete definition (a shape rule and a
// reference kernel; a file form exactly when a file can hold it), names come from INFER_OPS, and the
// questions the loader, builder and passes ask of an op are answered from it as the switches did.
#include <doctest/doctest.h>

#include <string>

#include "engine/ops/op_def.h"
#include "infer/error.h"
#include "shape_inference.h"

using namespace infer;
using detail::InputKinds;
using detail::op_def;

TEST_CASE("every op has one complete definition") {
  for (int i = 0; i < kNumOpTypes; ++i) {
    const OpType op = static_cast<OpType>(i);
    const detail::OpDef& def = op_def(op);
    CAPTURE(op_name(op));
    CHECK(bool(def.shape));
    CHECK(bool(def.reference));
    const bool in_files = i < kNumFileOpTypes;  // engine-internal ops (layout, squeeze_excite) have no file form
    CHECK(bool(def.read) == in_files);
    CHECK(bool(def.write) == in_files);
    if (def.inputs == InputKinds::DataThenParams) CHECK(def.roles[1] != nullptr);  // messages name them
  }
  CHECK_THROWS_AS(op_def(static_cast<OpType>(kNumOpTypes)), Error);
  CHECK(std::string(op_name(static_cast<OpType>(kNumOpTypes))) == "unknown");
}

TEST_CASE("op names, input kinds and epilogues come from the table") {
  CHECK(std::string(op_name(OpType::Conv2D)) == "conv2d");
  CHECK(std::string(op_name(OpType::DepthToSpace)) == "depth_to_space");
  CHECK(std::string(op_name(OpType::SqueezeExcite)) == "squeeze_excite");

  CHECK_FALSE(detail::is_parameter_input(OpType::Conv2D, 0));
  CHECK(detail::is_parameter_input(OpType::Conv2D, 1));
  CHECK(detail::is_parameter_input(OpType::BatchNorm, 4));
  CHECK_FALSE(detail::is_parameter_input(OpType::Concat, 1));
  CHECK_FALSE(detail::is_parameter_input(OpType::Binary, 1));
  CHECK(detail::any_input_kind(OpType::Binary));
  CHECK_FALSE(detail::any_input_kind(OpType::Add));
  CHECK(std::string(detail::input_role(OpType::BatchNorm, 3)) == "mean");
  CHECK(detail::input_role(OpType::Conv2D, 3) == nullptr);

  Conv2DParams conv;
  conv.activation = {ActivationKind::Clip, 0.f, 6.f};
  CHECK(fused_activation(conv).kind == ActivationKind::Clip);
  CHECK(fused_activation(conv).beta == 6.f);
  ConvPool2DParams conv_pool;
  conv_pool.conv.activation.kind = ActivationKind::Tanh;
  CHECK(fused_activation(conv_pool).kind == ActivationKind::Tanh);
  // A standalone activation is the op itself, not a fused epilogue.
  CHECK(fused_activation(ActivationParams{}).kind == ActivationKind::None);
  CHECK(fused_activation(FlattenParams{}).kind == ActivationKind::None);
}
