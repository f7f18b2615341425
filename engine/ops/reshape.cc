// reshape: a per-sample target shape (the batch dimension is kept; at most one -1, inferred), at most
// kMaxRank dims in a file. Only relabels the shape: 0 FLOPs.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::Reshape* t = node.options_as_Reshape();
  ReshapeParams p;
  if (t->shape()) {
    check_aligned(t->shape(), where + ": field shape");
    if (t->shape()->size() > kMaxRank)
      throw Error(where + ": field shape has " + std::to_string(t->shape()->size()) + " dims (at most " +
                  std::to_string(kMaxRank) + ")");
    p.shape.assign(t->shape()->begin(), t->shape()->end());
  }
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto shape = fbb.CreateVector(std::get<ReshapeParams>(params).shape);
  return {fb::Op::Reshape, fb::CreateReshape(fbb, shape).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<ReshapeParams>(params);
  in.expect_count(1, 1);
  const Shape& x = in[0];
  if (x.empty()) fail(where, "input 0 is a scalar but must have a batch dimension");
  int64_t per_sample = 1;  // the dims after the batch (no division by x[0], whatever the callers check)
  for (size_t i = 1; i < x.size(); ++i) per_sample *= x[i];  // x is bounded: no overflow
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < p.shape.size(); ++i) {
    const int64_t d = p.shape[i];
    const std::string field = "field shape[" + std::to_string(i) + "]";
    if (d == -1) {
      if (unknown >= 0) fail(where, field + " is a second -1 (at most one dimension is inferred)");
      unknown = static_cast<int>(i);
    } else if (d < 1) {
      fail(where, field + " must be > 0 or -1 (got " + std::to_string(d) + ")");
    } else {
      if (d > kMaxShapeElements / known) fail(where, "field shape has more than 2^40 elements");
      known *= d;
    }
  }
  Shape out;
  out.push_back(x[0]);
  out.insert(out.end(), p.shape.begin(), p.shape.end());
  if (unknown >= 0) {
    if (per_sample % known != 0)
      fail(where, "field shape " + shape_str(p.shape) + " cannot hold " + std::to_string(per_sample) +
                      " elements per sample (input 0 is " + shape_str(x) + ")");
    out[static_cast<size_t>(unknown) + 1] = per_sample / known;
  } else if (known != per_sample) {
    fail(where, "field shape " + shape_str(p.shape) + " has " + std::to_string(known) +
                    " elements per sample but input 0 (" + shape_str(x) + ") has " + std::to_string(per_sample));
  }
  return {out};
}

}  // namespace

constinit const OpDef reshape_op{
    .read = read,
    .write = write,
    .shape = shape,
    .reference = ref::run_reshape,
};

}  // namespace infer::detail
