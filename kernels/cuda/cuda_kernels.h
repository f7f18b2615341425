// The CUDA backend's op families, one registration function per file of kernels/cuda/ (register.cc
// calls them all). Variant names match the CPU backend's where the method is the same.
#pragma once

#include "engine/src/kernel_api.h"

namespace infer::cuda {

void register_conv2d(KernelRegistry& registry);            // conv2d.cu
void register_dense(KernelRegistry& registry);             // dense.cu
void register_pool2d(KernelRegistry& registry);            // pool2d.cu
void register_resize(KernelRegistry& registry);            // resize.cu (resize, depth_to_space)
void register_elementwise(KernelRegistry& registry);       // elementwise.cu: activation, add, batchnorm
void register_tensor_ops(KernelRegistry& registry);        // tensor_ops.cu: flatten, reshape, softmax, concat
void register_conv_transpose2d(KernelRegistry& registry);  // conv_transpose2d.cu
void register_conv_pool2d(KernelRegistry& registry);       // conv_pool2d.cu
void register_layout(KernelRegistry& registry);            // layout.cu: NCHW <-> NHWC copies
void register_conv_transpose2d_projection(KernelRegistry& registry);  // conv_transpose2d_projection.cc
void register_conv2d_small_cout_nhwc(KernelRegistry& registry);      // conv2d_small_cout_nhwc.cu
#ifdef INFER_WITH_CUDNN
void register_conv2d_cudnn(KernelRegistry& registry);            // conv2d_cudnn.cc
void register_conv_transpose2d_cudnn(KernelRegistry& registry);  // conv_transpose2d_cudnn.cc
#endif

}  // namespace infer::cuda
