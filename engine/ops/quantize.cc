// quantize_linear / dequantize_linear (ONNX QuantizeLinear / DequantizeLinear, opsets 10-18): the shape
// rule (scale and zero point per tensor or [dim(axis)], an activation's axis never the batch), the
// dtype rule every node passes (node_output_dtype: only these two ops see integer tensors) and the
// value checks of their constants (scales finite and > 0, an I32 zero point 0). Shape unchanged.
// Cost: 2 FLOPs per element (divide or multiply, add or subtract).
#include <cmath>

#include "engine/ops/op_util.h"

namespace infer::detail {

namespace {

OpParams read_q(const fb::Node& node, const std::string& where) {
  const fb::QuantizeLinear* o = node.options_as_QuantizeLinear();
  const int d = static_cast<int>(o->dtype());
  if (d != static_cast<int>(DType::I8) && d != static_cast<int>(DType::U8))
    fail(where, "field dtype is " + std::string(d >= 0 && d <= static_cast<int>(DType::I32)
                                                    ? dtype_name(static_cast<DType>(d))
                                                    : "unknown (" + std::to_string(d) + ")") +
                    " (quantize_linear writes i8 or u8)");
  return QuantizeLinearParams{o->axis(), static_cast<DType>(d)};
}

FbOptions write_q(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  const auto& p = std::get<QuantizeLinearParams>(params);
  return {fb::Op::QuantizeLinear,
          fb::CreateQuantizeLinear(fbb, p.axis, static_cast<fb::DType>(p.dtype)).Union()};
}

OpParams read_dq(const fb::Node& node, const std::string&) {
  return DequantizeLinearParams{node.options_as_DequantizeLinear()->axis()};
}

FbOptions write_dq(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  return {fb::Op::DequantizeLinear,
          fb::CreateDequantizeLinear(fbb, std::get<DequantizeLinearParams>(params).axis).Union()};
}

int axis_of(const OpParams& params) {
  if (const auto* q = std::get_if<QuantizeLinearParams>(&params)) return q->axis;
  return std::get<DequantizeLinearParams>(params).axis;
}

// x, scale, optional zero point: one scale element (per tensor: the axis is ignored, as in ONNX) or
// [dim(axis)] (per axis); the zero point's shape equals the scale's. `constant` (when known) tells whether x is a constant: an
// activation's per-axis axis must not be its batch (dim 0).
std::vector<Shape> shape(const std::string& where, const OpParams& params, const Inputs& in,
                         const std::vector<bool>* constant) {
  in.expect_count(2, 3);
  if (const auto* q = std::get_if<QuantizeLinearParams>(&params))
    if (q->dtype != DType::I8 && q->dtype != DType::U8)
      fail(where, std::string("dtype is ") + dtype_name(q->dtype) + " (quantize_linear writes i8 or u8)");
  const Shape& x = in[0];
  const Shape& s = in[1];
  const int rank = static_cast<int>(x.size());
  const int axis = axis_of(params);
  if (rank == 0) fail(where, "input 0 has rank 0");
  if (shape_numel(s) != 1) {  // per axis (ONNX: a per-tensor node ignores its axis)
    if (axis < -rank || axis >= rank)
      fail(where, "axis " + std::to_string(axis) + " is out of range for input 0 of rank " +
                      std::to_string(rank) + " ([-" + std::to_string(rank) + ", " +
                      std::to_string(rank - 1) + "])");
    const int a = axis < 0 ? axis + rank : axis;
    if (s.size() != 1 || s[0] != x[static_cast<size_t>(a)])
      fail(where, in.label(1) + " has shape " + shape_str(s) + " but must have one element (per tensor) or be [" +
                      std::to_string(x[static_cast<size_t>(a)]) + "] (per axis " + std::to_string(axis) + ")");
    const bool x_constant = constant && !constant->empty() && (*constant)[0];
    if (constant && !x_constant && a == 0)
      fail(where, "axis " + std::to_string(axis) + " is the batch (per-axis scales of an activation need axis >= 1)");
  }
  if (in.size() == 3 && in[2] != s)
    fail(where, in.label(2) + " has shape " + shape_str(in[2]) + " but must equal the scale's " + shape_str(s));
  return {x};
}

double flops(const NodeDesc& node) { return 2.0 * numel_f(output_shape(node)); }

std::string label(OpType op, size_t i) {
  const char* role = input_role(op, i);
  return "input " + std::to_string(i) + (role ? std::string(" (") + role + ")" : "");
}

}  // namespace

DType node_output_dtype(const std::string& where, const OpParams& params, const std::vector<DType>& in) {
  const OpType op = op_type(params);
  const auto want = [&](size_t i, bool ok, const std::string& what) {
    if (!ok) fail(where, label(op, i) + " is " + dtype_name(in[i]) + " but must be " + what);
  };
  if (op == OpType::QuantizeLinear) {
    const DType t = std::get<QuantizeLinearParams>(params).dtype;
    if (!in.empty()) want(0, is_float_dtype(in[0]), "f32 or f16");
    if (in.size() > 1) want(1, is_float_dtype(in[1]), "f32 or f16");
    if (in.size() > 2) want(2, in[2] == t, std::string(dtype_name(t)) + " (the node's dtype)");
    if (in.size() == 2 && t != DType::U8)
      fail(where, std::string("dtype is ") + dtype_name(t) + " but there is no zero point (ONNX: u8 then)");
    return t;
  }
  if (op == OpType::DequantizeLinear) {
    if (!in.empty())
      want(0, in[0] == DType::I8 || in[0] == DType::U8 || in[0] == DType::I32, "i8, u8 or i32");
    if (in.size() > 1) want(1, is_float_dtype(in[1]), "f32 or f16");
    if (in.size() > 2) want(2, in[2] == in[0], std::string(dtype_name(in[0])) + " (input 0's type)");
    return DType::F32;
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (!is_float_dtype(in[i]))
      fail(where, label(op, i) + " is " + dtype_name(in[i]) + "; " + op_name(op) +
                      " takes float tensors (dequantize_linear it first)");
  return DType::F32;
}

void check_quant_constants(const std::string& where, const OpParams& params, const std::vector<DType>& dtypes,
                           const std::vector<const float*>& data, const std::vector<Shape>& shapes) {
  const OpType op = op_type(params);
  if (op != OpType::QuantizeLinear && op != OpType::DequantizeLinear) return;
  if (data.size() > 1 && data[1]) {
    const int64_t n = shape_numel(shapes[1]);
    for (int64_t i = 0; i < n; ++i)
      if (!(std::isfinite(data[1][i]) && data[1][i] > 0.f))
        fail(where, label(op, 1) + " element " + std::to_string(i) + " is " + std::to_string(data[1][i]) +
                        " (scales must be finite and > 0)");
  }
  if (data.size() > 2 && data[2] && dtypes.size() > 2 && dtypes[2] == DType::I32) {
    const int64_t n = shape_numel(shapes[2]);
    for (int64_t i = 0; i < n; ++i)
      if (data[2][i] != 0.f)
        fail(where, label(op, 2) + " element " + std::to_string(i) + " is " + std::to_string(int64_t(data[2][i])) +
                        " (an i32 zero point must be 0, as ONNX)");
  }
}

constinit const OpDef quantize_linear_op{
    .read = read_q,
    .write = write_q,
    .inputs = InputKinds::FoldableThenParams,
    .roles = {nullptr, "scale", "zero_point"},
    .shape = shape,
    .flops = flops,
    .reference = ref::run_quantize_linear,
    .reference_any_layout = true,  // element-wise: a per-axis scale follows the layout (quantize.cc)
};

constinit const OpDef dequantize_linear_op{
    .read = read_dq,
    .write = write_dq,
    .inputs = InputKinds::FoldableThenParams,
    .roles = {nullptr, "scale", "zero_point"},
    .shape = shape,
    .flops = flops,
    .reference = ref::run_dequantize_linear,
    .reference_any_layout = true,
};

}  // namespace infer::detail
