// CUDA transposed convolution (kernels/cuda/conv_transpose2d/) as seen from outside the kernels:
// the size of the `conventional` variant's zero-upsampled, padded input buffer, i.e. its workspace
// (the memory the unified kernel-segregation paper's Table 4 says the segregated kernels save).
#pragma once

#include <cstdint>

#include "engine/src/kernel_api.h"

namespace infer::cuda {

// Bytes of the conventional variant's upsampled buffer for the WHOLE batch in desc.precision's
// storage type: N * C_in * (HO + KH - 1) * (WO + KW - 1) * element_size, where HO + KH - 1 =
// (H-1)*s_h + 1 + (KH-1-pad_top) + (KH-1-pad_bottom) + output_padding_h (likewise W). For one
// float32 sample it equals cpu::conv_transpose2d_upsampled_bytes (495,616 for DCGAN layer 2).
// Throws infer::Error for nodes the conventional variant cannot run (padding >= kernel, bad shapes).
uint64_t conv_transpose2d_upsampled_bytes(const NodeDesc& desc);

}  // namespace infer::cuda
