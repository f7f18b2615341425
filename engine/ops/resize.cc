// resize: nearest or bilinear resize of x [N,C,H,W] to an output size (or floor(size * scale)) with the
// coordinate and nearest-rounding modes of ResizeParams (infer/ops.h). Cost: linear 6 FLOPs per output
// element (4 taps, 3 lerps of a multiply-add each); nearest only copies (0).
#include <cmath>

#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

// Enum ranges are checked by the shape rule, with the node's name.
OpParams read(const fb::Node& node, const std::string&) {
  const fb::Resize* t = node.options_as_Resize();
  ResizeParams p;
  p.mode = static_cast<ResizeMode>(t->mode());
  p.coord = static_cast<ResizeCoord>(t->coord());
  p.nearest = static_cast<ResizeNearest>(t->nearest());
  p.out_h = t->out_h();
  p.out_w = t->out_w();
  p.scale_h = t->scale_h();
  p.scale_w = t->scale_w();
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<ResizeParams>(params);
  return {fb::Op::Resize,
          fb::CreateResize(fbb, static_cast<fb::ResizeMode>(p.mode), static_cast<fb::ResizeCoord>(p.coord),
                           static_cast<fb::ResizeNearest>(p.nearest), p.out_h, p.out_w, p.scale_h, p.scale_w)
              .Union()};
}

// One spatial axis: out if > 0, else floor(in * scale) (scale finite and > 0), >= 1.
int64_t resize_out(const std::string& where, const char* axis, int64_t in, int out, float scale) {
  const std::string o = std::string("out_") + axis, s = std::string("scale_") + axis;
  if (out < 0) fail(where, "field " + o + " must be >= 0 (got " + std::to_string(out) + ")");
  if (!std::isfinite(scale) || scale < 0)
    fail(where, "field " + s + " must be finite and >= 0 (got " + std::to_string(scale) + ")");
  if (out > 0) return out;
  if (scale == 0) fail(where, "needs field " + o + " or " + s + " > 0");
  const double v = std::floor(double(in) * double(scale));
  if (v < 1 || v > double(kMaxShapeElements))
    fail(where, "output " + std::string(axis == std::string("h") ? "height" : "width") + " floor(" +
                    std::to_string(in) + " * " + std::to_string(scale) + ") is not in [1, 2^40]");
  return static_cast<int64_t>(v);
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<ResizeParams>(params);
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  check_enum(where, "mode", static_cast<int>(p.mode), static_cast<int>(ResizeMode::Linear));
  check_enum(where, "coord", static_cast<int>(p.coord), static_cast<int>(ResizeCoord::PytorchHalfPixel));
  check_enum(where, "nearest", static_cast<int>(p.nearest), static_cast<int>(ResizeNearest::Ceil));
  Shape y{x[0], x[1], resize_out(where, "h", x[2], p.out_h, p.scale_h),
          resize_out(where, "w", x[3], p.out_w, p.scale_w)};
  std::string why;
  if (!bounded(y, &why, true)) fail(where, "output " + shape_str(y) + ": " + why);
  return {y};
}

double flops(const NodeDesc& node) {
  return std::get<ResizeParams>(node.params).mode == ResizeMode::Linear ? 6.0 * numel_f(output_shape(node)) : 0;
}

}  // namespace

constinit const OpDef resize_op{
    .read = read,
    .write = write,
    .shape = shape,
    .flops = flops,
    .reference = ref::run_resize,
};

}  // namespace infer::detail
