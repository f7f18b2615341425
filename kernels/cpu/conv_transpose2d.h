// CPU transposed convolution (kernels/cpu/conv_transpose2d.cc) as seen from outside the kernel: the
// banded im2col + sgemm driver that every GEMM-based transposed-conv and conv+pool variant shares,
// so their timings compare like with like. No allocation here; callers pass workspace.
#pragma once

#include <cstddef>
#include <cstdint>

#include "infer/ops.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {

// Output rows per band so that a band's column matrix (K x rows*WO floats) and GEMM tile (M x
// rows*WO) stay within ~4 MiB (L2/L3 resident on this machine), at least 1 and at most g.HO.
int64_t conv_band_rows(const ConvProblem& g, int64_t M);

// Floats of column-matrix workspace conv_gemm_banded needs for g with M output channels.
size_t conv_band_col_floats(const ConvProblem& g, int64_t M);

// Convolution of one sample as banded im2col + sgemm: y[m][oy*WO + ox] (row m at y + m*ldy) =
// sum_k A[m][k] * col[k][oy*WO + ox] for every output row, A [M, C*KH*KW] row-major. `col` holds
// conv_band_col_floats(g, M) floats. After each band, bias + act is applied to that band (bias may
// be nullptr; slope: a per-channel PRelu's, row m's at slope[m], else nullptr) while it is still in
// cache. Call outside any OpenMP parallel region.
void conv_gemm_banded(const ConvProblem& g, const float* A, int64_t M, const float* x, float* col,
                      float* y, int64_t ldy, const float* bias, const Activation& act,
                      const float* slope = nullptr);

}  // namespace infer::cpu
