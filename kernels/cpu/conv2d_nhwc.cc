// CPU conv2d "gemm_nhwc": an ungrouped, undilated conv2d on NHWC activations (the channels_last pass)
// as one GEMM over the whole batch, y[M = N*HO*WO][CO] = A[M][K] B[K][CO], K = KH*KW*C_in, a row of A
// being one output pixel's input window in (ky, kx, c) order. The weight is packed once in prepare()
// into column panels of the ISA's kNV vectors (48 output channels on AVX-512, 24 on AVX2, 8 on
// baseline; the last panel as narrow as the channels left), B[k][panel columns] contiguous, zeros past
// C_out. The micro-kernel (gemm_microkernel.h accumulate_arows) holds kMR pixels x kNV vectors of
// output channels in registers (8 x 3x16 on AVX-512, 4 x 3x8 on AVX2, 4 x 2x4 on baseline) and
// broadcasts A from each pixel's row in place:
//  - 1x1 (any stride; a 1x1 kernel has no padding): a pixel's row is its input pixel, x itself (C_in
//    contiguous floats). No copy at all.
//  - KxK: per block of pixels, the rows are gathered (an NHWC im2col: KH*KW runs of C_in floats per
//    pixel) into the thread's slot of the workspace, then every panel runs over the block.
// The epilogue adds the bias (one vector per 16 / 8 / 4 output channels), the residual (add_residual)
// and the fused activation (ReLU, Clip, HardSigmoid, HardSwish in registers, others per element after
// the tile's store) and stores the tile; the last vector of a C_out that is not a multiple of the
// vector width is a masked store (nhwc.h). Threads: 1x1 over (pixel block, panel) pairs, KxK over
// pixel blocks, guided, the master last (omp_last.h); one thread below kParallelMin multiply-adds.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cpu/conv_call.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/omp_last.h"

