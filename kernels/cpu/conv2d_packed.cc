// CPU conv2d "packed_gemm": an ungrouped, undilated conv2d (NCHW fp32, any kernel, stride and padding,
// constant weight) as y[C_out, HO*WO] = w[C_out, K] col[K, HO*WO] with our own GEMM instead of
// OpenBLAS: the weight packed once in prepare() into blocks of 8 output channels (gemm_microkernel.h),
// the column matrix the input itself for a 1x1 stride-1 unpadded conv, else im2col into the workspace.
// Per sample one OpenMP loop (guided) over (column block, block of 8 output channels); each iteration runs the
// 8 x 48 register-blocked micro-kernel over its columns, full K at once, so bias, residual
// (add_residual) and activation are applied as the tile is stored. Columns are blocked so that a
// block of col (K x NC floats) stays in a core's L2 while every channel block passes over it. The
// last 1-15 columns (past the whole vectors) run through mk::accumulate_cols, one column per
// accumulator, straight from col. No BLAS, no allocation at run time.
// The default from 2^20 multiply-adds up (packed_priority: below, OpenBLAS's small-GEMM path wins).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {
namespace {

using mk::kLanes, mk::kMR, mk::v16, mk::v8, mk::load16, mk::store16;
constexpr int kNV = 3;                        // vectors of columns per micro-tile
constexpr int64_t kTileCols = kNV * kLanes;   // 48
// A column block of col (K x nc floats) is meant to stay in a core's L2 (Zen 4: 1 MiB) while every
// channel block passes over it; each further column block reads the whole packed weight again. Where
// the weight is the larger operand (C_out >= HO*WO: ResNet-50's 14x14 and 7x7 layers, weights of
// 0.5-9.4 MB) those re-reads from memory cost more than col spilling out of L2, so the budget is
// nearly all of L2 there (docs/kernels.md "CPU: conv2d packed_gemm": 384 KiB everywhere vs 960 KiB
// for the weight-heavy ones: ResNet-50 1024->256 1x1 at 14x14 0.61 -> 0.53 ms, 3x3 stride 2 to 7x7
// 1.56 -> 1.35; 960 KiB everywhere made the 56x56 convs slower, 0.59 -> 0.64, conv1 1.87 -> 1.94).
constexpr int64_t kColBlockBytes = 384 << 10;
constexpr int64_t kColBlockBytesWeightHeavy = 960 << 10;
constexpr int64_t kParallelMin = int64_t(1) << 15;  // multiply-adds below which one thread runs

struct PackedDims {
  ConvGeometry g;
  int64_t N, CO, K, P;  // P = HO*WO columns
  int64_t COB;          // blocks of kMR output channels
  int64_t full;         // columns in whole vectors (P rounded down to 16)
  int64_t nc;           // columns per column block (a multiple of kTileCols)
  int64_t NCB;          // column blocks, the partial vector (if any) in the last one
  bool identity;
  size_t col_floats() const { return identity ? 0 : static_cast<size_t>(K * P); }
};

PackedDims packed_dims(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  PackedDims d;
  d.g = conv_geometry(p, node.input_shapes[0], node.input_shapes[1], node.output_shapes[0]);
  d.N = node.input_shapes[0][0], d.CO = node.input_shapes[1][0];
  d.K = d.g.col_rows(), d.P = d.g.col_cols();
  d.COB = (d.CO + kMR - 1) / kMR;
  d.full = d.P / kLanes * kLanes;
  // as many blocks as the L2 budget needs, then equal ones (whole vectors): guided chunks are runs
  // of iterations, so a thread's share stays whole column blocks where there are several
  const int64_t block_bytes = d.CO >= d.P ? kColBlockBytesWeightHeavy : kColBlockBytes;
  const int64_t budget = std::max<int64_t>(kTileCols, block_bytes / (std::max<int64_t>(d.K, 1) * 4));
  d.NCB = std::max<int64_t>(1, (d.P + budget - 1) / budget);
  d.nc = ((d.P + d.NCB - 1) / d.NCB + kLanes - 1) / kLanes * kLanes;
  d.NCB = std::max<int64_t>(1, (d.P + d.nc - 1) / d.nc);
  d.identity = im2col_is_identity(d.g);
  return d;
}

struct Prepared {
  std::vector<float> a;  // [COB][K][kMR]
};

std::shared_ptr<void> prepare_weights(const NodeDesc& node) {
  const PackedDims d = packed_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv2d.packed_gemm: the weight must be a constant");
  auto prep = std::make_shared<Prepared>();
  prep->a.resize(static_cast<size_t>(d.COB * d.K * kMR));
  mk::pack_a(w, d.CO, d.K, d.K, prep->a.data());
  return prep;
}

// The epilogue of one micro-tile: rows [0, rows) of acc (output channels co0 + r), NV vectors of
// columns from y's column c0, of which `cols` are real (< 16 * NV only for the partial vector):
// + bias, + residual, ReLU on whole vectors, store. Other activations run over the whole block
// afterwards (act_block): their per-element calls (exp) cost less in one loop per row.
template <int NV>
__attribute__((always_inline)) inline void store_tile(v16 (&acc)[kMR][NV], int64_t rows, int64_t cols,
                                                      const float* bias, const float* res, float* y,
                                                      int64_t ld, bool relu) {
  for (int64_t r = 0; r < rows; ++r)
    for (int q = 0; q < NV; ++q) {
      v16 o = acc[r][q];
      if (bias) o += bias[r];
      const int64_t n = std::min<int64_t>(kLanes, cols - q * kLanes);
      if (n == kLanes) {
        if (res) {
          v16 rv;
          load16(rv, res + r * ld + q * kLanes);
          o += rv;
        }
        if (relu) o = o < 0.f ? v16{} : o;
        store16(y + r * ld + q * kLanes, o);
      } else {
        float out[kLanes];
        store16(out, o);
        for (int64_t l = 0; l < n; ++l) {
          float v = out[l] + (res ? res[r * ld + q * kLanes + l] : 0.f);
          y[r * ld + q * kLanes + l] = relu && v < 0.f ? 0.f : v;
        }
      }
    }
}

// The epilogue of the last R columns (accumulate_cols: acc[j] holds column j's 8 rows).
template <int R>
__attribute__((always_inline)) inline void store_cols(v8 (&acc)[R], int64_t rows, const float* bias,
                                                      const float* res, float* y, int64_t ld, bool relu) {
  float out[R][kMR];
  std::memcpy(out, acc, sizeof out);
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < R; ++j) {
      float v = out[j][r] + (bias ? bias[r] : 0.f) + (res ? res[r * ld + j] : 0.f);
      y[r * ld + j] = relu && v < 0.f ? 0.f : v;
    }
}

