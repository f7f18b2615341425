// pool2d: max or average pooling of x [N,C,H,W]: kernel, stride, padding (< kernel), count_include_pad
// and ceil_mode (PyTorch's output size, windows clipped at the padded border). Cost: one operation per
// window element of every output.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::Pool2D* t = node.options_as_Pool2D();
  const int kind = static_cast<int>(t->kind());
  if (kind < static_cast<int>(fb::PoolKind::MIN) || kind > static_cast<int>(fb::PoolKind::MAX))
    throw Error(where + ": field kind has unknown value " + std::to_string(kind));
  Pool2DParams p;
  p.kind = static_cast<PoolKind>(kind);
  p.kernel_h = t->kernel_h();
  p.kernel_w = t->kernel_w();
  p.stride_h = t->stride_h();
  p.stride_w = t->stride_w();
  p.pad = read_padding(t->padding());
  p.count_include_pad = t->count_include_pad();
  p.ceil_mode = t->ceil_mode();
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<Pool2DParams>(params);
  const fb::Padding pad = fb_padding(p.pad);
  return {fb::Op::Pool2D, fb::CreatePool2D(fbb, static_cast<fb::PoolKind>(p.kind), p.kernel_h, p.kernel_w,
                                           p.stride_h, p.stride_w, &pad, p.count_include_pad, p.ceil_mode)
                              .Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<Pool2DParams>(params);
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  check_enum(where, "kind", static_cast<int>(p.kind), static_cast<int>(PoolKind::Average));
  positive(where, "kernel_h", p.kernel_h);
  positive(where, "kernel_w", p.kernel_w);
  positive(where, "stride_h", p.stride_h);
  positive(where, "stride_w", p.stride_w);
  check_padding(where, "", p.pad, p.kernel_h, p.kernel_w, true);
  const int64_t h =
      window_out(where, "height", x[2], p.pad.top, p.pad.bottom, p.kernel_h, p.stride_h, p.ceil_mode);
  const int64_t w =
      window_out(where, "width", x[3], p.pad.left, p.pad.right, p.kernel_w, p.stride_w, p.ceil_mode);
  return {{x[0], x[1], h, w}};
}

double flops(const NodeDesc& node) {
  const auto& p = std::get<Pool2DParams>(node.params);
  return numel_f(output_shape(node)) * p.kernel_h * p.kernel_w;
}

}  // namespace

constinit const OpDef pool2d_op{
    .read = read,
    .write = write,
    .shape = shape,
    .flops = flops,
    .reference = ref::run_pool2d,
};

}  // namespace infer::detail
