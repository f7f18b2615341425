// What segregated_gemm.cu (the tiled implicit-GEMM kernel) and segregated_gemm_skinny.cu (the
// weight-streaming kernel for <= 64 columns) share: the tile sizes, the precision -> GEMM mode map,
// the four phases' GEMM geometry (SegArgs, a pure function of the node) and the prepared weights'
// layout [phase][C_out padded to kBM][K padded to the k-tile]. CUDA-C only (.cu files).
#pragma once

#include <cuda_fp16.h>

#include "kernels/cuda/conv_transpose2d/common.h"

namespace infer::cuda::tconv {

constexpr int kBM = 64, kBN = 64;
constexpr int kMaxSplits = 8;  // the portable cluster size

enum class GemmMode { Half, Tf32, Simt };

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

inline GemmMode gemm_mode(Precision p) {
  return p == Precision::FP16 ? GemmMode::Half : p == Precision::TF32 ? GemmMode::Tf32 : GemmMode::Simt;
}
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
  Precision precision;
  int bk;
  int64_t CO, CI, KH, KW;
  int64_t a_offset[4];
  int k_pad[4];
  std::unique_ptr<DeviceArray> w;
};

// The skinny path (segregated_gemm_skinny.cu): the columns per phase it takes (16, 32 or 64; 0: use
// the tiled kernel), and its launch for storage type T (float or __half) with nc columns.
int skinny_cols(const SegArgs& a);
template <class T>
void launch_skinny(Context& ctx, const TconvCall& c, const SegPrepared& prep, const SegArgs& a, int nc);

}  // namespace infer::cuda::tconv
