// CPU depthwise_pointwise "fused_nhwc": the fuse_depthwise_pointwise node (a depthwise 3x3 / 5x5 conv2d
// at stride 1 or 2 and the 1x1 conv2d reading it: MobileNet's projection) on NHWC activations, the
// depthwise result never written to the arena. A task is a block of rb output rows of one image: the
// depthwise rows are computed into the thread's tile [rb*WO pixels][C] (depthwise_nhwc.h's row kernel, the
// conv2d.depthwise_nhwc arithmetic: channel vectors, the K x K weights in registers), sized to stay in
// L2, then the 1x1 runs over the tile as conv2d.gemm_nhwc runs a 1x1 (nhwc.h's register tile: kMR
// pixels x up to kNV vectors of output channels, A broadcast from the tile in place, the weight packed
// once in prepare() into the same column panels) with the bias, residual and activation in its
// epilogue, straight into y. Each output is therefore computed with the same operations, in the same
// order, as by the two unfused NHWC kernels. Threads: the kernels' team (thread_pool.h) over the row
// blocks, one tile per thread; one thread below kParallelMin multiply-adds.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/kernel.h"
#include "kernels/cpu/depthwise_nhwc.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

using dwk::DwDims;

// Multiply-adds (both stages) below which one thread runs the node: the depthwise kernel's 2^19.
constexpr int64_t kParallelMin = int64_t(1) << 19;
// A tile (rb output rows x C floats a pixel) is meant to stay in a core's L2 while the 1x1's panels
// pass over it: 96 KiB (MobileNetV2's 144 x 56 rows: 31.5 KiB each, three; 960 x 7: 26 KiB, three).
constexpr int64_t kTileBytes = 96 << 10;

struct DpDims {
  DwDims dw;     // the depthwise stage (its HO, WO are the node's)
  isa::Shape s;  // the ISA's GEMM tile
  int64_t CO;
  int64_t panels, pv, extra;  // column panels over CO, as conv2d.gemm_nhwc splits them
  int64_t first(int64_t j) const { return j * pv + std::min(j, extra); }
  int64_t vectors(int64_t j) const { return pv + (j < extra); }
  int64_t rb, blocks;  // output rows per task, row blocks per image
  int64_t slots;       // per-thread tiles
  int64_t tile_floats() const { return rb * dw.WO * dw.C; }
  size_t ws_bytes() const { return static_cast<size_t>(slots * tile_floats()) * sizeof(float); }
};

DpDims dp_dims(const NodeDesc& node) {
  const auto& p = std::get<DepthwisePointwiseParams>(node.params);
  const Shape& ys = node.output_shapes[0];
  DpDims d;
  d.dw = dwk::dw_dims(p.depthwise, node.input_shapes[0], node.input_shapes[1], ys[2], ys[3], node.isa);
  d.s = isa::shape(node.isa);
  d.CO = ys[1];
  const int64_t nvec = (d.CO + d.s.lanes - 1) / d.s.lanes;
  d.panels = (nvec + d.s.nv - 1) / d.s.nv;
  d.pv = d.panels ? nvec / d.panels : 0;
  d.extra = d.panels ? nvec % d.panels : 0;
  d.slots = omp_get_num_procs();
  const int64_t HO = std::max<int64_t>(d.dw.HO, 1), row_bytes = std::max<int64_t>(d.dw.WO * d.dw.C * 4, 1);
  // rows per task: the L2 budget, and at least two tasks a thread where the batch's rows allow
  int64_t rb = std::clamp<int64_t>(kTileBytes / row_bytes, 1, HO);
  rb = std::min(rb, std::max<int64_t>(1, (d.dw.N * HO + 2 * d.slots - 1) / (2 * d.slots)));
  d.rb = rb;
  d.blocks = (HO + rb - 1) / rb;
  return d;
}

struct DpPrepared {
  dwk::DwPrepared dw;    // [KH*KW][Cp] weights, [Cp] bias
  std::vector<float> b;  // the 1x1's panel j at C * first(j) * lanes: [C][vectors(j) * lanes], zeros past C_out
};

