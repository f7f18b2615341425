// Names and small helpers for the op vocabulary of infer/ops.h.
#include "infer/ops.h"

#include <limits>

#include "infer/error.h"

namespace infer {

const char* op_name(OpType op) {
  switch (op) {
    case OpType::Conv2D: return "conv2d";
    case OpType::ConvTranspose2D: return "conv_transpose2d";
    case OpType::Pool2D: return "pool2d";
    case OpType::Dense: return "dense";
    case OpType::BatchNorm: return "batchnorm";
    case OpType::Activation: return "activation";
    case OpType::Flatten: return "flatten";
    case OpType::Reshape: return "reshape";
    case OpType::Softmax: return "softmax";
    case OpType::Add: return "add";
    case OpType::Concat: return "concat";
    case OpType::ConvPool2D: return "conv_pool2d";
    case OpType::Binary: return "binary";
    case OpType::Pad2D: return "pad2d";
    case OpType::InstanceNorm: return "instance_norm";
    case OpType::ChannelShuffle: return "channel_shuffle";
    case OpType::Slice: return "slice";
    case OpType::Resize: return "resize";
    case OpType::DepthToSpace: return "depth_to_space";
    case OpType::Layout: return "layout";
    case OpType::SqueezeExcite: return "squeeze_excite";
  }
  return "unknown";
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

const char* dtype_name(DType dtype) { return dtype == DType::F16 ? "f16" : "f32"; }

size_t dtype_size(DType dtype) { return dtype == DType::F16 ? 2 : 4; }

Activation fused_activation(const OpParams& p) {
  if (auto* c = std::get_if<Conv2DParams>(&p)) return c->activation;
  if (auto* t = std::get_if<ConvTranspose2DParams>(&p)) return t->activation;
  if (auto* d = std::get_if<DenseParams>(&p)) return d->activation;
  if (auto* b = std::get_if<BatchNormParams>(&p)) return b->activation;
  if (auto* a = std::get_if<AddParams>(&p)) return a->activation;
  if (auto* cp = std::get_if<ConvPool2DParams>(&p)) return cp->conv.activation;
  if (auto* bi = std::get_if<BinaryParams>(&p)) return bi->activation;
  if (auto* in = std::get_if<InstanceNormParams>(&p)) return in->activation;
  if (auto* se = std::get_if<SqueezeExciteParams>(&p)) return se->activation;
  return {};
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