template <int R>
__attribute__((always_inline)) inline void cols_tile(const float* a, const float* b, int64_t ldb, int64_t K,
                                                     int64_t rows, const float* bias, const float* res, float* y,
                                                     bool relu) {
  v8 acc[R];
  mk::accumulate_cols<R>(a, b, ldb, K, acc);
  store_cols<R>(acc, rows, bias, res, y, ldb, relu);
}

// The activations other than ReLU on rows [0, rows) x columns [0, cols) of y (leading dimension ld).
void act_block(float* y, int64_t rows, int64_t cols, int64_t ld, const Activation& act) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * ld;
    for (int64_t c = 0; c < cols; ++c) row[c] = activate(act, row[c]);
  }
}

// Output channel block cb over columns [c0, c1) of a column block: 48-column tiles, then 32 or 16,
// then (in the last block) the 1-15 columns past the whole vectors, one column per accumulator.
__attribute__((target_clones("avx512f", "arch=haswell", "default")))
void gemm_block(const PackedDims& d, const float* a, const float* col, int64_t c0,
                int64_t c1, int64_t co0, const float* bias, const float* res, float* y, const Activation& act) {
  const int64_t rows = std::min<int64_t>(kMR, d.CO - co0);
  const int64_t P = d.P, K = d.K;
  const float* b = bias ? bias + co0 : nullptr;
  const float* r = res ? res + co0 * P : nullptr;
  float* yb = y + co0 * P;
  const int64_t full_end = std::min(c1, d.full);
  const bool relu = act.kind == ActivationKind::Relu;
  int64_t c = c0;
  for (; c + kTileCols <= full_end; c += kTileCols) {
    v16 acc[kMR][3];
    mk::accumulate<3>(a, col + c, P, K, acc);
    store_tile<3>(acc, rows, kTileCols, b, r ? r + c : nullptr, yb + c, P, relu);
  }
  if (full_end - c == 2 * kLanes) {
    v16 acc[kMR][2];
    mk::accumulate<2>(a, col + c, P, K, acc);
    store_tile<2>(acc, rows, 2 * kLanes, b, r ? r + c : nullptr, yb + c, P, relu);
    c += 2 * kLanes;
  } else if (full_end - c == kLanes) {
    v16 acc[kMR][1];
    mk::accumulate<1>(a, col + c, P, K, acc);
    store_tile<1>(acc, rows, kLanes, b, r ? r + c : nullptr, yb + c, P, relu);
    c += kLanes;
  }
  if (c1 == P && d.full < P) {  // the last 1-15 columns
    const float* rf = r ? r + d.full : nullptr;
    const float* cf = col + d.full;
    float* yf = yb + d.full;
    switch (P - d.full) {
#define INFER_COLS_CASE(R) \
  case R: cols_tile<R>(a, cf, P, K, rows, b, rf, yf, relu); break;
      INFER_COLS_CASE(1) INFER_COLS_CASE(2) INFER_COLS_CASE(3) INFER_COLS_CASE(4) INFER_COLS_CASE(5)
      INFER_COLS_CASE(6) INFER_COLS_CASE(7) INFER_COLS_CASE(8) INFER_COLS_CASE(9) INFER_COLS_CASE(10)
      INFER_COLS_CASE(11) INFER_COLS_CASE(12) INFER_COLS_CASE(13) INFER_COLS_CASE(14) INFER_COLS_CASE(15)
#undef INFER_COLS_CASE
    }
  }
  if (act.kind != ActivationKind::None && !relu) act_block(yb + c0, rows, c1 - c0, P, act);
}