std::shared_ptr<void> dp_prepare(const NodeDesc& node) {
  const DpDims d = dp_dims(node);
  for (size_t i = 1; i <= 4; ++i)
    if (node.constants.size() <= i || !node.constants[i])
      throw Error("cpu depthwise_pointwise.fused_nhwc: the weights and biases must be constants");
  auto prep = std::make_shared<DpPrepared>();
  dwk::dw_pack(d.dw, node.constants[1], node.constants[2], prep->dw);
  const float* w = node.constants[3];  // [CO][C]
  const int64_t L = d.s.lanes, K = d.dw.C;
  prep->b.assign(static_cast<size_t>(K * (d.CO + L - 1) / L * L), 0.f);
  for (int64_t j = 0; j < d.panels; ++j) {
    const int64_t c0 = d.first(j) * L, ld = d.vectors(j) * L, cols = std::min(ld, d.CO - c0);
    float* panel = prep->b.data() + K * c0;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < cols; ++c) panel[k * ld + c] = w[(c0 + c) * K + k];
  }
  return prep;
}

// The 1x1 stage for panel j (NV vectors of output channels from c0, `cols` real): the tile's M pixels
// (C floats each), kMR at a time, into y (and res) at the tile's first pixel, CO floats a pixel; the
// register tile and epilogue of conv2d.gemm_nhwc.
template <class I, int NV, int A>
INFER_INLINE void pw_panel(const DpDims& d, const float* panel, int64_t c0, int64_t cols, const float* tile,
                           int64_t M, const float* bias, const float* res, float* y, const Activation& act) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes, MR = I::kMR;
  const int64_t K = d.dw.C, CO = d.CO;
  V init[NV];
  for (int q = 0; q < NV; ++q) {
    init[q] = V{};
    nhwc::load_upto<I>(init[q], bias + c0 + q * L, cols - q * L);
  }
  for (int64_t m = 0; m < M; m += MR) {
    const int64_t rows = std::min<int64_t>(MR, M - m);
    const float* arow[MR];
    for (int r = 0; r < MR; ++r) arow[r] = tile + (m + std::min<int64_t>(r, rows - 1)) * K;
    V acc[MR][NV];
    nhwc::accumulate_window<I, NV>(arow, 0, 1, K, panel, NV * L, init, acc);
    nhwc::store_tile<I, NV, A>(acc, rows, cols, res ? res + m * CO + c0 : nullptr, y + m * CO + c0, CO, act,
                               nullptr);
  }
}

template <class I, int A>
INFER_INLINE void pw_tile_act(const DpDims& d, const float* b, const float* tile, int64_t M, const float* bias,
                              const float* res, float* y, const Activation& act) {
  constexpr int L = I::kLanes;
  for (int64_t j = 0; j < d.panels; ++j) {
    const int64_t c0 = d.first(j) * L, nv = d.vectors(j), cols = std::min(nv * L, d.CO - c0);
    const float* panel = b + d.dw.C * c0;
    if (nv == 1) pw_panel<I, 1, A>(d, panel, c0, cols, tile, M, bias, res, y, act);
    else if (nv == 2 || I::kNV == 2) pw_panel<I, 2, A>(d, panel, c0, cols, tile, M, bias, res, y, act);
    else if constexpr (I::kNV >= 3) pw_panel<I, 3, A>(d, panel, c0, cols, tile, M, bias, res, y, act);
  }
}

template <class I>
INFER_INLINE void pw_tile_body(const DpDims& d, const float* b, const float* tile, int64_t M, const float* bias,
                               const float* res, float* y, const Activation& act) {
  switch (nhwc::act_class_of(act.kind)) {
    case nhwc::kActNone: return pw_tile_act<I, nhwc::kActNone>(d, b, tile, M, bias, res, y, act);
    case nhwc::kActRelu: return pw_tile_act<I, nhwc::kActRelu>(d, b, tile, M, bias, res, y, act);
    case nhwc::kActClip: return pw_tile_act<I, nhwc::kActClip>(d, b, tile, M, bias, res, y, act);
    case nhwc::kActVector: return pw_tile_act<I, nhwc::kActVector>(d, b, tile, M, bias, res, y, act);
    default: return pw_tile_act<I, nhwc::kActScalar>(d, b, tile, M, bias, res, y, act);
  }
}
INFER_PER_ISA(void, pw_tile, pw_tile_body,
              (const DpDims& d, const float* b, const float* tile, int64_t M, const float* bias, const float* res,
               float* y, const Activation& act),
              (d, b, tile, M, bias, res, y, act))

