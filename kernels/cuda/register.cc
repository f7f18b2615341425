// The CUDA backend's registration entry point: every op family's variants (backend "cuda").
#include "kernels/cuda/cuda_kernels.h"

namespace infer {

void register_cuda_kernels(KernelRegistry& registry) {
  cuda::register_conv2d(registry);
  cuda::register_dense(registry);
  cuda::register_pool2d(registry);
  cuda::register_resize(registry);
  cuda::register_elementwise(registry);
  cuda::register_tensor_ops(registry);
  cuda::register_conv_transpose2d(registry);
  cuda::register_conv_pool2d(registry);
  cuda::register_layout(registry);
  cuda::register_binary(registry);
  cuda::register_conv_transpose2d_projection(registry);
  cuda::register_conv_transpose2d_segregated_mma(registry);
  cuda::register_conv2d_small_cout_nhwc(registry);
  cuda::register_conv2d_small_cin_nhwc(registry);
  cuda::register_conv2d_depthwise(registry);
  cuda::register_pad2d(registry);
  cuda::register_instance_norm(registry);
  cuda::register_channel_ops(registry);
  cuda::register_squeeze_excite(registry);
#ifdef INFER_WITH_CUDNN
  cuda::register_conv2d_cudnn(registry);
  cuda::register_conv_transpose2d_cudnn(registry);
  cuda::register_conv_pool2d_cudnn(registry);
#endif
#ifdef INFER_WITH_CUTLASS
  cuda::register_conv2d_cutlass(registry);
  cuda::register_conv_transpose2d_cutlass(registry);
#endif
}

}  // namespace infer
