// The CPU backend's registration entry point: every op family's variants.
#include "kernels/cpu/cpu_kernels.h"

namespace infer {

void register_cpu_kernels(KernelRegistry& registry) {
  cpu::register_conv2d(registry);
  cpu::register_conv2d_winograd(registry);
  cpu::register_conv2d_packed(registry);
  cpu::register_dense(registry);
  cpu::register_pool2d(registry);
  cpu::register_resize(registry);
  cpu::register_elementwise(registry);
  cpu::register_tensor_ops(registry);
  cpu::register_conv_transpose2d(registry);
  cpu::register_conv_pool2d(registry);
  cpu::register_binary(registry);
  cpu::register_pad2d(registry);
  cpu::register_instance_norm(registry);
  cpu::register_channel_ops(registry);
  cpu::register_squeeze_excite(registry);
  cpu::register_layout(registry);
  cpu::register_conv2d_nhwc(registry);
  cpu::register_conv2d_depthwise_nhwc(registry);
  cpu::register_pool2d_nhwc(registry);
  cpu::register_squeeze_excite_nhwc(registry);
  cpu::register_tensor_ops_nhwc(registry);
}

}  // namespace infer
