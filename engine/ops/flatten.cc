// flatten: x [d0,...,dk] -> [d0,...,d(axis-1), d(axis)*...*dk] with 1 <= axis < rank (the batch is
// kept). Only relabels the shape: 0 FLOPs.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string&) {
  return FlattenParams{node.options_as_Flatten()->axis()};
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  return {fb::Op::Flatten, fb::CreateFlatten(fbb, std::get<FlattenParams>(params).axis).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<FlattenParams>(params);
  in.expect_count(1, 1);
  const Shape& x = in[0];
  check_axis(where, p.axis, x.size());
  Shape out(x.begin(), x.begin() + p.axis);
  int64_t rest = 1;
  for (size_t i = static_cast<size_t>(p.axis); i < x.size(); ++i) rest *= x[i];  // <= numel(x)
  out.push_back(rest);
  return {out};
}

}  // namespace

constinit const OpDef flatten_op{
    .read = read,
    .write = write,
    .shape = shape,
    .reference = ref::run_flatten,
};

}  // namespace infer::detail