namespace infer::cpu {
namespace {

// A block of A (block rows x K floats) is meant to stay in a core's L2 while the panels pass over it.
constexpr int64_t kBlockBytes = 256 << 10;
// Multiply-adds below which one thread runs the node (docs/kernels.md "CPU: the channels-last path").
constexpr int64_t kParallelMin = int64_t(1) << 18;

struct NhwcDims {
  isa::Shape s;
  int64_t N, C, H, W, CO, HO, WO, KH, KW, sh, sw, pt, pl;
  int64_t K, M;       // K = KH*KW*C, M = N*HO*WO rows (pixels of every image)
  bool gather;        // KxK: rows gathered per block; 1x1: read in place
  bool identity;      // 1x1, stride 1, no padding, same size: row m is x + m*C
  int64_t pw, panels; // panel width (kNV vectors), panels over CO
  int64_t mb, MB;     // rows per block (a multiple of kMR), blocks
  int64_t slots;      // gather: per-thread row buffers in the workspace
  size_t ws_floats() const {
    return gather ? static_cast<size_t>(slots * mb * K) : 0;
  }
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
  d.gather = d.KH * d.KW > 1;
  d.identity = !d.gather && d.sh == 1 && d.sw == 1 && d.pt == 0 && d.pl == 0 && d.HO == d.H && d.WO == d.W;
  d.pw = int64_t(d.s.lanes) * d.s.nv;
  d.panels = (d.CO + d.pw - 1) / d.pw;
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
  std::vector<float> b;  // panel j at j * K * pw: [K][nv_j * lanes], zeros past C_out
};

std::shared_ptr<void> nhwc_prepare(const NodeDesc& node) {
  const NhwcDims d = nhwc_dims(node);
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (!w) throw Error("cpu conv2d.gemm_nhwc: the weight must be a constant");
  auto prep = std::make_shared<NhwcPrepared>();
  prep->b.assign(static_cast<size_t>(d.panels * d.K * d.pw), 0.f);
  const int64_t L = d.s.lanes;
  for (int64_t j = 0; j < d.panels; ++j) {
    const int64_t c0 = j * d.pw, cols = std::min(d.pw, d.CO - c0), ld = (cols + L - 1) / L * L;
    float* panel = prep->b.data() + j * d.K * d.pw;
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

// Where row m of A is: in place (x) or in a gathered block (buf, whose first row is row m0).
struct Rows {
  const float* x;
  const float* buf;
  int64_t m0;
};

INFER_INLINE const float* row_of(const NhwcDims& d, const Rows& src, int64_t m) {
  if (d.gather) return src.buf + (m - src.m0) * d.K;
  if (d.identity) return src.x + m * d.C;
  const int64_t P = d.HO * d.WO, n = m / P, pix = m - n * P, oy = pix / d.WO, ox = pix - oy * d.WO;
  return src.x + ((n * d.H + oy * d.sh) * d.W + ox * d.sw) * d.C;  // 1x1: no padding (shape rule)
}

// The rows [m0, m1) of one block gathered into buf: row m's (ky, kx) run is the C floats of input
// pixel (oy*sh - pt + ky, ox*sw - pl + kx), zeros outside the image.
void gather_rows(const NhwcDims& d, const float* x, float* buf, int64_t m0, int64_t m1) {
  const int64_t P = d.HO * d.WO;
  for (int64_t m = m0; m < m1; ++m) {
    const int64_t n = m / P, pix = m - n * P, oy = pix / d.WO, ox = pix - oy * d.WO;
    float* row = buf + (m - m0) * d.K;
    for (int64_t ky = 0; ky < d.KH; ++ky) {
      const int64_t iy = oy * d.sh - d.pt + ky;
      float* out = row + ky * d.KW * d.C;
      if (iy < 0 || iy >= d.H) {
        std::fill(out, out + d.KW * d.C, 0.f);
        continue;
      }
      const float* xr = x + (n * d.H + iy) * d.W * d.C;
      // the taps kx whose column is inside the image form one contiguous run of the input row
      const int64_t ix0 = ox * d.sw - d.pl;
      const int64_t k0 = std::clamp<int64_t>(-ix0, 0, d.KW), k1 = std::clamp<int64_t>(d.W - ix0, k0, d.KW);
      std::fill(out, out + k0 * d.C, 0.f);
      std::copy(xr + (ix0 + k0) * d.C, xr + (ix0 + k1) * d.C, out + k0 * d.C);
      std::fill(out + k1 * d.C, out + d.KW * d.C, 0.f);
    }
  }
}

// The epilogue of one tile: rows [0, rows) of acc (pixels), NV vectors of output channels from
// column c0, `cols` of them real (the last vector masked where cols is not a multiple of kLanes), the
// activation of class A (nhwc::ActClass). The row loop has a constant trip count, so the accumulators
// stay in registers (a loop to `rows` indexed them through the stack).
template <class I, int NV, int A>
INFER_INLINE void store_tile(typename I::Vec (&acc)[I::kMR][NV], int64_t rows, int64_t cols, const float* bias,
                             const float* res, float* y, int64_t ld, const Activation& act) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const bool full = cols == NV * L;
  const int64_t last = cols - (NV - 1) * L;  // lanes of the last vector
  V bv[NV];
  for (int q = 0; q < NV; ++q) {
    bv[q] = V{};
    if (bias) nhwc::load_upto<I>(bv[q], bias + q * L, cols - q * L);
  }
  for (int r = 0; r < I::kMR; ++r) {
    if (r >= rows) break;
    for (int q = 0; q < NV; ++q) {
      V v = acc[r][q] + bv[q];
      float* yq = y + r * ld + q * L;
      if (full || q < NV - 1) {
        if (res) {
          V rv;
          mk::load(rv, res + r * ld + q * L);
          v += rv;
        }
        mk::store(yq, nhwc::act_class<I, A>(v, act));
      } else {
        if (res) {
          V rv;
          nhwc::load_n<I>(rv, res + r * ld + q * L, last);
          v += rv;
        }
        nhwc::store_n<I>(yq, nhwc::act_class<I, A>(v, act), last);
      }
    }
  }
  if constexpr (A == nhwc::kActScalar)
    for (int64_t r = 0; r < rows; ++r) nhwc::activate_span(y + r * ld, cols, act);
}

template <class I, int NV, int A>
INFER_INLINE void tile(const NhwcDims& d, const float* const (&arow)[I::kMR], const float* panel, int64_t rows,
                       int64_t cols, const float* bias, const float* res, float* y, const Activation& act) {
  typename I::Vec acc[I::kMR][NV];
  mk::accumulate_arows<I, NV>(arow, panel, NV * I::kLanes, d.K, acc);
  store_tile<I, NV, A>(acc, rows, cols, bias, res, y, d.CO, act);
}

// Rows [m0, m1) of the output times panel j (output channels [j * pw, + pw)).
template <class I, int A>
INFER_INLINE void panel_rows_act(const NhwcDims& d, const float* b, int64_t j, const Rows& src, int64_t m0,
                                 int64_t m1, const float* bias, const float* res, float* y, const Activation& act) {
  constexpr int L = I::kLanes, MR = I::kMR;
  const int64_t c0 = j * d.pw, cols = std::min(d.pw, d.CO - c0), nv = (cols + L - 1) / L;
  const float* panel = b + j * d.K * d.pw;
  const float* bj = bias ? bias + c0 : nullptr;
  for (int64_t m = m0; m < m1; m += MR) {
    const int64_t rows = std::min<int64_t>(MR, m1 - m);
    const float* arow[MR];
    for (int r = 0; r < MR; ++r) arow[r] = row_of(d, src, m + std::min<int64_t>(r, rows - 1));
    const float* rj = res ? res + m * d.CO + c0 : nullptr;
    float* yj = y + m * d.CO + c0;
    if (nv == 1) tile<I, 1, A>(d, arow, panel, rows, cols, bj, rj, yj, act);
    else if (nv == 2 || I::kNV == 2) tile<I, 2, A>(d, arow, panel, rows, cols, bj, rj, yj, act);
    else if constexpr (I::kNV >= 3) tile<I, 3, A>(d, arow, panel, rows, cols, bj, rj, yj, act);
  }
}

template <class I>
INFER_INLINE void panel_rows_body(const NhwcDims& d, const float* b, int64_t j, const Rows& src, int64_t m0,
                                  int64_t m1, const float* bias, const float* res, float* y,
                                  const Activation& act) {
  switch (nhwc::act_class_of(act.kind)) {
    case nhwc::kActNone: return panel_rows_act<I, nhwc::kActNone>(d, b, j, src, m0, m1, bias, res, y, act);
    case nhwc::kActRelu: return panel_rows_act<I, nhwc::kActRelu>(d, b, j, src, m0, m1, bias, res, y, act);
    case nhwc::kActClip: return panel_rows_act<I, nhwc::kActClip>(d, b, j, src, m0, m1, bias, res, y, act);
    case nhwc::kActVector: return panel_rows_act<I, nhwc::kActVector>(d, b, j, src, m0, m1, bias, res, y, act);
    default: return panel_rows_act<I, nhwc::kActScalar>(d, b, j, src, m0, m1, bias, res, y, act);
  }
}
INFER_PER_ISA(void, panel_rows, panel_rows_body,
              (const NhwcDims& d, const float* b, int64_t j, const Rows& src, int64_t m0, int64_t m1,
               const float* bias, const float* res, float* y, const Activation& act),
              (d, b, j, src, m0, m1, bias, res, y, act))

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
  MasterLast last;
  if (!d.gather) {
    const Rows src{x, nullptr, 0};
    // pixel block outer: a thread's run of iterations keeps its block of x in L2 across panels
#pragma omp parallel if (parallel)
    {
#pragma omp for collapse(2) schedule(guided) nowait
      for (int64_t blk = 0; blk < d.MB; ++blk)
        for (int64_t j = 0; j < d.panels; ++j)
          panel_rows(d, b, j, src, blk * d.mb, std::min(d.M, (blk + 1) * d.mb), bias, res, y, act);
      last.arrive();
    }
    return;
  }
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), d.slots));
#pragma omp parallel if (parallel) num_threads(threads)
  {
    float* buf = ws + omp_get_thread_num() * d.mb * d.K;
#pragma omp for schedule(guided) nowait
    for (int64_t blk = 0; blk < d.MB; ++blk) {
      const int64_t m0 = blk * d.mb, m1 = std::min(d.M, m0 + d.mb);
      gather_rows(d, x, buf, m0, m1);
      const Rows src{x, buf, m0};
      for (int64_t j = 0; j < d.panels; ++j) panel_rows(d, b, j, src, m0, m1, bias, res, y, act);
    }
    last.arrive();
  }
}

