// squeeze_excite: engine-internal (the fuse_squeeze_excite pass; no file form). A squeeze-excitation
// block y = act(x * gate_act(W2 hidden_act(W1 mean(x) + b1) + b2)) over x [N,C,H,W] with w1 [C_r,C,1,1],
// b1 [C_r], w2 [C,C_r,1,1], b2 [C]. Cost: the pool and the multiply (one FLOP per element each) and the
// two small matrix-vector products.
#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  const auto& p = std::get<SqueezeExciteParams>(params);
  in.expect_count(5, 5);
  check_activation(where, "hidden_activation", p.hidden_activation);
  check_activation(where, "gate_activation", p.gate_activation);
  check_activation(where, "activation", p.activation);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  const Shape& w1 = in.with_rank(1, 4, "[C_r,C,1,1]");
  const Shape& w2 = in.with_rank(3, 4, "[C,C_r,1,1]");
  const int64_t cr = w1[0];
  if (w1[1] != x[1] || w1[2] != 1 || w1[3] != 1 || cr < 1)
    fail(where, in.label(1) + " has shape " + shape_str(w1) + " but must be [C_r," + std::to_string(x[1]) +
                    ",1,1]");
  if (w2[0] != x[1] || w2[1] != cr || w2[2] != 1 || w2[3] != 1)
    fail(where, in.label(3) + " has shape " + shape_str(w2) + " but must be [" + std::to_string(x[1]) + "," +
                    std::to_string(cr) + ",1,1]");
  in.expect_vector(2, cr, "C_r");
  in.expect_vector(4, x[1], "C");
  return {x};
}

double flops(const NodeDesc& node) {
  const Shape& x = input_shape(node, 0);
  const Shape& w1 = input_shape(node, 1);  // [C_r, C, 1, 1]
  return 2.0 * numel_f(output_shape(node)) + 4.0 * dim_f(x, 0) * dim_f(x, 1) * dim_f(w1, 0);
}

Activation activation(const OpParams& params) { return std::get<SqueezeExciteParams>(params).activation; }

}  // namespace

constinit const OpDef squeeze_excite_op{
    .inputs = InputKinds::DataThenParams,
    .roles = {nullptr, "w1", "b1", "w2", "b2"},
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .reference = ref::run_squeeze_excite,
};

}  // namespace infer::detail