void dp_run(const KernelCall& call) {
  const DpDims d = dp_dims(call.node);
  const auto& p = std::get<DepthwisePointwiseParams>(call.node.params);
  const auto* prep = static_cast<const DpPrepared*>(call.prepared);
  if (!prep) throw Error("cpu depthwise_pointwise.fused_nhwc: not prepared for this node");
  if (!call.workspace) throw Error("cpu depthwise_pointwise.fused_nhwc: needs a workspace, got none");
  const DwDims& dw = d.dw;
  if (dw.N * dw.HO * dw.WO == 0 || d.CO == 0) return;
  const float* x = call.inputs[0];
  const float* bias = call.inputs[4];
  const float* res = p.pointwise.add_residual ? call.inputs[5] : nullptr;
  float* y = call.outputs[0];
  auto* ws = static_cast<float*>(call.workspace);
  const Activation dw_act = p.depthwise.activation, pw_act = p.pointwise.activation;
  const bool parallel = dw.N * dw.HO * dw.WO * (dw.C * dw.KH * dw.KW + dw.C * d.CO) >= kParallelMin;
  const dwk::DwRowFn dw_row = dwk::dw_row_fn(call.node.isa, dw, dw_act.kind);
  const auto pw_tile = pw_tile_for(call.node.isa);
  const float *dw_w = prep->dw.w.data(), *dw_b = prep->dw.bias.data(), *b = prep->b.data();
  parallel_for(
      dw.N * d.blocks, parallel,
      [&](int64_t t0, int64_t t1, int thread) {
        float* tile = ws + thread * d.tile_floats();
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t n = t / d.blocks, oy0 = t % d.blocks * d.rb, oy1 = std::min(dw.HO, oy0 + d.rb);
          for (int64_t oy = oy0; oy < oy1; ++oy)  // the depthwise rows, every channel, into the tile
            dw_row(dw, x, dw_w, dw_b, tile + (oy - oy0) * dw.WO * dw.C, n, oy, 0, dw.C, dw_act, nullptr);
          const int64_t pix = (n * dw.HO + oy0) * dw.WO;
          pw_tile(d, b, tile, (oy1 - oy0) * dw.WO, bias, res ? res + pix * d.CO : nullptr, y + pix * d.CO, pw_act);
        }
      },
      static_cast<int>(d.slots));
}

// What the pass fuses: a 3x3 / 5x5 depthwise at stride 1 or 2 (both axes alike), no dilation; constant
// weights and biases; 4-D shapes (the shape rule checked the rest).
bool dp_applicable(const NodeDesc& node) {
  const auto* p = std::get_if<DepthwisePointwiseParams>(&node.params);
  if (!p || node.input_shapes.size() < 5 || node.constants.size() < 5 || node.output_shapes.size() != 1) return false;
  for (size_t i = 1; i <= 4; ++i)
    if (!node.constants[i]) return false;
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4) return false;
  const Conv2DParams& dw = p->depthwise;
  return ws[2] == ws[3] && (ws[2] == 3 || ws[2] == 5) && dw.stride_h == dw.stride_w &&
         (dw.stride_h == 1 || dw.stride_h == 2) && dw.dilation_h == 1 && dw.dilation_w == 1;
}

size_t dp_workspace(const NodeDesc& node) { return dp_dims(node).ws_bytes(); }

}  // namespace

INFER_REGISTER_KERNELS(depthwise_pointwise_nhwc) {
  // The only non-reference variant; the pass fuses only where it applies (NHWC).
  registry.add("cpu", {
      {.op = "depthwise_pointwise", .name = "fused_nhwc", .priority = 25, .layouts = {Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .applicable = dp_applicable, .workspace_bytes = dp_workspace,
       .prepare = dp_prepare, .run = dp_run},
  });
}

}  // namespace infer::cpu
