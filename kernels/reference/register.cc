// Registers the reference backend: for every op, a KernelVariant "reference" on "cpu" at priority 0
// (the fallback every faster variant outranks). Each adapter unpacks a KernelCall (data inputs then
// constants, shapes from the node) into the plain function of reference.h, checking counts first so a
// malformed call is an infer::Error, never an out-of-range read.
#include <limits>
#include <string>
#include <variant>

#include "infer/error.h"
#include "kernels/kernel_api.h"
#include "kernels/reference/reference.h"

namespace infer {
namespace {

// The node's parameters as P; an Error if the node is of another op.
template <class P>
const P& params_of(const KernelCall& call, const char* op) {
  const P* p = std::get_if<P>(&call.node.params);
  if (!p)
    throw Error(std::string("reference ") + op + ": node parameters are for op '" +
                op_name(op_type(call.node.params)) + "'");
  return *p;
}

constexpr size_t kAnyNumber = std::numeric_limits<size_t>::max();

// Checks that the call carries between min_inputs and max_inputs inputs (with shapes, non-null) and
// exactly one output (with its shape, non-null).
void check_call(const KernelCall& call, const char* op, size_t min_inputs, size_t max_inputs) {
  const std::string where = std::string("reference ") + op + ": ";
  const size_t n = call.inputs.size();
  if (n < min_inputs || n > max_inputs) {
    std::string expected = max_inputs == kAnyNumber ? "at least " + std::to_string(min_inputs)
                           : max_inputs == min_inputs
                               ? std::to_string(min_inputs)
                               : std::to_string(min_inputs) + " to " + std::to_string(max_inputs);
    throw Error(where + "expected " + expected + " inputs, got " + std::to_string(n));
  }
  if (call.node.input_shapes.size() != n)
    throw Error(where + "node has " + std::to_string(call.node.input_shapes.size()) +
                " input shapes for " + std::to_string(n) + " inputs");
  if (call.outputs.size() != 1 || call.node.output_shapes.size() != 1)
    throw Error(where + "expected 1 output, got " + std::to_string(call.outputs.size()));
  for (size_t i = 0; i < n; ++i)
    if (!call.inputs[i]) throw Error(where + "input " + std::to_string(i) + " is null");
  if (!call.outputs[0]) throw Error(where + "output 0 is null");
}

const float* optional_input(const KernelCall& call, size_t i) {
  return i < call.inputs.size() ? call.inputs[i] : nullptr;
}

// Weighted ops: x, weight, optional bias.
template <class P, class Fn>
void run_weighted(const KernelCall& call, const char* op, Fn fn) {
  check_call(call, op, 2, 3);
  const auto& s = call.node.input_shapes;
  fn(params_of<P>(call, op), call.inputs[0], s[0], call.inputs[1], s[1], optional_input(call, 2),
     call.outputs[0], call.node.output_shapes[0]);
}

// conv2d: x, weight, optional bias; with add_residual (the fuse_conv_residual pass) always x, weight,
// bias and the residual of the output's shape.
void run_conv2d(const KernelCall& c) {
  const auto& p = params_of<Conv2DParams>(c, "conv2d");
  if (!p.add_residual) {
    check_call(c, "conv2d", 2, 3);
  } else {
    check_call(c, "conv2d", 4, 4);
    if (c.node.input_shapes[3] != c.node.output_shapes[0])
      throw Error("reference conv2d: residual has shape " + shape_str(c.node.input_shapes[3]) +
                  " but the output is " + shape_str(c.node.output_shapes[0]));
  }
  const auto& s = c.node.input_shapes;
  ref::conv2d(p, c.inputs[0], s[0], c.inputs[1], s[1], optional_input(c, 2), c.outputs[0],
              c.node.output_shapes[0], p.add_residual ? c.inputs[3] : nullptr);
}
void run_conv_transpose2d(const KernelCall& c) {
  run_weighted<ConvTranspose2DParams>(c, "conv_transpose2d", ref::conv_transpose2d);
}
void run_dense(const KernelCall& c) { run_weighted<DenseParams>(c, "dense", ref::dense); }
void run_conv_pool2d(const KernelCall& c) {
  run_weighted<ConvPool2DParams>(c, "conv_pool2d", ref::conv_pool2d);
}

void run_pool2d(const KernelCall& c) {
  check_call(c, "pool2d", 1, 1);
  ref::pool2d(params_of<Pool2DParams>(c, "pool2d"), c.inputs[0], c.node.input_shapes[0],
              c.outputs[0], c.node.output_shapes[0]);
}

void run_batchnorm(const KernelCall& c) {
  check_call(c, "batchnorm", 5, 5);
  const Shape& s = c.node.input_shapes[0];
  if (s.size() < 2) throw Error("reference batchnorm: input has shape " + shape_str(s) + ", expected rank >= 2");
  for (size_t i = 1; i < 5; ++i)
    if (shape_numel(c.node.input_shapes[i]) != s[1])
      throw Error("reference batchnorm: input " + std::to_string(i) + " has shape " +
                  shape_str(c.node.input_shapes[i]) + ", expected " + std::to_string(s[1]) + " elements");
  if (c.node.output_shapes[0] != s)
    throw Error("reference batchnorm: output shape " + shape_str(c.node.output_shapes[0]) +
                " differs from input shape " + shape_str(s));
  ref::batchnorm(params_of<BatchNormParams>(c, "batchnorm"), c.inputs[0], s, c.inputs[1],
                 c.inputs[2], c.inputs[3], c.inputs[4], c.outputs[0]);
}

// Element-wise ops need the output shape to equal the input shape(s).
void check_same_shape(const KernelCall& c, const char* op) {
  for (const Shape& s : c.node.input_shapes)
    if (s != c.node.output_shapes[0])
      throw Error(std::string("reference ") + op + ": input shape " + shape_str(s) +
                  " differs from output shape " + shape_str(c.node.output_shapes[0]));
}

void run_activation(const KernelCall& c) {
  check_call(c, "activation", 1, 1);
  check_same_shape(c, "activation");
  ref::activation(params_of<ActivationParams>(c, "activation"), c.inputs[0],
                  c.node.input_shapes[0], c.outputs[0]);
}

void run_softmax(const KernelCall& c) {
  check_call(c, "softmax", 1, 1);
  check_same_shape(c, "softmax");
  ref::softmax(params_of<SoftmaxParams>(c, "softmax"), c.inputs[0], c.node.input_shapes[0],
               c.outputs[0]);
}

void run_add(const KernelCall& c) {
  check_call(c, "add", 2, 2);
  check_same_shape(c, "add");
  ref::add(params_of<AddParams>(c, "add"), c.inputs[0], c.inputs[1], c.node.input_shapes[0],
           c.outputs[0]);
}

void run_binary(const KernelCall& c) {
  check_call(c, "binary", 2, 2);
  const auto& s = c.node.input_shapes;
  ref::binary(params_of<BinaryParams>(c, "binary"), c.inputs[0], s[0], c.inputs[1], s[1], c.outputs[0],
              c.node.output_shapes[0]);
}

void run_flatten(const KernelCall& c) {
  check_call(c, "flatten", 1, 1);
  ref::flatten(params_of<FlattenParams>(c, "flatten"), c.inputs[0], c.node.input_shapes[0],
               c.outputs[0], c.node.output_shapes[0]);
}

void run_reshape(const KernelCall& c) {
  check_call(c, "reshape", 1, 1);
  ref::reshape(params_of<ReshapeParams>(c, "reshape"), c.inputs[0], c.node.input_shapes[0],
               c.outputs[0], c.node.output_shapes[0]);
}

void run_concat(const KernelCall& c) {
  check_call(c, "concat", 1, kAnyNumber);
  ref::concat(params_of<ConcatParams>(c, "concat"), c.inputs, c.node.input_shapes, c.outputs[0],
              c.node.output_shapes[0]);
}

void run_layout(const KernelCall& c) {
  check_call(c, "layout", 1, 1);
  check_same_shape(c, "layout");
  ref::layout(params_of<LayoutParams>(c, "layout"), c.inputs[0], c.node.input_shapes[0], c.outputs[0]);
}

using RunFn = void (*)(const KernelCall&);

RunFn reference_run(OpType op) {
  switch (op) {
    case OpType::Conv2D: return run_conv2d;
    case OpType::ConvTranspose2D: return run_conv_transpose2d;
    case OpType::Pool2D: return run_pool2d;
    case OpType::Dense: return run_dense;
    case OpType::BatchNorm: return run_batchnorm;
    case OpType::Activation: return run_activation;
    case OpType::Flatten: return run_flatten;
    case OpType::Reshape: return run_reshape;
    case OpType::Softmax: return run_softmax;
    case OpType::Add: return run_add;
    case OpType::Concat: return run_concat;
    case OpType::ConvPool2D: return run_conv_pool2d;
    case OpType::Binary: return run_binary;
    case OpType::Layout: return run_layout;
  }
  return nullptr;
}

}  // namespace

void register_reference_kernels(KernelRegistry& registry) {
  for (int i = 0; i < kNumOpTypes; ++i) {
    const OpType op = static_cast<OpType>(i);
    KernelVariant v;
    v.op = op_name(op);
    v.name = "reference";
    v.backend = "cpu";
    v.priority = 0;
    v.run = reference_run(op);
    if (op == OpType::Layout) v.layouts = {Layout::NCHW, Layout::NHWC};  // reads `from`, writes `to`
    registry.add(std::move(v));
  }
}

}  // namespace infer
