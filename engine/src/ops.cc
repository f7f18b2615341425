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
    case OpType::Resize: return "resize";
    case OpType::DepthToSpace: return "depth_to_space";
    case OpType::Layout: return "layout";
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