void packed_run(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  const PackedDims d = packed_dims(call.node);
  const auto* prep = static_cast<const Prepared*>(call.prepared);
  if (!prep) throw Error("cpu conv2d.packed_gemm: not prepared for this node");
  if (!d.identity && !call.workspace) throw Error("cpu conv2d.packed_gemm: needs a workspace, got none");
  const float* x = call.inputs[0];
  const float* bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  const float* residual = p.add_residual ? call.inputs[3] : nullptr;
  float* y = call.outputs[0];
  float* colbuf = static_cast<float*>(call.workspace);
  const Activation act = fused_activation(call.node.params);
  const float* a = prep->a.data();
  const int64_t xs = d.g.C * d.g.H * d.g.W, ys = d.CO * d.P;
  const bool parallel = d.CO * d.K * d.P >= kParallelMin;
  // The column blocks: [cb * nc, min(P, (cb + 1) * nc)); the last one ends at P, partial vector included.

  for (int64_t n = 0; n < d.N; ++n) {
    const float* col = x + n * xs;
    if (!d.identity) {
      im2col(d.g, col, colbuf);  // OpenMP-parallel itself: outside our region
      col = colbuf;
    }
    const float* rn = residual ? residual + n * ys : nullptr;
    float* yn = y + n * ys;
    // column block outer: a thread's share of iterations is a run of whole column blocks where there
    // are several (col block in its L2, the small packed weight read again), else of channel blocks.
    // Guided, not static: with OMP_WAIT_POLICY=passive the other thread sleeps between regions and
    // starts tens of microseconds late; guided lets the first thread take its late share (halving
    // the wait) while keeping runs contiguous (docs/kernels.md "OpenMP schedules").
#pragma omp parallel for collapse(2) schedule(guided) if (parallel)
    for (int64_t jb = 0; jb < d.NCB; ++jb)
      for (int64_t cb = 0; cb < d.COB; ++cb) {
        const int64_t c0 = jb * d.nc, c1 = jb + 1 == d.NCB ? d.P : std::min(d.P, c0 + d.nc);
        gemm_block(d, a + cb * d.K * kMR, col, c0, c1, cb * kMR, bias, rn, yn, act);
      }
  }
}

// Ungrouped, undilated (im2col's column order is the weight's), a constant weight, a non-empty output.
bool packed_applicable(const NodeDesc& node) {
  if (!conv2d_ungrouped(node) || !has_constant_weight(node) || node.input_shapes.size() < 2) return false;
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  return xs.size() == 4 && ws.size() == 4 && ys.size() == 4 && ys[2] * ys[3] > 0 && ws[0] > 0 &&
         ws[1] * ws[2] * ws[3] > 0;
}

// The default choice (KernelVariant::priority_for; im2col_gemm has 10, Winograd 15 where it is
// chosen), from the 2-core AMD EPYC VM (2026-11-25, docs/kernels.md "CPU: conv2d packed_gemm"):
//  - inside the models (weights cold: OpenBLAS repacks them on every call, ours are packed once)
//    every ResNet-50 conv it takes was 0.98-1.41x im2col_gemm (model 42.1 -> 37.9 ms), ResNet-18
//    22.0 -> 20.3 ms, MobileNetV2 15.8 -> 12.7, EfficientNet-B0 37.3 -> 33.5 (paired runs);
//  - alone, below about 2^20 multiply-adds OpenBLAS's single-threaded small-GEMM path wins by a few
//    microseconds (16 -> 64 3x3 at 7x7, 451K: 0.024 vs 0.017 ms; 96 -> 24 1x1 at 14x14: 0.017-0.024
//    vs 0.011-0.015; LeNet's 1 -> 6 5x5: 0.009 vs 0.008); from 1.6M up packed_gemm is ahead or level
//    (256 -> 128 1x1 at 7x7: 0.040 vs 0.044; 64 -> 64 3x3 at 7x7, 1.8M: 0.085 vs 0.094).
constexpr int64_t kMinMacs = int64_t(1) << 20;

int packed_priority(const NodeDesc& node) {
  if (!packed_applicable(node)) return 8;
  const PackedDims d = packed_dims(node);
  return d.N * d.CO * d.K * d.P >= kMinMacs ? 12 : 8;
}

size_t packed_workspace(const NodeDesc& node) {
  const PackedDims d = packed_dims(node);
  return d.col_floats() * sizeof(float);
}

}  // namespace

void register_conv2d_packed(KernelRegistry& registry) {
  registry.add("cpu", {
      {.op = "conv2d", .name = "packed_gemm", .priority = 12, .priority_for = packed_priority,
       .applicable = packed_applicable,
       .workspace_bytes = packed_workspace,
       .prepare = prepare_weights,
       .run = packed_run},
  });
}

}  // namespace infer::cpu
