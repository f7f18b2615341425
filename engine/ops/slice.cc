// slice: elements start..end-1 of one axis that keeps the batch (0 <= start < end <= dim); other axes
// whole. Only copies: 0 FLOPs.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string&) {
  const fb::Slice* t = node.options_as_Slice();
  return SliceParams{t->axis(), t->start(), t->end()};
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<SliceParams>(params);
  return {fb::Op::Slice, fb::CreateSlice(fbb, p.axis, p.start, p.end).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<SliceParams>(params);
  in.expect_count(1, 1);
  const Shape& x = in[0];
  check_axis(where, p.axis, x.size());
  const int64_t dim = x[static_cast<size_t>(p.axis)];
  if (p.start < 0 || p.start >= p.end || p.end > dim)
    fail(where, "fields start " + std::to_string(p.start) + ", end " + std::to_string(p.end) +
                    " must satisfy 0 <= start < end <= " + std::to_string(dim) + " (axis " +
                    std::to_string(p.axis) + " of input 0)");
  Shape out = x;
  out[static_cast<size_t>(p.axis)] = p.end - p.start;
  return {out};
}

}  // namespace

constinit const OpDef slice_op{
    .read = read,
    .write = write,
    .shape = shape,
    .reference = ref::run_slice,
};

}  // namespace infer::detail
