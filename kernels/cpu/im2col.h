// Shared CPU building blocks for the GEMM-based convolutions (conv2d and the GEMM variants of
// conv_transpose2d and conv_pool2d): im2col of one NCHW sample (the geometry is infer/kernel.h's
// ConvProblem), a row-major sgemm wrapper over OpenBLAS, and the per-channel bias + activation
// epilogue. Callers own all memory (no allocation here). sgemm must not be called inside an OpenMP
// parallel region: OpenBLAS threads itself.
#pragma once

#include <cstddef>
#include <cstdint>

#include "infer/kernel.h"  // ConvProblem, conv2d_problem, im2col_is_identity
#include "infer/ops.h"

namespace infer::cpu {

// Writes the column matrix of one sample x [C,H,W] into col [C*KH*KW, HO*WO] (row-major, row
// (c*KH + ky)*KW + kx, column oy*WO + ox): col = x[c][oy*stride_h - pad_top + ky*dilation_h]
// [ox*stride_w - pad_left + kx*dilation_w], 0 outside the image. OpenMP-parallel over rows; call it outside any
// parallel region.
void im2col(const ConvProblem& g, const float* x, float* col);

// Row r of that column matrix only, single-threaded: for callers that split the rows over their own
// OpenMP loop (conv2d.packed_gemm fills col and runs its GEMM in one parallel region).
void im2col_row(const ConvProblem& g, const float* x, float* col, int64_t r);

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, row-major, leading dimensions in elements;
// op(X) = X^T when trans_x. cblas_sgemm underneath (threads itself). No-op when M, N or K is 0
// (with K == 0, C is scaled by beta).
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// y[r][c] = act_r(y[r][c] + bias[r]) for a [rows, cols] block with leading dimension ld; bias may be
// nullptr; act_r = channel_activation(act, slope, r) (slope: a per-channel PRelu's, row r's at
// slope[r], else nullptr). OpenMP-parallel. Use it on a conv output [CO, HO*WO] (one row per channel).
void bias_activation_rows(float* y, int64_t rows, int64_t cols, int64_t ld, const float* bias,
                          const Activation& act, const float* slope = nullptr);

// The activation in float, NaN-propagating like the reference (relu written as v < 0 ? 0 : v).
inline float activate(const Activation& a, float v);

// Applies act to n contiguous values in place (OpenMP-parallel); no-op for ActivationKind::None.
void activate_inplace(float* y, int64_t n, const Activation& act);

}  // namespace infer::cpu

// ---- inline definitions -----------------------------------------------------------------------
#include <cmath>

namespace infer::cpu {

// v clamped to [lo, hi], NaN kept (the comparisons are false for NaN).
inline float clamp_nan(float v, float lo, float hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

inline float activate(const Activation& a, float v) {
  switch (a.kind) {
    case ActivationKind::None: return v;
    case ActivationKind::Relu: return v < 0.f ? 0.f : v;
    case ActivationKind::LeakyRelu: return v < 0.f ? a.alpha * v : v;
    case ActivationKind::Tanh: return std::tanh(v);
    case ActivationKind::Sigmoid: return 1.f / (1.f + std::exp(-v));
    case ActivationKind::Clip: return clamp_nan(v, a.alpha, a.beta);
    case ActivationKind::HardSigmoid: return clamp_nan(a.alpha * v + a.beta, 0.f, 1.f);
    case ActivationKind::HardSwish: return v * clamp_nan(v + 3.f, 0.f, 6.f) * (1.f / 6.f);
    case ActivationKind::Silu: return v / (1.f + std::exp(-v));
    case ActivationKind::Elu: return v > 0.f ? v : a.alpha * std::expm1(v);
    case ActivationKind::Exp: return std::exp(v);
    case ActivationKind::Sqrt: return std::sqrt(v);
    case ActivationKind::Neg: return -v;
    case ActivationKind::Abs: return std::fabs(v);
    case ActivationKind::Softplus: return v > 0.f ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
    case ActivationKind::PRelu: break;  // per channel: kernels pass channel_activation() (infer/ops.h)
  }
  return v;
}

}  // namespace infer::cpu
