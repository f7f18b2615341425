// CPU dense "gemv" (batch 1: x [1,F_in], weight [F_out,F_in] as PyTorch, float32): y = act(W x + b)
// as dot products of the weight's rows with x, compiled per ISA level (isa.h). Eight rows at a time:
// per step one vector of x and one of each row (the last F_in % kLanes lanes masked, nhwc.h), eight
// independent FMA chains, then each accumulator summed across its lanes; bias and the fused
// activation (activation_simd.h) on the block's outputs. The weight is read in place, once: at batch 1
// a classifier (MobileNetV2's 1280 -> 1000, 5 MB) is a stream of its weight, and OpenBLAS's sgemv
// behind `dense.gemm` ran at 17 GFLOP/s (34 GB/s) there. Threads: the kernels' team (thread_pool.h)
// over blocks of 64 rows, guided; one thread below kParallelMin multiply-adds.
#include <algorithm>
#include <cstdint>

#include "infer/kernel.h"
#include "kernels/cpu/nhwc.h"  // first: its <immintrin.h> declares the target builtins
#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

constexpr int kRows = 8;           // rows per step: independent accumulators
constexpr int64_t kBlockRows = 64;  // rows per task of the thread team
// Multiply-adds below which one thread runs the node (a 64 KiB weight: ~5 us, about a wake-up).
constexpr int64_t kParallelMin = int64_t(1) << 14;

template <class I>
INFER_INLINE float lane_sum(const typename I::Vec& v) {
  float t[I::kLanes];
  mk::store(t, v);
  float s = 0.f;
  for (int l = 0; l < I::kLanes; ++l) s += t[l];
  return s;
}

// R rows of w from row o (each fi floats) dotted with x into y[o .. o + R), bias added.
template <class I, int R>
INFER_INLINE void dot_rows(const float* w, const float* x, const float* bias, float* y, int64_t o, int64_t fi) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  V acc[R];
  for (int r = 0; r < R; ++r) acc[r] = V{};
  const float* wr = w + o * fi;
  int64_t i = 0;
  for (; i + L <= fi; i += L) {
    V xv;
    mk::load(xv, x + i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      V wv;
      mk::load(wv, wr + r * fi + i);
      acc[r] += wv * xv;
    }
  }
  if (i < fi) {
    V xv;
    nhwc::load_n<I>(xv, x + i, fi - i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      V wv;
      nhwc::load_n<I>(wv, wr + r * fi + i, fi - i);
      acc[r] += wv * xv;
    }
  }
  for (int r = 0; r < R; ++r) y[o + r] = lane_sum<I>(acc[r]) + (bias ? bias[o + r] : 0.f);
}

// Outputs [o0, o1). slope: a fused per-channel PRelu's (feature f's at slope[f]), else nullptr.
template <class I>
INFER_INLINE void gemv_rows_body(const float* w, const float* x, const float* bias, float* y, int64_t fi,
                                 int64_t o0, int64_t o1, const Activation& act, const float* slope) {
  int64_t o = o0;
  for (; o + kRows <= o1; o += kRows) dot_rows<I, kRows>(w, x, bias, y, o, fi);
  for (; o < o1; ++o) dot_rows<I, 1>(w, x, bias, y, o, fi);
  if (slope) nhwc::prelu_span<I>(y + o0, slope + o0, o1 - o0);  // features are contiguous channels
  else activate_row<I>(y + o0, o1 - o0, act);
}
INFER_PER_ISA(void, gemv_rows, gemv_rows_body,
              (const float* w, const float* x, const float* bias, float* y, int64_t fi, int64_t o0, int64_t o1,
               const Activation& act, const float* slope),
              (w, x, bias, y, fi, o0, o1, act, slope))

void gemv_run(const KernelCall& call) {
  const int64_t FI = call.node.input_shapes[0][1], FO = call.node.input_shapes[1][0];
  const float *x = call.inputs[0], *w = call.inputs[1];
  const float* bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  float* y = call.outputs[0];
  const float* slope = prelu_slope(call);
  const Activation act = fused_activation(call.node.params);
  const auto rows = gemv_rows_for(call.node.isa);
  const int64_t blocks = (FO + kBlockRows - 1) / kBlockRows;
  parallel_for(blocks, FO * FI >= kParallelMin, [&](int64_t b0, int64_t b1, int) {
    rows(w, x, bias, y, FI, b0 * kBlockRows, std::min(FO, b1 * kBlockRows), act, slope);
  });
}

bool gemv_applicable(const NodeDesc& node) { return node.input_shapes[0][0] == 1; }

}  // namespace

INFER_REGISTER_KERNELS(dense_gemv) {
  // Above dense.gemm (10) where it applies: batch 1 (docs/kernels.md "CPU: dense gemv").
  registry.add("cpu", {
      {.op = "dense", .name = "gemv", .priority = 11, .isa = KernelVariant::Isa::PerIsa,
       .fuses_prelu = true, .applicable = gemv_applicable, .run = gemv_run},
  });
}

}  // namespace infer::cpu
