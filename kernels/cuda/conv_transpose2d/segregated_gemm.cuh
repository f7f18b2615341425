// What segregated_gemm.cu (the tiled implicit-GEMM kernel) and segregated_gemm_skinny.cu (the
// weight-streaming kernel for <= 64 columns) share: the tile sizes, the precision -> GEMM mode map,
// the four phases' GEMM geometry (SegArgs, a pure function of the node) and the prepared weights'
// layout [phase][C_out padded to kBM][K padded to the k-tile], and the implicit gather of a phase's B
// column from the un-upsampled x (both kernels map one thread to one column). CUDA-C only (.cu files).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_transpose2d/common.h"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_tiles.cuh"

namespace infer::cuda::tconv {

constexpr int kBM = 64, kBN = 64;
constexpr int kMaxSplits = 8;  // the portable cluster size

// GemmMode, gemm_mode(Precision): kernels/cuda/gemm_tiles.cuh.
template <GemmMode M> struct GemmCfg;
template <> struct GemmCfg<GemmMode::Half> {
  using T = __half;
  static constexpr int kBK = 32, kThreads = 128, kPadA = 8, kPadB = 8;
};
template <> struct GemmCfg<GemmMode::Tf32> {
  using T = float;
  static constexpr int kBK = 32, kThreads = 128, kPadA = 4, kPadB = 4;
};
template <> struct GemmCfg<GemmMode::Simt> {
  using T = float;
  static constexpr int kBK = 16, kThreads = 256, kPadA = 4, kPadB = 4;
};

inline int gemm_bk(Precision p) {
  return gemm_mode(p) == GemmMode::Simt ? GemmCfg<GemmMode::Simt>::kBK : 32;
}

struct SegPhase {
  int64_t a_offset;  // elements into the prepared weights
  int k, k_pad;      // K of this phase and K rounded up to the k-tile
  int nj, ni;        // taps along H and W
  int64_t first_h, first_w, count_h, count_w, q0h, q0w;
  int64_t ncols;     // batch * count_h * count_w
};

struct SegArgs {
  SegPhase ph[4];
  int64_t CI, H, W, CO, HO, WO;
  int64_t ncols_max;
  int splits;  // blocks per cluster along z, each a slice of K (1: no split)
};

struct SegPrepared {
  PreparedFor made_for;
  int bk;
  int64_t a_offset[4];
  int k_pad[4];
  std::unique_ptr<DeviceArray> w;
};

// Column j of a phase's GEMM is output pixel (first_h + 2m, first_w + 2mm) of sample n; its implicit
// B column reads xn[ci][iy0 + ty][ix0 + tx] (xn: sample n of x) for k = (ty*ni + tx)*CI + ci. n, m
// and mm are 0 when !ok.
template <class T>
struct PhaseColumn {
  int64_t n = 0, m = 0, mm = 0;
  const T* xn;
  int64_t iy0, ix0;
};

template <class T>
__device__ __forceinline__ PhaseColumn<T> phase_column(const T* x, const SegArgs& a, const SegPhase& P,
                                                       int64_t j, bool ok) {
  PhaseColumn<T> c;
  if (ok) {
    const int64_t hw = P.count_h * P.count_w;
    c.n = j / hw;
    const int64_t r = j - c.n * hw;
    c.m = r / P.count_w;
    c.mm = r - c.m * P.count_w;
  }
  c.xn = x + c.n * a.CI * a.H * a.W;
  c.iy0 = P.q0h + c.m - (P.nj - 1);
  c.ix0 = P.q0w + c.mm - (P.ni - 1);
  return c;
}

// kPer elements of the column's B: rows k_first + i*kStep (i < kPer) into out. Zero outside the
// input, at k >= K (the padded tail of the k-tile) and when !col_ok. The first row is decomposed into
// (tap, ci) once; later rows step ci by kStep and carry into the tap.
template <class T, int kPer, int kStep>
__device__ __forceinline__ void gather_b(T (&out)[kPer], const PhaseColumn<T>& col, const SegPhase& P,
                                         const SegArgs& a, bool col_ok, int k_first) {
  int tap = k_first / int(a.CI);
  int ci = k_first - tap * int(a.CI);
  int ty = tap / max(P.ni, 1);
  int tx = tap - ty * P.ni;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int k = k_first + i * kStep;
    T v = from_float<T>(0.f);
    if (col_ok && k < P.k) {
      const int64_t iy = col.iy0 + ty, ix = col.ix0 + tx;
      if (iy >= 0 && iy < a.H && ix >= 0 && ix < a.W) v = col.xn[(int64_t(ci) * a.H + iy) * a.W + ix];
    }
    out[i] = v;
    ci += kStep;
    while (ci >= int(a.CI)) {
      ci -= int(a.CI);
      if (++tx == P.ni) {
        tx = 0;
        ++ty;
      }
    }
  }
}

// The skinny path (segregated_gemm_skinny.cu): the columns per phase it takes (16, 32 or 64; 0: use
// the tiled kernel), and its launch for storage type T (float or __half) with nc columns.
int skinny_cols(const SegArgs& a);
template <class T>
void launch_skinny(Context& ctx, const TconvCall& c, const SegPrepared& prep, const SegArgs& a, int nc);

}  // namespace infer::cuda::tconv