// Ungrouped, undilated, a constant weight, 4-D shapes, a non-empty output.
bool nhwc_applicable(const NodeDesc& node) {
  if (!conv2d_ungrouped(node) || !has_constant_weight(node)) return false;
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  return xs.size() == 4 && ws.size() == 4 && ys.size() == 4 && ys[2] * ys[3] > 0 && ws[0] > 0 &&
         ws[1] * ws[2] * ws[3] > 0;
}

// 1x1: the priority the node has in NCHW (the same GEMM, transposed: a 1x1 convolution follows its
// input's layout). KxK: one less, so that a KxK convolution inside an NHWC region goes back to the
// NCHW kernels (Winograd, packed_implicit) behind a conversion (docs/kernels.md: measured).
int nhwc_priority(const NodeDesc& node) {
  if (!nhwc_applicable(node)) return 1;
  const Shape& ws = node.input_shapes[1];
  const int nchw = nchw_priority(node);
  return ws[2] * ws[3] == 1 ? nchw : nchw - 1;
}

size_t nhwc_workspace(const NodeDesc& node) { return nhwc_dims(node).ws_floats() * sizeof(float); }

}  // namespace

void register_conv2d_nhwc(KernelRegistry& registry) {
  registry.add("cpu", {
      {.op = "conv2d", .name = "gemm_nhwc", .priority = 12, .priority_for = nhwc_priority,
       .layouts = {Layout::NHWC}, .isa = KernelVariant::Isa::PerIsa,
       .applicable = nhwc_applicable,
       .workspace_bytes = nhwc_workspace,
       .prepare = nhwc_prepare,
       .run = nhwc_run},
  });
}

}  // namespace infer::cpu
