// CPU conv2d "gemm_nhwc": an ungrouped, undilated conv2d on NHWC activations (the channels_last pass)
// as one GEMM over the whole batch, y[M = N*HO*WO][CO] = A[M][K] B[K][CO], K = KH*KW*C_in, a row of A
// being one output pixel's input window in (ky, kx, c) order. The weight is packed once in prepare()
// into column panels of up to the ISA's kNV vectors (48 output channels on AVX-512, 24 on AVX2, 8 on
// baseline), the vectors spread evenly over the panels (64 channels on AVX-512: two panels of 2
// vectors, not 3 + 1: a 1-vector tile broadcasts once per FMA), B[k][panel columns] contiguous,
// zeros past C_out. The micro-kernel (accumulate_window, the tile shape of isa.h's packed GEMM)
// holds kMR pixels x kNV vectors of output channels in registers (8 x 3x16 on AVX-512, 4 x 3x8 on
// AVX2, 4 x 2x4 on baseline) and broadcasts A from each pixel's row in place:
//  - 1x1 (any stride; a 1x1 kernel has no padding): a pixel's row is its input pixel, x itself (C_in
//    contiguous floats). No copy at all.
//  - KxK: an implicit GEMM, a pixel's window read in place too: its KH tap rows are each KW*C_in
//    contiguous floats, one image row apart. A tile whose windows reach into the padding gathers
//    them (zeros outside the image) into the thread's kMR rows of the workspace first.
// The accumulators start at the bias (one vector per 16 / 8 / 4 output channels); the epilogue adds
// the residual (add_residual) and the fused activation (ReLU, Clip, HardSigmoid, HardSwish in
// registers, others per element after the tile's store) and stores the tile; the last vector of a
// C_out that is not a multiple of the vector width is a masked store (nhwc.h). Threads: over (pixel block, panel) pairs, guided, on the
// kernels' spinning team (thread_pool.h); one thread below kParallelMin multiply-adds.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cpu/conv_call.h"
#include "infer/kernel.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

// A block of rows (pixels x K floats of input windows) is meant to stay in a core's L2 while the
// panels pass over it.
constexpr int64_t kBlockBytes = 256 << 10;
// Multiply-adds below which one thread runs the node: waking the second thread costs ~7 us under
// OMP_WAIT_POLICY=passive (docs/kernels.md "CPU: the channels-last path"); 2^21 is ~20 us of one
// thread's work (192 -> 64 1x1 at 14x14, 2.4M: 20 us on one thread, 14 on two).
constexpr int64_t kParallelMin = int64_t(1) << 21;

struct NhwcDims {
  isa::Shape s;
  int64_t N, C, H, W, CO, HO, WO, KH, KW, sh, sw, pt, pl;
  int64_t K, M;       // K = KH*KW*C, M = N*HO*WO rows (pixels of every image)
  bool identity;      // 1x1, stride 1, same size: row m is x + m*C
  int64_t seg;        // KW*C: a tap row of a pixel's window, contiguous in NHWC
  int64_t panels;     // column panels over CO
  int64_t pv, extra;  // vectors per panel; the first `extra` panels have one more
  // Panel j: its first vector and its vectors (B holds it at K * first * lanes floats).
  int64_t first(int64_t j) const { return j * pv + std::min(j, extra); }
  int64_t vectors(int64_t j) const { return pv + (j < extra); }
  int64_t mb, MB;     // rows per block (a multiple of kMR), blocks
  int64_t slots;      // per-thread buffers of kMR gathered rows (border tiles of a KxK conv)
  size_t ws_floats() const { return KH * KW > 1 ? static_cast<size_t>(slots * s.mr * K) : 0; }
};

