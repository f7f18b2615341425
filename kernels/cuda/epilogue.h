// Shared CUDA epilogues and conversions: per-channel bias (+ residual) + fused activation over an NCHW
// or NHWC tensor in place (after a cuBLAS GEMM, which cannot add a per-row bias in NCHW order), and
// float32 <-> half conversion of graph inputs and outputs under Precision::FP16. All asynchronous on the
// given stream.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.h"

namespace infer::cuda {

// y[n][c][i] = act(y[n][c][i] + bias[c] + residual[n][c][i]) for n < batch, c < channels, i < inner.
// bias and residual may be null; with neither and no activation nothing is launched. y, bias and
// residual are in p's storage type; residual (a conv2d's add_residual input) must not alias y.
// With act a per-channel PRelu (ActivationKind::PRelu, the fuse_prelu pass), `slope` [channels] (p's
// storage type, the node's last input: prelu_slope()) gives channel c's y < 0 ? slope[c] * y : y.
void bias_activation(Context& ctx, Precision p, void* y, const void* bias, int64_t batch,
                     int64_t channels, int64_t inner, Activation act, const void* residual = nullptr,
                     const void* slope = nullptr);

// The same over an NHWC tensor: y[r][c] = act(y[r][c] + bias[c] + residual[r][c]) for r < rows
// (N*H*W), c < channels.
void bias_activation_nhwc(Context& ctx, Precision p, void* y, const void* bias, int64_t rows,
                          int64_t channels, Activation act, const void* residual = nullptr,
                          const void* slope = nullptr);

void convert_f32_to_f16(const float* in, void* out_half, int64_t n, cudaStream_t stream);
void convert_f16_to_f32(const void* in_half, float* out, int64_t n, cudaStream_t stream);

}  // namespace infer::cuda
