// Names and small helpers for the op vocabulary of infer/ops.h. Op names come from INFER_OPS, an op's
// fused activation from its OpDef (engine/ops/).
#include "infer/ops.h"

#include <iterator>
#include <limits>

#include "engine/ops/op_def.h"
#include "infer/error.h"

namespace infer {

const char* op_name(OpType op) {
#define INFER_OP_NAME(type, params, name) #name,
  static constexpr const char* kNames[] = {INFER_OPS(INFER_OP_NAME)};
#undef INFER_OP_NAME
  const size_t i = static_cast<size_t>(op);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

const char* layout_name(Layout layout) { return layout == Layout::NHWC ? "nhwc" : "nchw"; }

const char* activation_name(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::None: return "none";
    case ActivationKind::Relu: return "relu";
    case ActivationKind::LeakyRelu: return "leaky_relu";
    case ActivationKind::Tanh: return "tanh";
    case ActivationKind::Sigmoid: return "sigmoid";
    case ActivationKind::Clip: return "clip";
    case ActivationKind::HardSigmoid: return "hard_sigmoid";
    case ActivationKind::HardSwish: return "hard_swish";
    case ActivationKind::Silu: return "silu";
    case ActivationKind::Elu: return "elu";
    case ActivationKind::Exp: return "exp";
    case ActivationKind::Sqrt: return "sqrt";
    case ActivationKind::Neg: return "neg";
    case ActivationKind::Abs: return "abs";
    case ActivationKind::Softplus: return "softplus";
    case ActivationKind::PRelu: return "prelu";
  }
  return "unknown";
}

const char* binary_kind_name(BinaryKind kind) {
  switch (kind) {
    case BinaryKind::Add: return "add";
    case BinaryKind::Sub: return "sub";
    case BinaryKind::Mul: return "mul";
    case BinaryKind::Div: return "div";
  }
  return "unknown";
}

const char* pad_mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::Constant: return "constant";
    case PadMode::Reflect: return "reflect";
    case PadMode::Edge: return "edge";
  }
  return "unknown";
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::I32: return "i32";
  }
  return "unknown";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F16: return 2;
    case DType::I8:
    case DType::U8: return 1;
    default: return 4;
  }
}

Activation fused_activation(const OpParams& p) {
  const detail::OpDef& def = detail::op_def(op_type(p));
  return def.activation ? def.activation(p) : Activation{};
}

bool has_input_epilogue(const OpParams& p) {
  const auto* c = std::get_if<Conv2DParams>(&p);
  return c && c->input_epilogue;
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "fp16";
  }
  return "?";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out.empty() ? "scalar" : out;
}

}  // namespace infer
