// depth_to_space: x [N,C,H,W] -> [N, C/b^2, H b, W b] (C % b^2 == 0, 1 <= b <= 4096), DCR or CRD
// (PixelShuffle) channel order. A permutation: 0 FLOPs.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

// mode's range is checked by the shape rule.
OpParams read(const fb::Node& node, const std::string&) {
  const fb::DepthToSpace* t = node.options_as_DepthToSpace();
  return DepthToSpaceParams{t->block(), static_cast<DepthToSpaceMode>(t->mode())};
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<DepthToSpaceParams>(params);
  return {fb::Op::DepthToSpace,
          fb::CreateDepthToSpace(fbb, p.block, static_cast<fb::DepthToSpaceMode>(p.mode)).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<DepthToSpaceParams>(params);
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  if (p.block < 1 || p.block > 4096)
    fail(where, "field block must be in [1, 4096] (got " + std::to_string(p.block) + ")");
  check_enum(where, "mode", static_cast<int>(p.mode), static_cast<int>(DepthToSpaceMode::CRD));
  const int64_t bb = int64_t(p.block) * p.block;
  if (x[1] % bb != 0)
    fail(where, "input 0 has " + std::to_string(x[1]) + " channels, not a multiple of block^2 = " +
                    std::to_string(bb));
  return {{x[0], x[1] / bb, x[2] * p.block, x[3] * p.block}};  // same element count as x: bounded
}

}  // namespace

constinit const OpDef depth_to_space_op{
    .read = read,
    .write = write,
    .shape = shape,
    .reference = ref::run_depth_to_space,
};

}  // namespace infer::detail
