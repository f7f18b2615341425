// concat: one or more inputs joined along an axis that keeps the batch (equal dims elsewhere). Only
// copies: 0 FLOPs.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string&) {
  return ConcatParams{node.options_as_Concat()->axis()};
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  return {fb::Op::Concat, fb::CreateConcat(fbb, std::get<ConcatParams>(params).axis).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  in.expect_count(1, SIZE_MAX);
  const Shape& first = in[0];
  check_axis(where, std::get<ConcatParams>(params).axis, first.size());
  const size_t axis = static_cast<size_t>(std::get<ConcatParams>(params).axis);
  Shape out = first;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& s = in[i];
    bool same = s.size() == first.size();
    for (size_t d = 0; same && d < s.size(); ++d) same = d == axis || s[d] == first[d];
    if (!same)
      fail(where, "input " + std::to_string(i) + " has shape " + shape_str(s) + " but input 0 has " +
                      shape_str(first) + " (concat needs equal dims except axis " + std::to_string(axis) + ")");
    if (s[axis] > kMaxShapeElements - out[axis]) fail(where, "output has more than 2^40 elements");
    out[axis] += s[axis];
  }
  return {out};
}

}  // namespace

constinit const OpDef concat_op{
    .read = read,
    .write = write,
    .shape = shape,
    .reference = ref::run_concat,
};

}  // namespace infer::detail
