// The cost model. Conventions (kept simple on purpose, so numbers are easy to check by hand):
// - conv2d: N*C_out*H_out*W_out*(C_in/groups)*KH*KW multiply-adds (2 FLOPs each); dense: N*F_out*F_in.
// - conv_transpose2d: the direct (scatter) form, H_in*W_in*C_in*(C_out/groups)*KH*KW multiply-adds per
//   sample (dilation changes where taps land, not how many), whatever the kernel does (the segregated kernels do less work; their GFLOP/s shows it).
// - conv_pool2d: the conv over the pooled region (H_out*pool x W_out*pool) plus the pooling.
// - pool2d: one op per window element; batchnorm: one multiply-add (2) per element; add: one per
//   element; binary (add/sub/mul/div, broadcast): one per output element, its bytes the inputs as
//   stored (a broadcast constant is read once per use, but counted once); softmax: 3 per element
//   (max, exp-and-sum, divide); instance_norm: 5 per element (sum, squared deviation sum, multiply-add).
// - activation: activation_flops(kind) per element: one per arithmetic operation, compare or
//   transcendental of its formula (infer/ops.h), except that relu, leaky_relu, tanh and sigmoid count
//   one as they always have, and none (a copy) 0.
// - Bias adds and fused activation epilogues are not counted (they are O(outputs), negligible next
//   to the multiply-adds). flatten, reshape, concat, pad2d, channel_shuffle, slice: 0 FLOPs, only bytes.
// - Bytes: 4 per element of every input (constants included) and every output.
#include "cost.h"

#include <variant>

namespace infer::detail {
namespace {

double numel(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}

// Dimension `i` of a shape as a double, 0 when the shape is too short (malformed descs cost 0).
double dim(const Shape& s, size_t i) { return i < s.size() ? static_cast<double>(s[i]) : 0.0; }

double conv_flops(const NodeDesc& node, double out_h, double out_w) {
  const Shape& x = node.input_shapes.size() > 0 ? node.input_shapes[0] : Shape{};
  const Shape& w = node.input_shapes.size() > 1 ? node.input_shapes[1] : Shape{};
  // weight [C_out, C_in/groups, KH, KW]: dim(w, 1) is already the per-group input channel count.
  return 2.0 * dim(x, 0) * dim(w, 0) * out_h * out_w * dim(w, 1) * dim(w, 2) * dim(w, 3);
}

}  // namespace

double activation_flops(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::None: return 0;
    case ActivationKind::Relu:
    case ActivationKind::LeakyRelu:
    case ActivationKind::Tanh:
    case ActivationKind::Sigmoid:
    case ActivationKind::Exp:
    case ActivationKind::Sqrt:
    case ActivationKind::Neg:
    case ActivationKind::Abs: return 1;
    case ActivationKind::Clip: return 2;         // max, min
    case ActivationKind::Silu: return 2;         // sigmoid, multiply
    case ActivationKind::Softplus: return 2;     // exp, log1p
    case ActivationKind::Elu: return 3;          // compare, expm1, multiply
    case ActivationKind::HardSigmoid: return 4;  // multiply, add, max, min
    case ActivationKind::HardSwish: return 5;    // add, max, min, multiply, divide
  }
  return 1;
}

NodeCost node_cost(const NodeDesc& node) {
  NodeCost cost;
  for (const Shape& s : node.input_shapes) cost.bytes += 4.0 * numel(s);
  for (const Shape& s : node.output_shapes) cost.bytes += 4.0 * numel(s);

  const Shape empty;
  const Shape& x = node.input_shapes.empty() ? empty : node.input_shapes[0];
  const Shape& y = node.output_shapes.empty() ? empty : node.output_shapes[0];
  const double out_elems = numel(y);

  switch (op_type(node.params)) {
    case OpType::Conv2D:
      cost.flops = conv_flops(node, dim(y, 2), dim(y, 3));
      break;
    case OpType::ConvTranspose2D: {
      // weight [C_in, C_out/groups, KH, KW]; one multiply-add per input element per kernel tap per
      // output channel of its group (dim(w, 1) is already C_out/groups).
      const Shape& w = node.input_shapes.size() > 1 ? node.input_shapes[1] : empty;
      cost.flops = 2.0 * numel(x) * dim(w, 1) * dim(w, 2) * dim(w, 3);
      break;
    }
    case OpType::ConvPool2D: {
      const auto& p = std::get<ConvPool2DParams>(node.params);
      const double pool = p.pool;
      cost.flops = conv_flops(node, dim(y, 2) * pool, dim(y, 3) * pool) + out_elems * pool * pool;
      break;
    }
    case OpType::Pool2D: {
      const auto& p = std::get<Pool2DParams>(node.params);
      cost.flops = out_elems * p.kernel_h * p.kernel_w;
      break;
    }
    case OpType::Dense: {
      const Shape& w = node.input_shapes.size() > 1 ? node.input_shapes[1] : empty;  // [F_out, F_in]
      cost.flops = 2.0 * dim(x, 0) * dim(w, 0) * dim(w, 1);
      break;
    }
    case OpType::BatchNorm:
      cost.flops = 2.0 * out_elems;
      break;
    case OpType::InstanceNorm:  // mean, variance (2 per element), then a multiply-add
      cost.flops = 5.0 * out_elems;
      break;
    case OpType::Activation:
      cost.flops = out_elems * activation_flops(std::get<ActivationParams>(node.params).activation.kind);
      break;
    case OpType::Add:
    case OpType::Binary:
      cost.flops = out_elems;
      break;
    case OpType::Softmax:
      cost.flops = 3.0 * out_elems;
      break;
    case OpType::Resize:  // linear: 4 taps, 3 lerps (a multiply-add each) per output element
      cost.flops = std::get<ResizeParams>(node.params).mode == ResizeMode::Linear ? 6.0 * out_elems : 0;
      break;
    case OpType::Flatten:
    case OpType::Reshape:
    case OpType::Concat:
    case OpType::Pad2D:
    case OpType::ChannelShuffle:
    case OpType::Slice:
    case OpType::DepthToSpace:
    case OpType::Layout:
      cost.flops = 0;
      break;
    case OpType::SqueezeExcite: {  // the pool and the multiply (one per element), two tiny GEMVs
      const Shape& w1 = node.input_shapes.size() > 1 ? node.input_shapes[1] : empty;  // [C_r, C, 1, 1]
      cost.flops = 2.0 * out_elems + 4.0 * dim(x, 0) * dim(x, 1) * dim(w1, 0);
      break;
    }
  }
  return cost;
}

}  // namespace infer::detail