NhwcDims nhwc_dims(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  NhwcDims d;
  d.s = isa::shape(node.isa);
  d.N = xs[0], d.C = xs[1], d.H = xs[2], d.W = xs[3];
  d.CO = ws[0], d.KH = ws[2], d.KW = ws[3], d.HO = ys[2], d.WO = ys[3];
  d.sh = p.stride_h, d.sw = p.stride_w, d.pt = p.pad.top, d.pl = p.pad.left;
  d.K = d.KH * d.KW * d.C, d.M = d.N * d.HO * d.WO;
  d.identity = d.KH * d.KW == 1 && d.sh == 1 && d.sw == 1 && d.HO == d.H && d.WO == d.W;
  d.seg = d.KW * d.C;
  const int64_t nvec = (d.CO + d.s.lanes - 1) / d.s.lanes;
  d.panels = (nvec + d.s.nv - 1) / d.s.nv;
  d.pv = d.panels ? nvec / d.panels : 0;
  d.extra = d.panels ? nvec % d.panels : 0;
  const int64_t mr = d.s.mr;
  // rows per block: the L2 budget, at most 512, and at least 4 blocks where there are 4 * kMR rows
  int64_t mb = std::clamp<int64_t>(kBlockBytes / (std::max<int64_t>(d.K, 1) * 4), mr, 512);
  mb = std::min(mb, std::max<int64_t>(mr, (d.M + 3) / 4));
  d.mb = (mb + mr - 1) / mr * mr;
  d.MB = (d.M + d.mb - 1) / d.mb;
  d.slots = omp_get_num_procs();
  return d;
}

struct NhwcPrepared {
  std::vector<float> b;  // panel j at K * first(j) * lanes: [K][vectors(j) * lanes], zeros past C_out
};

std::shared_ptr<void> nhwc_prepare(const NodeDesc& node) {
  const NhwcDims d = nhwc_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv2d.gemm_nhwc: the weight must be a constant");
  auto prep = std::make_shared<NhwcPrepared>();
  const int64_t L = d.s.lanes;
  prep->b.assign(static_cast<size_t>(d.K * (d.CO + L - 1) / L * L), 0.f);
  for (int64_t j = 0; j < d.panels; ++j) {
    const int64_t c0 = d.first(j) * L, ld = d.vectors(j) * L, cols = std::min(ld, d.CO - c0);
    float* panel = prep->b.data() + d.K * c0;
    for (int64_t ky = 0; ky < d.KH; ++ky)
      for (int64_t kx = 0; kx < d.KW; ++kx)
        for (int64_t ci = 0; ci < d.C; ++ci) {
          const int64_t k = (ky * d.KW + kx) * d.C + ci;
          for (int64_t c = 0; c < cols; ++c)
            panel[k * ld + c] = w[(((c0 + c) * d.C + ci) * d.KH + ky) * d.KW + kx];
        }
  }
  return prep;
}

// Pixel m's window, gathered into row (K floats, (ky, kx, c) order): zeros outside the image.
INFER_INLINE void gather_row(const NhwcDims& d, const float* x, int64_t m, float* row) {
  const int64_t P = d.HO * d.WO, n = m / P, pix = m - n * P, oy = pix / d.WO, ox = pix - oy * d.WO;
  const int64_t iy0 = oy * d.sh - d.pt, ix0 = ox * d.sw - d.pl, C = d.C;
  for (int64_t ky = 0; ky < d.KH; ++ky) {
    const int64_t iy = iy0 + ky;
    float* out = row + ky * d.seg;
    const float* xr = x + ((n * d.H + iy) * d.W + ix0) * C;
    for (int64_t kx = 0; kx < d.KW; ++kx) {
      const int64_t ix = ix0 + kx;
      if (iy >= 0 && iy < d.H && ix >= 0 && ix < d.W) {
        for (int64_t c = 0; c < C; ++c) out[kx * C + c] = xr[kx * C + c];
      } else {
        for (int64_t c = 0; c < C; ++c) out[kx * C + c] = 0.f;
      }
    }
  }
}

template <class I, int NV, int A>
INFER_INLINE void tile(const NhwcDims& d, const float* const (&arow)[I::kMR], int64_t stride, const float* panel,
                       int64_t rows, int64_t cols, const float* bias, const float* res, float* y,
                       const Activation& act, const float* slope) {
  using V = typename I::Vec;
  V init[NV];
  for (int q = 0; q < NV; ++q) {
    init[q] = V{};
    if (bias) nhwc::load_upto<I>(init[q], bias + q * I::kLanes, cols - q * I::kLanes);
  }
  V acc[I::kMR][NV];
  nhwc::accumulate_window<I, NV>(arow, stride, d.KH, d.seg, panel, NV * I::kLanes, init, acc);
  nhwc::store_tile<I, NV, A>(acc, rows, cols, res, y, d.CO, act, slope);
}

