// Registers the reference backend: for every op, a KernelVariant "reference" on "cpu" at priority 0
// (the fallback every faster variant outranks). Each adapter unpacks a KernelCall (data inputs then
// constants, shapes from the node) into the plain function of reference.h; the registry has checked
// the call against the op's rules first (check_kernel_call), as for every backend.
#include <string>
#include <variant>

#include "engine/src/kernel_api.h"
#include "kernels/reference/reference.h"

namespace infer {
namespace {

const float* optional_input(const KernelCall& call, size_t i) {
  return i < call.inputs.size() ? call.inputs[i] : nullptr;
}

// Weighted ops: x, weight, optional bias.
template <class P, class Fn>
void run_weighted(const KernelCall& call, Fn fn) {
  const auto& s = call.node.input_shapes;
  fn(std::get<P>(call.node.params), call.inputs[0], s[0], call.inputs[1], s[1], optional_input(call, 2),
     call.outputs[0], call.node.output_shapes[0]);
}

// conv2d: x, weight, optional bias; with add_residual (the fuse_conv_residual pass) always x, weight,
// bias and the residual of the output's shape (shape inference checks both forms).
void run_conv2d(const KernelCall& c) {
  const auto& p = std::get<Conv2DParams>(c.node.params);
  const auto& s = c.node.input_shapes;
  ref::conv2d(p, c.inputs[0], s[0], c.inputs[1], s[1], optional_input(c, 2), c.outputs[0],
              c.node.output_shapes[0], p.add_residual ? c.inputs[3] : nullptr);
}
void run_conv_transpose2d(const KernelCall& c) {
  run_weighted<ConvTranspose2DParams>(c, ref::conv_transpose2d);
}
void run_dense(const KernelCall& c) { run_weighted<DenseParams>(c, ref::dense); }
void run_conv_pool2d(const KernelCall& c) {
  run_weighted<ConvPool2DParams>(c, ref::conv_pool2d);
}

void run_pool2d(const KernelCall& c) {
  ref::pool2d(std::get<Pool2DParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
              c.outputs[0], c.node.output_shapes[0]);
}

void run_batchnorm(const KernelCall& c) {
  const Shape& s = c.node.input_shapes[0];
  ref::batchnorm(std::get<BatchNormParams>(c.node.params), c.inputs[0], s, c.inputs[1],
                 c.inputs[2], c.inputs[3], c.inputs[4], c.outputs[0]);
}

void run_activation(const KernelCall& c) {
  ref::activation(std::get<ActivationParams>(c.node.params), c.inputs[0],
                  c.node.input_shapes[0], c.outputs[0]);
}

void run_softmax(const KernelCall& c) {
  ref::softmax(std::get<SoftmaxParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
               c.outputs[0]);
}

void run_add(const KernelCall& c) {
  ref::add(std::get<AddParams>(c.node.params), c.inputs[0], c.inputs[1], c.node.input_shapes[0],
           c.outputs[0]);
}

void run_binary(const KernelCall& c) {
  const auto& s = c.node.input_shapes;
  ref::binary(std::get<BinaryParams>(c.node.params), c.inputs[0], s[0], c.inputs[1], s[1], c.outputs[0],
              c.node.output_shapes[0]);
}

void run_flatten(const KernelCall& c) {
  ref::flatten(std::get<FlattenParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
               c.outputs[0], c.node.output_shapes[0]);
}

void run_reshape(const KernelCall& c) {
  ref::reshape(std::get<ReshapeParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
               c.outputs[0], c.node.output_shapes[0]);
}

void run_concat(const KernelCall& c) {
  ref::concat(std::get<ConcatParams>(c.node.params), c.inputs, c.node.input_shapes, c.outputs[0],
              c.node.output_shapes[0]);
}

void run_pad2d(const KernelCall& c) {
  ref::pad2d(std::get<Pad2DParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
             c.node.output_shapes[0]);
}

void run_instance_norm(const KernelCall& c) {
  ref::instance_norm(std::get<InstanceNormParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
                     c.inputs[1], c.inputs[2], c.outputs[0]);
}

void run_channel_shuffle(const KernelCall& c) {
  ref::channel_shuffle(std::get<ChannelShuffleParams>(c.node.params), c.inputs[0],
                       c.node.input_shapes[0], c.outputs[0]);
}

void run_slice(const KernelCall& c) {
  ref::slice(std::get<SliceParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
             c.node.output_shapes[0]);
}

void run_resize(const KernelCall& c) {
  ref::resize(std::get<ResizeParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
              c.node.output_shapes[0]);
}

void run_depth_to_space(const KernelCall& c) {
  ref::depth_to_space(std::get<DepthToSpaceParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
                      c.outputs[0], c.node.output_shapes[0]);
}

void run_layout(const KernelCall& c) {
  ref::layout(std::get<LayoutParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0]);
}

void run_squeeze_excite(const KernelCall& c) {
  ref::squeeze_excite(std::get<SqueezeExciteParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
                      c.inputs[1], c.inputs[2], c.inputs[3], c.inputs[4], c.node.input_shapes[1][0],
                      c.outputs[0]);
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
    case OpType::Pad2D: return run_pad2d;
    case OpType::InstanceNorm: return run_instance_norm;
    case OpType::ChannelShuffle: return run_channel_shuffle;
    case OpType::Slice: return run_slice;
    case OpType::Resize: return run_resize;
    case OpType::DepthToSpace: return run_depth_to_space;
    case OpType::Layout: return run_layout;
    case OpType::SqueezeExcite: return run_squeeze_excite;
  }
  return nullptr;
}

}  // namespace

void register_reference_kernels(KernelRegistry& registry) {
  std::vector<KernelVariant> variants;
  for (int i = 0; i < kNumOpTypes; ++i) {
    const OpType op = static_cast<OpType>(i);
    variants.push_back({.op = op_name(op), .name = "reference", .priority = 0, .run = reference_run(op)});
    // layout reads `from` and writes `to`: offered in either node layout
    if (op == OpType::Layout) variants.back().layouts = {Layout::NCHW, Layout::NHWC};
  }
  registry.add("cpu", std::move(variants));
}

}  // namespace infer
