// binary: y = act(a <add|sub|mul|div> b) with NumPy / ONNX multidirectional broadcasting. Either input
// may be a constant; activations have equal rank and a constant never reaches the batch axis, so dim 0
// of the output stays the batch. Cost: one FLOP per output element; bytes count the inputs as stored.
#include <algorithm>

#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::Binary* t = node.options_as_Binary();
  const int kind = static_cast<int>(t->kind());
  if (kind < static_cast<int>(fb::BinaryKind::MIN) || kind > static_cast<int>(fb::BinaryKind::MAX))
    throw Error(where + ": field kind has unknown value " + std::to_string(kind));
  BinaryParams p;
  p.kind = static_cast<BinaryKind>(kind);
  p.activation =
      read_activation(t->activation(), t->activation_alpha(), t->activation_beta(), where, "activation");
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<BinaryParams>(params);
  return {fb::Op::Binary, fb::CreateBinary(fbb, static_cast<fb::BinaryKind>(p.kind), fb_kind(p.activation.kind),
                                           p.activation.alpha, p.activation.beta)
                              .Union()};
}

// With `constant` (which inputs are constants; the loader, the builder and the session know it) also
// the batch rules: activations have equal rank, and a constant never reaches the batch axis.
std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>* constant) {
  const auto& p = std::get<BinaryParams>(params);
  in.expect_count(2, 2);
  check_activation(where, "activation", p.activation);
  check_enum(where, "kind", static_cast<int>(p.kind), static_cast<int>(BinaryKind::Div));
  const Shape &a = in[0], &b = in[1];
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t da = d < rank - a.size() ? 1 : a[d - (rank - a.size())];
    const int64_t db = d < rank - b.size() ? 1 : b[d - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(where, "input 1 has shape " + shape_str(b) + " which does not broadcast with input 0's " +
                      shape_str(a) + " (dim " + std::to_string(d) + " of the aligned shapes: " +
                      std::to_string(da) + " vs " + std::to_string(db) + "; each pair must be equal or 1)");
    out[d] = da == 1 ? db : da;
  }
  if (constant && constant->size() == 2) {
    const bool ca = (*constant)[0], cb = (*constant)[1];
    if (ca && cb) fail(where, "both inputs are constants (at least one must be an activation)");
    if (!ca && !cb && a.size() != b.size())
      fail(where, "input 1 has rank " + std::to_string(b.size()) + " but input 0 has rank " +
                      std::to_string(a.size()) + " (activations must have equal rank: dim 0 is the batch)");
    const size_t act_rank = ca ? b.size() : a.size();
    for (size_t i = 0; i < 2; ++i) {
      if (!(*constant)[i]) continue;
      const Shape& c = in[i];
      if (c.size() > act_rank)
        fail(where, "input " + std::to_string(i) + " (constant) has shape " + shape_str(c) +
                        ", of rank above the " + "activation's " + std::to_string(act_rank) +
                        " (a constant may not add dims before the batch)");
      if (c.size() == act_rank && !c.empty() && c[0] != 1)
        fail(where, "input " + std::to_string(i) + " (constant) has shape " + shape_str(c) + " with dim 0 " +
                        std::to_string(c[0]) + " (a constant's dim 0 is the batch axis and must be 1)");
    }
  }
  return {out};
}

double flops(const NodeDesc& node) { return numel_f(output_shape(node)); }

Activation activation(const OpParams& params) { return std::get<BinaryParams>(params).activation; }

}  // namespace

constinit const OpDef binary_op{
    .read = read,
    .write = write,
    .inputs = InputKinds::Any,
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .reference = ref::run_binary,
};

}  // namespace infer::detail
