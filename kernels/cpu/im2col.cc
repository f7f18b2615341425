// im2col, the row-major sgemm wrapper and the bias + activation epilogue shared by the CPU GEMM
// convolutions (see im2col.h). im2col maps one OpenMP iteration to one column-matrix row (c, ky, kx);
// within a row, output rows whose input row is outside the image are zero-filled and the rest copy
// the valid column range (a memcpy at stride 1), so no bounds test runs per element.
#include "kernels/cpu/im2col.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <string>

#include <cblas.h>

#include "infer/error.h"

namespace infer::cpu {
namespace {

// Loops smaller than this many elements run on one thread: waking a thread team costs more than they
// do (and far more on a loaded machine).
constexpr int64_t kParallelMin = int64_t(1) << 15;


// The indices t in [lo, hi) of [0, count) for which t * stride + offset lies in [0, limit).
void valid_range(int64_t count, int64_t stride, int64_t offset, int64_t limit, int64_t& lo,
                 int64_t& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last = limit - 1 - offset;
  hi = last < 0 ? 0 : last / stride + 1;
  hi = std::min(hi, count);
  lo = std::min(lo, hi);
}

void check_blas_dim(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw Error(std::string("sgemm: ") + what + " = " + std::to_string(v) +
                " is outside the BLAS integer range");
}

}  // namespace

void im2col(const ConvProblem& g, const float* x, float* col) {
  const int64_t rows = g.col_rows(), cols = g.col_cols();
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) im2col_row(g, x, col, r);
}

void im2col_row(const ConvProblem& g, const float* x, float* col, int64_t r) {
  const int64_t cols = g.col_cols();
  const int64_t c = r / (g.KH * g.KW), ky = (r / g.KW) % g.KH, kx = r % g.KW;
  const float* xp = x + c * g.H * g.W;
  float* out = col + r * cols;
  int64_t oy_lo, oy_hi, ox_lo, ox_hi;
  const int64_t dy = ky * g.dilation_h, dx = kx * g.dilation_w;
  valid_range(g.HO, g.stride_h, dy - g.pad_top, g.H, oy_lo, oy_hi);
  valid_range(g.WO, g.stride_w, dx - g.pad_left, g.W, ox_lo, ox_hi);
  std::fill(out, out + oy_lo * g.WO, 0.f);
  for (int64_t oy = oy_lo; oy < oy_hi; ++oy) {
    float* o = out + oy * g.WO;
    const float* xrow = xp + (oy * g.stride_h - g.pad_top + dy) * g.W + dx - g.pad_left;
    std::fill(o, o + ox_lo, 0.f);
    if (g.stride_w == 1) {
      if (ox_hi > ox_lo) std::memcpy(o + ox_lo, xrow + ox_lo, sizeof(float) * (ox_hi - ox_lo));
    } else if (g.stride_w == 2) {  // a constant stride: the compiler vectorises the gather
      for (int64_t ox = ox_lo; ox < ox_hi; ++ox) o[ox] = xrow[ox * 2];
    } else {
      for (int64_t ox = ox_lo; ox < ox_hi; ++ox) o[ox] = xrow[ox * g.stride_w];
    }
    std::fill(o + ox_hi, o + g.WO, 0.f);
  }
  std::fill(out + oy_hi * g.WO, out + cols, 0.f);
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  check_blas_dim(M, "M");
  check_blas_dim(N, "N");
  check_blas_dim(K, "K");
  check_blas_dim(lda, "lda");
  check_blas_dim(ldb, "ldb");
  check_blas_dim(ldc, "ldc");
  if (M == 0 || N == 0) return;
  if (K == 0) {  // BLAS would do this too, but some builds read A/B anyway
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

void bias_activation_rows(float* y, int64_t rows, int64_t cols, int64_t ld, const float* bias,
                          const Activation& channel_act, const float* slope) {
  if (!bias && channel_act.kind == ActivationKind::None) return;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * ld;
    const float b = bias ? bias[r] : 0.f;
    const Activation act = channel_activation(channel_act, slope, r);
    switch (act.kind) {  // one loop per kind keeps the common cases vectorizable
      case ActivationKind::None:
        for (int64_t c = 0; c < cols; ++c) row[c] += b;
        break;
      case ActivationKind::Relu:
        for (int64_t c = 0; c < cols; ++c) {
          const float v = row[c] + b;
          row[c] = v < 0.f ? 0.f : v;
        }
        break;
      case ActivationKind::LeakyRelu:  // and a per-channel PRelu's row
        for (int64_t c = 0; c < cols; ++c) {
          const float v = row[c] + b;
          row[c] = v < 0.f ? act.alpha * v : v;
        }
        break;
      default:
        for (int64_t c = 0; c < cols; ++c) row[c] = activate(act, row[c] + b);
    }
  }
}

void activate_inplace(float* y, int64_t n, const Activation& act) {
  if (act.kind == ActivationKind::None) return;
  if (act.kind == ActivationKind::Relu) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0.f ? 0.f : y[i];
    return;
  }
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = activate(act, y[i]);
}

}  // namespace infer::cpu
