// Registers the reference backend from the op table (engine/ops/op_def.h): for every op, a
// KernelVariant "reference" on "cpu" at priority 0 (the fallback every faster variant outranks) running
// its OpDef's `reference`. Each adapter run_<op> unpacks a KernelCall (data inputs then constants,
// shapes from the node) into the plain function of reference.h; the registry has checked the call
// against the op's rules first (check_kernel_call), as for every backend.
#include <string>
#include <variant>

#include "engine/ops/op_def.h"
#include "engine/src/kernel_api.h"
#include "kernels/reference/reference.h"

namespace infer::ref {
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
}  // namespace

void run_conv2d(const KernelCall& c) {
  const auto& p = std::get<Conv2DParams>(c.node.params);
  const auto& s = c.node.input_shapes;
  conv2d(p, c.inputs[0], s[0], c.inputs[1], s[1], optional_input(c, 2), c.outputs[0],
              c.node.output_shapes[0], p.add_residual ? c.inputs[3] : nullptr);
}
void run_conv_transpose2d(const KernelCall& c) {
  run_weighted<ConvTranspose2DParams>(c, conv_transpose2d);
}
void run_dense(const KernelCall& c) { run_weighted<DenseParams>(c, dense); }
void run_conv_pool2d(const KernelCall& c) {
  run_weighted<ConvPool2DParams>(c, conv_pool2d);
}

void run_pool2d(const KernelCall& c) {
  pool2d(std::get<Pool2DParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
              c.outputs[0], c.node.output_shapes[0]);
}

void run_batchnorm(const KernelCall& c) {
  const Shape& s = c.node.input_shapes[0];
  batchnorm(std::get<BatchNormParams>(c.node.params), c.inputs[0], s, c.inputs[1],
                 c.inputs[2], c.inputs[3], c.inputs[4], c.outputs[0]);
}

void run_activation(const KernelCall& c) {
  activation(std::get<ActivationParams>(c.node.params), c.inputs[0],
                  c.node.input_shapes[0], c.outputs[0]);
}

void run_softmax(const KernelCall& c) {
  softmax(std::get<SoftmaxParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
               c.outputs[0]);
}

void run_add(const KernelCall& c) {
  add(std::get<AddParams>(c.node.params), c.inputs[0], c.inputs[1], c.node.input_shapes[0],
           c.outputs[0]);
}

void run_binary(const KernelCall& c) {
  const auto& s = c.node.input_shapes;
  binary(std::get<BinaryParams>(c.node.params), c.inputs[0], s[0], c.inputs[1], s[1], c.outputs[0],
              c.node.output_shapes[0]);
}

void run_flatten(const KernelCall& c) {
  flatten(std::get<FlattenParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
               c.outputs[0], c.node.output_shapes[0]);
}

void run_reshape(const KernelCall& c) {
  reshape(std::get<ReshapeParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
               c.outputs[0], c.node.output_shapes[0]);
}

void run_concat(const KernelCall& c) {
  concat(std::get<ConcatParams>(c.node.params), c.inputs, c.node.input_shapes, c.outputs[0],
              c.node.output_shapes[0]);
}

void run_pad2d(const KernelCall& c) {
  pad2d(std::get<Pad2DParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
             c.node.output_shapes[0]);
}

void run_instance_norm(const KernelCall& c) {
  instance_norm(std::get<InstanceNormParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
                     c.inputs[1], c.inputs[2], c.outputs[0]);
}

void run_channel_shuffle(const KernelCall& c) {
  channel_shuffle(std::get<ChannelShuffleParams>(c.node.params), c.inputs[0],
                       c.node.input_shapes[0], c.outputs[0]);
}

void run_slice(const KernelCall& c) {
  slice(std::get<SliceParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
             c.node.output_shapes[0]);
}

void run_resize(const KernelCall& c) {
  resize(std::get<ResizeParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0],
              c.node.output_shapes[0]);
}

void run_depth_to_space(const KernelCall& c) {
  depth_to_space(std::get<DepthToSpaceParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
                      c.outputs[0], c.node.output_shapes[0]);
}

void run_layout(const KernelCall& c) {
  layout(std::get<LayoutParams>(c.node.params), c.inputs[0], c.node.input_shapes[0], c.outputs[0]);
}

void run_squeeze_excite(const KernelCall& c) {
  squeeze_excite(std::get<SqueezeExciteParams>(c.node.params), c.inputs[0], c.node.input_shapes[0],
                      c.inputs[1], c.inputs[2], c.inputs[3], c.inputs[4], c.node.input_shapes[1][0],
                      c.outputs[0]);
}

}  // namespace infer::ref

namespace infer {

void register_reference_kernels(KernelRegistry& registry) {
  std::vector<KernelVariant> variants;
  for (int i = 0; i < kNumOpTypes; ++i) {
    const OpType op = static_cast<OpType>(i);
    const detail::OpDef& def = detail::op_def(op);
    variants.push_back({.op = op_name(op), .name = "reference", .priority = 0, .run = def.reference});
    if (def.reference_any_layout) variants.back().layouts = {Layout::NCHW, Layout::NHWC};
  }
  registry.add("cpu", std::move(variants));
}

}  // namespace infer