// Rows [m0, m1) of the output times panel j. A tile of kMR pixels
// reads its windows in place where all of them are inside the image, else gathers them into buf.
template <class I, int A>
INFER_INLINE void panel_rows_act(const NhwcDims& d, const float* b, int64_t j, const float* x, float* buf,
                                 int64_t m0, int64_t m1, const float* bias, const float* res, float* y,
                                 const Activation& act, const float* slope) {
  constexpr int L = I::kLanes, MR = I::kMR;
  const int64_t c0 = d.first(j) * L, nv = d.vectors(j), cols = std::min(nv * L, d.CO - c0);
  const float* panel = b + d.K * c0;
  const float* bj = bias ? bias + c0 : nullptr;
  const float* sj = slope ? slope + c0 : nullptr;
  const int64_t P = d.HO * d.WO, C = d.C, W = d.W, H = d.H;
  for (int64_t m = m0; m < m1; m += MR) {
    const int64_t rows = std::min<int64_t>(MR, m1 - m);
    const float* arow[MR];
    int64_t stride = W * C;
    if (d.identity) {
      for (int r = 0; r < MR; ++r) arow[r] = x + (m + std::min<int64_t>(r, rows - 1)) * C;
    } else {
      bool inside = true;
      for (int r = 0; r < MR; ++r) {
        const int64_t mm = m + std::min<int64_t>(r, rows - 1);
        const int64_t n = mm / P, pix = mm - n * P, oy = pix / d.WO, ox = pix - oy * d.WO;
        const int64_t iy0 = oy * d.sh - d.pt, ix0 = ox * d.sw - d.pl;
        inside = inside && iy0 >= 0 && iy0 + d.KH <= H && ix0 >= 0 && ix0 + d.KW <= W;
        arow[r] = x + ((n * H + iy0) * W + ix0) * C;  // dereferenced only when inside
      }
      if (!inside) {
        for (int r = 0; r < MR; ++r) {
          gather_row(d, x, m + std::min<int64_t>(r, rows - 1), buf + r * d.K);
          arow[r] = buf + r * d.K;
        }
        stride = d.seg;
      }
    }
    const float* rj = res ? res + m * d.CO + c0 : nullptr;
    float* yj = y + m * d.CO + c0;
    if (nv == 1) tile<I, 1, A>(d, arow, stride, panel, rows, cols, bj, rj, yj, act, sj);
    else if (nv == 2 || I::kNV == 2) tile<I, 2, A>(d, arow, stride, panel, rows, cols, bj, rj, yj, act, sj);
    else if constexpr (I::kNV >= 3) tile<I, 3, A>(d, arow, stride, panel, rows, cols, bj, rj, yj, act, sj);
  }
}

template <class I>
INFER_INLINE void panel_rows_body(const NhwcDims& d, const float* b, int64_t j, const float* x, float* buf,
                                  int64_t m0, int64_t m1, const float* bias, const float* res, float* y,
                                  const Activation& act, const float* slope) {
  switch (nhwc::act_class_of(act.kind)) {
    case nhwc::kActNone: return panel_rows_act<I, nhwc::kActNone>(d, b, j, x, buf, m0, m1, bias, res, y, act, slope);
    case nhwc::kActRelu: return panel_rows_act<I, nhwc::kActRelu>(d, b, j, x, buf, m0, m1, bias, res, y, act, slope);
    case nhwc::kActClip: return panel_rows_act<I, nhwc::kActClip>(d, b, j, x, buf, m0, m1, bias, res, y, act, slope);
    case nhwc::kActVector:
      return panel_rows_act<I, nhwc::kActVector>(d, b, j, x, buf, m0, m1, bias, res, y, act, slope);
    default:  // the per-element kinds and a per-channel PRelu (nhwc::activate_span)
      return panel_rows_act<I, nhwc::kActScalar>(d, b, j, x, buf, m0, m1, bias, res, y, act, slope);
  }
}
INFER_PER_ISA(void, panel_rows, panel_rows_body,
              (const NhwcDims& d, const float* b, int64_t j, const float* x, float* buf, int64_t m0, int64_t m1,
               const float* bias, const float* res, float* y, const Activation& act, const float* slope),
              (d, b, j, x, buf, m0, m1, bias, res, y, act, slope))

