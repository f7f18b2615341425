// pad2d: x [N,C,H,W] -> [N,C,H+top+bottom,W+left+right], constant (a fill value), reflect (pad < size
// on that axis) or edge (a non-empty plane). Only copies: 0 FLOPs.
#include <cmath>

#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::Pad2D* t = node.options_as_Pad2D();
  const int mode = static_cast<int>(t->mode());
  if (mode < static_cast<int>(fb::PadMode::MIN) || mode > static_cast<int>(fb::PadMode::MAX))
    throw Error(where + ": field mode has unknown value " + std::to_string(mode));
  Pad2DParams p;
  p.mode = static_cast<PadMode>(mode);
  p.pad = read_padding(t->padding());
  p.value = t->value();
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<Pad2DParams>(params);
  const fb::Padding pad = fb_padding(p.pad);
  return {fb::Op::Pad2D, fb::CreatePad2D(fbb, static_cast<fb::PadMode>(p.mode), &pad, p.value).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<Pad2DParams>(params);
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  check_enum(where, "mode", static_cast<int>(p.mode), static_cast<int>(PadMode::Edge));
  if (!std::isfinite(p.value)) fail(where, "field value must be finite");
  check_padding(where, "", p.pad, 0, 0, false);
  if (p.mode == PadMode::Reflect) {  // a mirror never repeats the border: pad <= size - 1
    const struct { const char* name; int value; int64_t size; const char* axis; } sides[] = {
        {"top", p.pad.top, x[2], "height"}, {"left", p.pad.left, x[3], "width"},
        {"bottom", p.pad.bottom, x[2], "height"}, {"right", p.pad.right, x[3], "width"}};
    for (const auto& s : sides)
      if (s.value > 0 && s.value >= s.size)
        fail(where, std::string("field padding.") + s.name + " " + std::to_string(s.value) +
                        " must be < input " + s.axis + " " + std::to_string(s.size) + " in reflect mode");
  }
  if ((p.mode == PadMode::Edge) && (x[2] == 0 || x[3] == 0) &&
      (p.pad.top || p.pad.left || p.pad.bottom || p.pad.right))
    fail(where, "edge padding needs a non-empty input plane (got " + shape_str(x) + ")");
  const int64_t h = x[2] + p.pad.top + p.pad.bottom;  // x <= 2^40 and pads are int: no overflow
  const int64_t w = x[3] + p.pad.left + p.pad.right;
  return {{x[0], x[1], h, w}};
}

}  // namespace

constinit const OpDef pad2d_op{
    .read = read,
    .write = write,
    .shape = shape,
    .reference = ref::run_pad2d,
};

}  // namespace infer::detail
