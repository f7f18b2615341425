// The CUDA backend's op families, one registration function per file of kernels/cuda/ or per op folder
// (kernels/cuda/conv2d/, conv_transpose2d/, conv_pool2d/); register.cc calls them all. Variant names
// match the CPU backend's where the method is the same.
#pragma once

#include "engine/src/kernel_api.h"

namespace infer::cuda {

void register_conv2d(KernelRegistry& registry);            // conv2d/register.cc (gemm.cu, direct.cu)
void register_dense(KernelRegistry& registry);             // dense.cu
void register_pool2d(KernelRegistry& registry);            // pool2d.cu
void register_resize(KernelRegistry& registry);            // resize.cu (resize, depth_to_space)
void register_elementwise(KernelRegistry& registry);       // elementwise.cu: activation, add, batchnorm
void register_tensor_ops(KernelRegistry& registry);        // tensor_ops.cu: flatten, reshape, softmax, concat
void register_conv_transpose2d(KernelRegistry& registry);  // conv_transpose2d/register.cc
void register_conv_pool2d(KernelRegistry& registry);       // conv_pool2d/gemm.cu
void register_layout(KernelRegistry& registry);            // layout.cu: NCHW <-> NHWC copies
void register_binary(KernelRegistry& registry);            // binary.cu: add, sub, mul, div, broadcast
void register_conv_transpose2d_projection(KernelRegistry& registry);  // conv_transpose2d/projection.cc
void register_conv_transpose2d_segregated_mma(KernelRegistry& registry);  // conv_transpose2d/segregated_mma_nhwc.cu
void register_conv2d_small_cout_nhwc(KernelRegistry& registry);      // conv2d/small_cout_nhwc.cu
void register_conv2d_small_cin_nhwc(KernelRegistry& registry);       // conv2d/small_cin_nhwc.cu
void register_conv2d_depthwise(KernelRegistry& registry);            // conv2d/depthwise.cu
void register_pad2d(KernelRegistry& registry);             // pad2d.cu
void register_instance_norm(KernelRegistry& registry);     // instance_norm.cu
void register_squeeze_excite(KernelRegistry& registry);    // squeeze_excite.cu
void register_channel_ops(KernelRegistry& registry);       // channel_ops.cu: channel_shuffle, slice
#ifdef INFER_WITH_CUDNN
void register_conv2d_cudnn(KernelRegistry& registry);            // conv2d/cudnn.cc
void register_conv_transpose2d_cudnn(KernelRegistry& registry);  // conv_transpose2d/cudnn.cc
void register_conv_pool2d_cudnn(KernelRegistry& registry);       // conv_pool2d/cudnn.cu
#endif
#ifdef INFER_WITH_CUTLASS
void register_conv2d_cutlass(KernelRegistry& registry);            // conv2d/cutlass.cu
void register_conv_transpose2d_cutlass(KernelRegistry& registry);  // conv_transpose2d/cutlass.cu
#endif

}  // namespace infer::cuda