void nhwc_run(const KernelCall& call) {
  const NhwcDims d = nhwc_dims(call.node);
  const auto io = unpack_conv_call<NhwcPrepared>(call, "gemm_nhwc", d.ws_floats() > 0);
  const float *x = io.x, *bias = io.bias, *res = io.residual;
  float *y = io.y, *ws = io.workspace;
  const Activation act = io.act;
  const float* b = io.prep->b.data();
  const bool parallel = d.M * d.CO * d.K >= kParallelMin;
  const auto panel_rows = panel_rows_for(call.node.isa);
  if (d.M == 0 || d.CO == 0) return;
  // pixel block outer: a thread's run of iterations keeps its block of x in L2 across panels
  parallel_for(
      d.MB * d.panels, parallel,
      [&](int64_t t0, int64_t t1, int thread) {
        float* buf = ws ? ws + thread * d.s.mr * d.K : nullptr;
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t blk = t / d.panels, j = t % d.panels;
          panel_rows(d, b, j, x, buf, blk * d.mb, std::min(d.M, (blk + 1) * d.mb), bias, res, y, act, io.slope);
        }
      },
      static_cast<int>(d.slots));
}

// Ungrouped, undilated, a constant weight, 4-D shapes, a non-empty output.
bool nhwc_applicable(const NodeDesc& node) {
  if (!conv2d_ungrouped(node) || !has_constant_weight(node)) return false;
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  return xs.size() == 4 && ws.size() == 4 && ys.size() == 4 && ys[2] * ys[3] > 0 && ws[0] > 0 &&
         ws[1] * ws[2] * ws[3] > 0;
}

// Relative to the node's NCHW priority (the pass switches layout only for a strictly higher one), from
// single-node timings on the 2-core AVX-512 VM (docs/kernels.md "CPU: the channels-last path"):
//  - 1x1: equal (the same GEMM transposed, as fast or faster): follows its input's layout;
//  - a mobile network's stem, 3x3 stride 2 from C_in <= 4 channels (MobileNet, EfficientNet,
//    ShuffleNet): one more, so the graph switches to NHWC at its input (3 -> 32 to 112x112: 0.10 ms
//    against packed_implicit's 0.25);
//  - 3x3 stride 1: one less (Winograd's territory in NCHW: 64 -> 64 at 56x56 level with it at best);
//  - other KxK from C_in >= 16: equal (128 -> 128 3x3 stride 2 at 56x56: 0.49 ms against 0.71);
//  - other KxK from fewer channels: one less (ResNet's 7x7 conv1 0.75 ms against 0.59, VGG's 3x3
//    conv1_1 0.73 against 0.53: short tap rows).
int nhwc_priority(const NodeDesc& node) {
  if (!nhwc_applicable(node)) return 1;
  const auto& p = std::get<Conv2DParams>(node.params);
  const Shape& ws = node.input_shapes[1];
  const int64_t CI = ws[1], KH = ws[2], KW = ws[3];
  const int nchw = nchw_priority(node);
  if (KH * KW == 1) return nchw;
  if (KH == 3 && KW == 3 && p.stride_h == 2 && p.stride_w == 2 && CI <= 4) return nchw + 1;
  if (KH == 3 && KW == 3 && p.stride_h == 1 && p.stride_w == 1) return nchw - 1;
  return CI >= 16 ? nchw : nchw - 1;
}

size_t nhwc_workspace(const NodeDesc& node) { return nhwc_dims(node).ws_floats() * sizeof(float); }

}  // namespace

INFER_REGISTER_KERNELS(conv2d_nhwc) {
  registry.add("cpu", {
      {.op = "conv2d", .name = "gemm_nhwc", .priority = 12, .priority_for = nhwc_priority,
       .layouts = {Layout::NHWC}, .isa = KernelVariant::Isa::PerIsa, .fuses_prelu = true,
       .applicable = nhwc_applicable,
       .workspace_bytes = nhwc_workspace,
       .prepare = nhwc_prepare,
       .run = nhwc_run},
  });
}

}  // namespace infer::cpu
