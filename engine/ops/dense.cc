// dense: a fully connected layer. x [N,F_in], weight [F_out,F_in] (PyTorch's layout), optional bias
// [F_out], a fused activation (or the engine-internal per-channel PRelu, slope [F_out] as input 3). Cost: N*F_out*F_in multiply-adds (2 FLOPs each).
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::Dense* t = node.options_as_Dense();
  DenseParams p;
  p.activation =
      read_activation(t->activation(), t->activation_alpha(), t->activation_beta(), where, "activation");
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& a = std::get<DenseParams>(params).activation;
  return {fb::Op::Dense, fb::CreateDense(fbb, fb_kind(a.kind), a.alpha, a.beta).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const Activation& a = std::get<DenseParams>(params).activation;
  const bool prelu = expect_epilogue_inputs(in, a);
  check_activation(where, "activation", a, true);
  const Shape& x = in.with_rank(0, 2, "[N,F_in]");
  const Shape& w = in.with_rank(1, 2, "[F_out,F_in]");
  if (w[1] != x[1])
    fail(where, in.label(1) + " has " + std::to_string(w[1]) + " input features but input 0 has " +
                    std::to_string(x[1]));
  if (in.size() >= 3) in.expect_vector(2, w[0], "F_out");
  if (prelu) expect_prelu_slope(in, w[0]);
  return {{x[0], w[0]}};
}

double flops(const NodeDesc& node) {
  const Shape& w = input_shape(node, 1);  // [F_out, F_in]
  return 2.0 * dim_f(input_shape(node, 0), 0) * dim_f(w, 0) * dim_f(w, 1);
}

Activation activation(const OpParams& params) { return std::get<DenseParams>(params).activation; }

}  // namespace

constinit const OpDef dense_op{
    .read = read,
    .write = write,
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "weight", "bias"},
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .prelu_epilogue = true,
    .reference = ref::run_dense,
};

}  // namespace infer::detail
