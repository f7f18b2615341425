// prelu: y = x >= 0 ? x : slope * x, x [N,C,...] (rank >= 2), slope a constant [C] (per channel, axis 1)
// or [1] (one for every element). Shape unchanged. Cost: 2 FLOPs per element (compare, multiply).
// No fused epilogue of its own; fuse_activation (engine/src/passes.cc) folds one with equal slopes into
// its producer as LeakyRelu.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node&, const std::string&) { return PReluParams{}; }

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams&) {
  return {fb::Op::PRelu, fb::CreatePRelu(fbb).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams&, const Inputs& in,
                         const std::vector<bool>*) {
  in.expect_count(2, 2);
  const Shape& x = in[0];
  if (x.size() < 2) fail(where, "input 0 has shape " + shape_str(x) + " but must have rank >= 2 [N,C,...]");
  const Shape& s = in[1];
  if (s.size() != 1 || (s[0] != 1 && s[0] != x[1]))
    fail(where, in.label(1) + " has shape " + shape_str(s) + " but must be [" + std::to_string(x[1]) +
                    "] (C) or [1]");
  return {x};
}

double flops(const NodeDesc& node) { return 2.0 * numel_f(output_shape(node)); }

}  // namespace

constinit const OpDef prelu_op{
    .read = read,
    .write = write,
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "slope"},
    .shape = shape,
    .flops = flops,
    .reference = ref::run_prelu,
};

}  // namespace infer::detail
