// Fast CPU kernels (float32, OpenMP, GEMM through OpenBLAS): one registration function per op family,
// each defined in the file named after the family (kernels/cpu/<family>.cc) and called from
// register.cc. Variants register on backend "cpu" with priority > 0, above the reference kernels.
#pragma once

#include "engine/src/kernel_api.h"

namespace infer::cpu {

void register_conv2d(KernelRegistry& registry);            // conv2d.cc
void register_conv2d_winograd(KernelRegistry& registry);   // conv2d_winograd.cc
void register_conv2d_packed(KernelRegistry& registry);     // conv2d_packed.cc
void register_dense(KernelRegistry& registry);             // dense.cc
void register_pool2d(KernelRegistry& registry);            // pool2d.cc
void register_resize(KernelRegistry& registry);            // resize.cc (resize, depth_to_space)
void register_elementwise(KernelRegistry& registry);       // elementwise.cc: activation, add, batchnorm
void register_tensor_ops(KernelRegistry& registry);        // tensor_ops.cc: flatten, reshape, concat, softmax
void register_conv_transpose2d(KernelRegistry& registry);  // conv_transpose2d.cc
void register_conv_pool2d(KernelRegistry& registry);       // conv_pool2d.cc
void register_binary(KernelRegistry& registry);            // binary.cc: add, sub, mul, div, broadcast
void register_pad2d(KernelRegistry& registry);             // pad2d.cc
void register_instance_norm(KernelRegistry& registry);     // instance_norm.cc
void register_squeeze_excite(KernelRegistry& registry);    // squeeze_excite.cc
void register_channel_ops(KernelRegistry& registry);       // channel_ops.cc: channel_shuffle, slice
// The channels-last path (docs/kernels.md "CPU: the channels-last path"): NHWC variants and the
// layout conversions of the channels_last pass.
void register_layout(KernelRegistry& registry);                  // layout.cc: NCHW <-> NHWC
void register_conv2d_nhwc(KernelRegistry& registry);             // conv2d_nhwc.cc: gemm_nhwc
void register_conv2d_depthwise_nhwc(KernelRegistry& registry);   // conv2d_depthwise_nhwc.cc
void register_pool2d_nhwc(KernelRegistry& registry);             // pool2d_nhwc.cc
void register_squeeze_excite_nhwc(KernelRegistry& registry);     // squeeze_excite_nhwc.cc
void register_tensor_ops_nhwc(KernelRegistry& registry);         // tensor_ops_nhwc.cc: concat, slice,
                                                                 // channel_shuffle, flatten, reshape

}  // namespace infer::cpu
