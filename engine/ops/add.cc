// add: y = act(a + b) for two activations of equal shape (the residual add of format version 1; binary
// is the broadcasting form); an input may be read through its QDQ pair (input_qdq, engine-internal,
// no file form). Cost: one FLOP per element.
#include <cmath>

#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read(const fb::Node& node, const std::string& where) {
  const fb::Add* t = node.options_as_Add();
  AddParams p;
  p.activation =
      read_activation(t->activation(), t->activation_alpha(), t->activation_beta(), where, "activation");
  return p;
}

FbOptions write(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<AddParams>(params);
  if (p.input_qdq[0].on || p.input_qdq[1].on)
    throw Error("add input_qdq is engine-internal (the fuse_quantized_add pass) and has no file form");
  const auto& a = p.activation;
  return {fb::Op::Add, fb::CreateAdd(fbb, fb_kind(a.kind), a.alpha, a.beta).Union()};
}

std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>*) {
  in.expect_count(2, 2);
  const auto& p = std::get<AddParams>(params);
  check_activation(where, "activation", p.activation);
  for (int k = 0; k < 2; ++k) {
    const AddInputQDQ& q = p.input_qdq[k];
    if (!q.on) continue;
    const std::string field = "field input_qdq[" + std::to_string(k) + "]";
    if (!std::isfinite(q.scale) || !(q.scale > 0.f)) fail(where, field + ".scale must be finite and > 0");
    if (q.dtype != DType::U8 && q.dtype != DType::I8)
      fail(where, field + ".dtype is " + dtype_name(q.dtype) + " (u8 or i8)");
    const int32_t lo = q.dtype == DType::U8 ? 0 : -128, hi = q.dtype == DType::U8 ? 255 : 127;
    if (q.zero_point < lo || q.zero_point > hi)
      fail(where, field + ".zero_point " + std::to_string(q.zero_point) + " is outside " + dtype_name(q.dtype) +
                      "'s range");
  }
  if (in[0] != in[1])
    fail(where, "input 1 has shape " + shape_str(in[1]) + " but input 0 has " + shape_str(in[0]) +
                    " (add needs equal shapes)");
  return {in[0]};
}

double flops(const NodeDesc& node) { return numel_f(output_shape(node)); }

Activation activation(const OpParams& params) { return std::get<AddParams>(params).activation; }

}  // namespace

constinit const OpDef add_op{
    .read = read,
    .write = write,
    .shape = shape,
    .flops = flops,
    .activation = activation,
    .reference = ref::run_add,
};

}  // namespace infer::detail
