// CPU conv_transpose2d.segregated_unified: the unified kernel-segregated transposed convolution (Tida
// et al., Algorithm 2; docs/design.md): one kernel for the s_h*s_w stride phases, each output pixel
// taking the sub-kernel of its (row % s_h, column % s_w) phase, over the un-upsampled input; no
// upsampled buffer and no workspace. Groups 1, dilation 1, a constant weight; any stride, kernel,
// asymmetric padding, output_padding, batch, bias and fused activation; float32.
//
// Per phase the work is a small GEMM, output pixels x output channels x (C_in * phase taps), done as
// register tiles compiled per ISA level (kernels/cpu/isa.h INFER_PER_ISA, picked by NodeDesc::isa):
//   channel-vectorised (the general one): MR consecutive output pixels of one phase row (they read
//     consecutive input columns) x NV vectors of output channels; per (input channel, tap) NV weight
//     vectors are loaded and each pixel's input value is broadcast against them. MR x NV: AVX-512
//     4 x 6 (24 of 32 zmm accumulate), AVX2 4 x 3 (12 of 16 ymm), baseline 4 x 3 (12 of 16 xmm; SSE2
//     has no broadcast from memory, so its view stores every input value 4 times).
//   pixel-vectorised (C_out <= 4, where a channel vector would be mostly padding, e.g. a generator's
//     RGB output): NP vectors of consecutive output pixels of one phase row x all C_out channels, the
//     weights broadcast; NP per level and C_out in pix_np().
// Weights are repacked once in prepare() per phase as [channel group][C_in][tap row][tap col][NV*lanes]
// (channel mode; a group is the NV vectors one tile covers) or [C_in][tap row][tap col][C_out].
//
// The work is split into items (sample, block of channel groups, block of output rows, block of
// output columns), handed to the OpenMP threads dynamically. An item first copies the input rows and
// columns its outputs read, for a chunk of input channels, into a zero-padded view on its thread's
// stack (<= 32 KiB), so the micro-kernels run without bounds checks: tap rows outside the image are
// skipped (a tile is one output row, so they are the same for all its pixels), tap columns outside
// read the view's zeros. Input channels come in chunks when one chunk's packed weights would not stay
// in L2 (kABudgetFloats) or the view would not fit; each tile prefetches its slice of the next
// chunk's weights. Channel tiles leave their sums in a second stack buffer (<= 64 KiB, the item's
// [row][column][channels], also the partial sums between chunks; the bias is the accumulators'
// initial value, ReLU is applied on whole vectors at the last chunk), which store_item then writes
// into the NCHW output through in-register L x L transposes; pixel tiles store their vectors at the
// phase's stride. Other activations per element. docs/kernels.md has the measurements.
#include "kernels/cpu/conv_transpose2d_unified.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "infer/error.h"
#include "kernels/conv_shapes.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/omp_last.h"

// GCC's predictive commoning (-O3) carries each broadcast input value over to the next tap column
// (pixel i at tap tx + 1 reads what pixel i + 1 read at tx) and unrolls the loop to do it: that kept
// three more values live and spilled accumulators of the AVX2 tile to the stack (docs/kernels.md).
// (clang, the fuzz build, has no such pass.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-predictive-commoning")
#define INFER_NO_MEMCPY_IDIOM __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define INFER_NO_MEMCPY_IDIOM
#endif

namespace infer::cpu {
namespace {

using TconvDims = ConvTranspose2DDims;

// Loops with less work than this run on one thread (as in conv_transpose2d.cc).
constexpr int64_t kParallelMin = int64_t(1) << 15;
// One chunk's packed weights for an item (C_in chunk x all taps x the group's channels): 512 KiB,
// half of a core's L2 on the AMD EPYC (Zen 5) dev VM, so every tile of the item finds them there.
constexpr int64_t kABudgetFloats = (int64_t(512) << 10) / 4;
// The per-thread stack buffers: the zero-padded input view and the partial sums between chunks.
constexpr int64_t kViewFloats = (int64_t(32) << 10) / 4;
constexpr int64_t kAccFloats = (int64_t(64) << 10) / 4;
// Output columns per item at most (wider rows are split into column blocks).
constexpr int64_t kColsMax = 64;

// ---- tile shapes per ISA level -------------------------------------------------------------------

// Channel-vectorised: kMR pixels x kNV vectors; kMR*kNV accumulators + kNV weight vectors + one
// broadcast stay within the level's registers (AVX-512 24 + 6 + 1 of 32; AVX2 12 + 3 + 1 of 16;
// baseline 12 + 3 + the input vector + a product is one too many: mulps reads the third weight
// vector from L1, no spill; 4 x 2 measured slower). The objdump check is in docs/kernels.md.
template <class I>
struct ChanTile;
template <>
struct ChanTile<isa::Avx512> {
  static constexpr int kMR = 4, kNV = 6;
};
template <>
struct ChanTile<isa::Avx2> {
  static constexpr int kMR = 4, kNV = 3;
};
template <>
struct ChanTile<isa::Baseline> {
  static constexpr int kMR = 4, kNV = 3;
};

struct TileShape {
  int lanes, mr, nv;
};
constexpr TileShape chan_shape(CpuIsa level) {
  return level == CpuIsa::Avx512 ? TileShape{isa::Avx512::kLanes, ChanTile<isa::Avx512>::kMR,
                                             ChanTile<isa::Avx512>::kNV}
         : level == CpuIsa::Avx2 ? TileShape{isa::Avx2::kLanes, ChanTile<isa::Avx2>::kMR, ChanTile<isa::Avx2>::kNV}
                                 : TileShape{isa::Baseline::kLanes, ChanTile<isa::Baseline>::kMR,
                                             ChanTile<isa::Baseline>::kNV};
}

// Pixel-vectorised: mc (= C_out <= 4) channels x NP pixel vectors; mc*NP accumulators + mc broadcast
// weights + one input vector (+ a product on baseline) within the registers, NP <= 8.
constexpr int pix_np(CpuIsa level, int mc) {
  const int regs = level == CpuIsa::Avx512 ? 32 : 16, spare = level == CpuIsa::Baseline ? 2 : 1;
  return std::min(8, (regs - mc - spare) / mc);
}
constexpr int kPixMaxChannels = 4;

// ---- the plan -----------------------------------------------------------------------------------

struct alignas(64) Line {
  float f[16];
};

struct PhaseInfo {
  int64_t nj, ni;  // taps along H and W (0: a phase without taps, stride > kernel)
  int64_t off;     // where its packed weights start (floats)
};

struct Blocking {
  int64_t kc = 1, rows = 1, cols = 1;  // input channels per chunk, output rows / columns per item
};

struct UnifiedPlan {
  CpuIsa isa = CpuIsa::Baseline;
  // the node it was prepared for
  int64_t CI = 0, CO = 0, KH = 0, KW = 0, H = 0, W = 0, HO = 0, WO = 0;
  int sh = 1, sw = 1, pt = 0, pl = 0;
  bool pixel = false;
  int lanes = 1;
  int64_t nj_max = 1, ni_max = 1;
  std::vector<int64_t> gv;  // channel mode: group g holds the channel vectors [gv[g], gv[g+1])
  std::vector<PhaseInfo> ph;  // index rh*sw + rw
  std::vector<Line> w;        // packed weights (64-byte aligned)
  Blocking blk;
  int64_t gpi = 1;  // channel groups per item
  int64_t wb = 1;  // columns per row of the input view
  int rep = 1;      // floats per view column: 1, or the lanes where each input value is stored broadcast

  const float* weights() const { return w.empty() ? nullptr : w.data()->f; }
  int64_t groups() const { return pixel ? 1 : static_cast<int64_t>(gv.size()) - 1; }
  int64_t group_blocks() const { return (groups() + gpi - 1) / gpi; }
  bool matches(const TconvDims& d, CpuIsa level) const {
    return level == isa && d.CI == CI && d.CO == CO && d.KH == KH && d.KW == KW && d.H == H && d.W == W &&
           d.HO == HO && d.WO == WO && d.sh == sh && d.sw == sw && d.pt == pt && d.pl == pl && d.G == 1 &&
           d.dh == 1 && d.dw == 1;
  }
};

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Input rows / columns (with the pixel mode's slack) an item of `rows` x `cols` outputs can read.
int64_t view_rows(const UnifiedPlan& p, int64_t rows) { return (rows - 1) / p.sh + 1 + p.nj_max; }
int64_t view_cols(const UnifiedPlan& p, int64_t cols) {
  return (cols - 1) / p.sw + 1 + p.ni_max + (p.pixel ? p.lanes : 0);
}
// Floats of partial sums an item of rows x cols outputs keeps between chunks.
int64_t acc_floats(const UnifiedPlan& p, int64_t rows, int64_t cols, int64_t nvl_max) {
  if (!p.pixel) return rows * cols * nvl_max;
  const int64_t phases = std::min<int64_t>(p.sw, cols), per_phase = ceil_div(cols, p.sw);
  return rows * phases * ceil_div(per_phase, p.lanes) * p.lanes * p.CO;
}

// The item size and input-channel chunk. Preference: the widest column block (<= kColsMax), then all
// input channels in one chunk (no partial sums) with as many rows as the view holds, else chunks of
// at least 16 channels (their packed weights within kABudgetFloats) with as many rows as the partial
// sums and the view hold. Then rows are halved until there are >= 2 items per thread.
Blocking choose_blocking(const TconvDims& d, const UnifiedPlan& p, int64_t a_per_ci, int64_t nvl_max,
                         int64_t groups, int threads) {
  const int64_t kc_a = std::clamp<int64_t>(kABudgetFloats / std::max<int64_t>(1, a_per_ci), 1,
                                           std::max<int64_t>(1, d.CI));
  const int64_t ci = std::max<int64_t>(1, d.CI);
  auto halve = [](int64_t v) { return (v + 1) / 2; };
  auto view = [&](int64_t rows, int64_t cols) { return view_rows(p, rows) * view_cols(p, cols) * p.rep; };
  Blocking b;
  bool found = false;
  for (int pass = 0; pass < 2 && !found; ++pass) {
    const int64_t kc_floor = pass == 0 ? std::min<int64_t>(kc_a, 16) : 1;
    for (int64_t cols = std::max<int64_t>(1, std::min(d.WO, kColsMax)); !found; cols = halve(cols)) {
      if (kc_a >= ci)
        for (int64_t rows = std::max<int64_t>(1, d.HO);; rows = halve(rows)) {
          // channel mode keeps every item's results in the buffer (store_item); pixel mode only
          // the partial sums between chunks
          if (ci * view(rows, cols) <= kViewFloats &&
              (p.pixel || acc_floats(p, rows, cols, nvl_max) <= kAccFloats)) {
            b = {ci, rows, cols};
            found = true;
            break;
          }
          if (rows == 1) break;
        }
      for (int64_t rows = std::max<int64_t>(1, d.HO); !found; rows = halve(rows)) {
        if (acc_floats(p, rows, cols, nvl_max) <= kAccFloats) {
          const int64_t kc = std::min(kc_a, kViewFloats / view(rows, cols));
          if (kc >= kc_floor) {
            b = {kc, rows, cols};
            found = true;
          }
        }
        if (rows == 1) break;
      }
      if (cols == 1) break;
    }
  }
  if (!found) throw Error("cpu conv_transpose2d.segregated_unified: the kernel is too large for the stack view");
  auto items = [&] { return d.N * groups * ceil_div(d.HO, b.rows) * ceil_div(d.WO, b.cols); };
  while (b.rows > 1 && items() < 2 * threads) b.rows = halve(b.rows);
  const int64_t chunks = ceil_div(ci, b.kc);  // equal chunks
  b.kc = ceil_div(ci, chunks);
  return b;
}

// Pixel mode where C_out <= 4 and a vector of phase pixels is fuller than a vector of channels.
bool use_pixel_mode(const TconvDims& d, int lanes) {
  if (d.CO > kPixMaxChannels) return false;
  const int64_t pw = std::max<int64_t>(1, ceil_div(std::min(d.WO, kColsMax), d.sw));
  const double chan = double(d.CO) / double(ceil_div(d.CO, lanes) * lanes);
  const double pix = double(pw) / double(ceil_div(pw, lanes) * lanes);
  return pix > chan;
}

std::shared_ptr<UnifiedPlan> make_plan(const NodeDesc& node, bool pack) {
  const TconvDims d = conv_transpose2d_dims(node, "cpu");
  if (d.G != 1 || d.dh != 1 || d.dw != 1)
    throw Error("cpu conv_transpose2d.segregated_unified: groups and dilation must be 1 (gemm_col2im takes any)");
  const float* w = node.constants.size() >= 2 ? node.constants[1] : nullptr;
  if (pack && !w) throw Error("cpu conv_transpose2d.segregated_unified: the weight must be a constant");
  auto p = std::make_shared<UnifiedPlan>();
  p->isa = node.isa;
  p->CI = d.CI, p->CO = d.CO, p->KH = d.KH, p->KW = d.KW, p->H = d.H, p->W = d.W, p->HO = d.HO, p->WO = d.WO;
  p->sh = d.sh, p->sw = d.sw, p->pt = d.pt, p->pl = d.pl;
  const TileShape ts = chan_shape(node.isa);
  p->lanes = ts.lanes;
  p->pixel = use_pixel_mode(d, ts.lanes);
  p->rep = !p->pixel && node.isa == CpuIsa::Baseline ? ts.lanes : 1;
  p->nj_max = p->ni_max = 1;
  for (int rh = 0; rh < d.sh; ++rh)
    for (int rw = 0; rw < d.sw; ++rw) {
      PhaseInfo ph{phase_taps(rh, d.sh, d.KH), phase_taps(rw, d.sw, d.KW), 0};
      p->nj_max = std::max(p->nj_max, ph.nj);
      p->ni_max = std::max(p->ni_max, ph.ni);
      p->ph.push_back(ph);
    }
  const int threads = std::max(1, omp_get_max_threads());
  const int64_t L = ts.lanes;
  int64_t nvl_max = 0, a_per_ci = 0, total = 0;
  if (p->pixel) {
    a_per_ci = d.KH * d.KW * d.CO;
    for (PhaseInfo& ph : p->ph) {
      ph.off = total;
      total += (d.CI * ph.nj * ph.ni * d.CO + 15) / 16 * 16;
    }
  } else {
    // Channel groups of at most kNV vectors; on small outputs (where the groups are the parallel
    // work) their number is rounded up to a multiple of the threads if each keeps >= kNV/2 vectors.
    const int64_t vc = ceil_div(d.CO, L);
    int64_t g = std::max<int64_t>(1, ceil_div(vc, ts.nv));
    if (g % threads != 0 && d.HO * d.WO <= 32 * 32) {
      const int64_t g2 = ceil_div(g, threads) * threads;
      if (g2 <= vc && vc / g2 >= std::max(1, ts.nv / 2)) g = g2;
    }
    for (int64_t i = 0; i <= g; ++i) p->gv.push_back(i * vc / g);
    for (int64_t i = 0; i < g; ++i) nvl_max = std::max(nvl_max, (p->gv[i + 1] - p->gv[i]) * L);
    // On large outputs an item takes several groups (up to 256 channels), so the view copied for
    // it serves them all (AVX2's and baseline's groups are 24 and 12 channels); from 32x32 outputs
    // up, from 16x16 for baseline's; on smaller ones the groups are the parallel work.
    const int64_t out = d.HO * d.WO;
    if (out > 32 * 32 || (out > 16 * 16 && nvl_max <= 16)) p->gpi = std::min<int64_t>(g, std::max<int64_t>(1, 256 / nvl_max));
    nvl_max *= p->gpi;  // per item, from here on
    a_per_ci = d.KH * d.KW * nvl_max;
    for (PhaseInfo& ph : p->ph) {
      ph.off = total;
      total += vc * L * d.CI * ph.nj * ph.ni;
    }
  }
  p->blk = choose_blocking(d, *p, a_per_ci, nvl_max, p->group_blocks(), threads);
  p->wb = view_cols(*p, p->blk.cols);
  if (!pack) return p;

  p->w.assign(static_cast<size_t>((total + 15) / 16), Line{});
  float* pw = p->w.data()->f;
  for (int rh = 0; rh < d.sh; ++rh)
    for (int rw = 0; rw < d.sw; ++rw) {
      const PhaseInfo& ph = p->ph[static_cast<size_t>(rh * d.sw + rw)];
      const int64_t nj = ph.nj, ni = ph.ni, K = d.CI * nj * ni;
      // tap (ty, tx) of the flipped sub-kernel is weight tap (ky, kx)
      auto wt = [&](int64_t ci, int64_t co, int64_t ty, int64_t tx) {
        const int64_t ky = rh + d.sh * (nj - 1 - ty), kx = rw + d.sw * (ni - 1 - tx);
        return w[((ci * d.CO + co) * d.KH + ky) * d.KW + kx];
      };
      if (p->pixel) {
        for (int64_t ci = 0; ci < d.CI; ++ci)
          for (int64_t ty = 0; ty < nj; ++ty)
            for (int64_t tx = 0; tx < ni; ++tx)
              for (int64_t co = 0; co < d.CO; ++co)
                pw[ph.off + ((ci * nj + ty) * ni + tx) * d.CO + co] = wt(ci, co, ty, tx);
        continue;
      }
      for (size_t g = 0; g + 1 < p->gv.size(); ++g) {
        const int64_t v0 = p->gv[g], nvg = p->gv[g + 1] - v0;
        float* block = pw + ph.off + v0 * L * K;
        for (int64_t ci = 0; ci < d.CI; ++ci)
          for (int64_t ty = 0; ty < nj; ++ty)
            for (int64_t tx = 0; tx < ni; ++tx)
              for (int64_t q = 0; q < nvg * L; ++q) {
                const int64_t co = v0 * L + q;
                if (co < d.CO) block[((ci * nj + ty) * ni + tx) * nvg * L + q] = wt(ci, co, ty, tx);
              }
      }
    }
  return p;
}

// ---- the items ----------------------------------------------------------------------------------

struct RunCtx {
  const TconvDims* d;
  const UnifiedPlan* p;
  const float* x;
  const float* bias;  // nullptr: none
  float* y;
};

// Output rows [oy0, oy1) x columns [ox0, ox1) of sample n for the channel groups [g0, g1).
struct Item {
  int64_t n, g0, g1, oy0, oy1, ox0, ox1;
};

// The item's input view: input rows iy0 .. iy0 + rows - 1 and columns ix0 .. ix0 + wb - 1 of each
// channel of a chunk, zero outside the image; view[c][r][j] at ((c * rows + r) * wb + j) * rep, each
// value stored rep times (rep > 1: baseline's channel tiles, SSE2 has no broadcast from memory).
struct View {
  int64_t iy0, rows, ix0, wb, rep;
  int64_t row_floats() const { return wb * rep; }
};

View item_view(const TconvDims& d, const UnifiedPlan& p, const Item& it) {
  View v;
  v.iy0 = (it.oy0 + d.pt) / d.sh - (p.nj_max - 1);
  v.rows = (it.oy1 - 1 + d.pt) / d.sh - v.iy0 + 1;
  v.ix0 = (it.ox0 + d.pl) / d.sw - (p.ni_max - 1);
  v.wb = p.wb;
  v.rep = p.rep;
  return v;
}

// Plain loops, not memcpy: the rows are a few to a few dozen floats. (no-tree-loop-distribute-
// patterns keeps GCC from turning them back into memset / memcpy calls.)
INFER_NO_MEMCPY_IDIOM void fill_view(
    const float* xn, int64_t H, int64_t W, int64_t ci0, int64_t kc, const View& v, float* out) {
  const int64_t j0 = std::clamp<int64_t>(-v.ix0, 0, v.wb), j1 = std::clamp<int64_t>(W - v.ix0, 0, v.wb);
  const int64_t n = v.row_floats(), rep = v.rep;
  for (int64_t c = 0; c < kc; ++c)
    for (int64_t r = 0; r < v.rows; ++r) {
      float* dst = out + (c * v.rows + r) * n;
      const int64_t iy = v.iy0 + r;
      if (iy < 0 || iy >= H || j0 >= j1) {
        for (int64_t j = 0; j < n; ++j) dst[j] = 0.f;
        continue;
      }
      const float* src = xn + ((ci0 + c) * H + iy) * W + v.ix0;
      for (int64_t j = 0; j < j0 * rep; ++j) dst[j] = 0.f;
      if (rep == 1)
        for (int64_t j = j0; j < j1; ++j) dst[j] = src[j];
      else
        for (int64_t j = j0; j < j1; ++j)
          for (int64_t k = 0; k < rep; ++k) dst[j * rep + k] = src[j];
      for (int64_t j = j1 * rep; j < n; ++j) dst[j] = 0.f;
    }
}

// Phase pixels (outputs first + s*m, m < count) inside the output range [o0, o1): m in [lo, hi).
struct PixRange {
  int64_t lo, hi;
};
PixRange phase_range(const PhaseAxis& a, int64_t s, int64_t o0, int64_t o1) {
  return {std::max<int64_t>(0, ceil_div(o0 - a.first, s)), std::min(a.count, ceil_div(o1 - a.first, s))};
}

// ---- channel-vectorised tiles -------------------------------------------------------------------

// Floats per input value in the channel tiles' view (View::rep).
template <class I>
constexpr int kRep = I::kIsa == CpuIsa::Baseline ? I::kLanes : 1;

struct ChanArgs {
  const float* b;       // view at this tile's first pixel, tap (ty0, 0), chunk channel 0
  int64_t bci, wb;      // view strides: per channel, per row
  const float* w;       // packed weights at (chunk channel 0, ty0, 0)
  int64_t wci;          // packed floats per input channel (nj * ni * NV * lanes)
  int64_t kc, nty, ni;  // channels in the chunk, valid tap rows, tap columns
  const float* pf;      // a slice of the next chunk's packed weights to prefetch into L2 ...
  int64_t pf_lines;     // ... of this many 64-byte lines (0: none), spread over the chunk's channels
  const float* bias;    // NV * lanes floats, zero past C_out
  float* acc;           // the item's sums at pixel 0 of the tile, pixel i at acc + i * acc_stride
  int64_t acc_stride;
  bool first, last;     // first / last chunk
  bool relu;            // apply ReLU to the last chunk's sums
};

template <class I, int MR, int NV>
INFER_INLINE void chan_tile(const ChanArgs& a) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  V acc[MR][NV];
  if (a.first) {
    V bv[NV];
    for (int q = 0; q < NV; ++q) mk::load(bv[q], a.bias + q * L);
    for (int i = 0; i < MR; ++i)
      for (int q = 0; q < NV; ++q) acc[i][q] = bv[q];
  } else {
    for (int i = 0; i < MR; ++i)
      for (int q = 0; q < NV; ++q) mk::load(acc[i][q], a.acc + i * a.acc_stride + q * L);
  }
  const int64_t w_row = a.ni * NV * L;
  const int64_t pf_per_c = a.kc > 0 ? (a.pf_lines + a.kc - 1) / a.kc : 0;
  int64_t pf_left = a.pf_lines;
  const float* pf = a.pf;
  for (int64_t c = 0; c < a.kc; ++c) {
    const float* bc = a.b + c * a.bci;
    const float* wc = a.w + c * a.wci;
    for (int64_t k = 0; k < pf_per_c && pf_left > 0; ++k, --pf_left, pf += 16) __builtin_prefetch(pf, 0, 2);
    for (int64_t ty = 0; ty < a.nty; ++ty) {
      const float* br = bc + ty * a.wb;
      const float* wr = wc + ty * w_row;
      for (int64_t tx = 0; tx < a.ni; ++tx) {
        // The packed weights (and baseline's broadcast view) are vector-aligned: plain loads,
        // which SSE2 can fold into mulps (mk::load's unaligned ones it cannot).
        V wv[NV];
        for (int q = 0; q < NV; ++q) wv[q] = *reinterpret_cast<const V*>(wr + (tx * NV + q) * L);
        for (int i = 0; i < MR; ++i) {
          if constexpr (kRep<I> == 1) {
            for (int q = 0; q < NV; ++q) acc[i][q] += br[tx + i] * wv[q];
          } else {  // the view holds the value broadcast
            const V xv = *reinterpret_cast<const V*>(br + (tx + i) * kRep<I>);
            for (int q = 0; q < NV; ++q) acc[i][q] += xv * wv[q];
          }
        }
      }
    }
  }
  if (a.last && a.relu)  // NaN kept, like activate()
    for (int i = 0; i < MR; ++i)
      for (int q = 0; q < NV; ++q) acc[i][q] = acc[i][q] < V{} ? V{} : acc[i][q];
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NV; ++q) mk::store(a.acc + i * a.acc_stride + q * L, acc[i][q]);
}

template <class I, int MR>
INFER_INLINE void chan_tile_nv(int64_t nv, const ChanArgs& a) {
  constexpr int NVM = ChanTile<I>::kNV;
  static_assert(NVM <= 6, "extend the switch");
  switch (nv) {
    case 1: chan_tile<I, MR, 1>(a); break;
    case 2: if constexpr (NVM >= 2) chan_tile<I, MR, 2>(a); break;
    case 3: if constexpr (NVM >= 3) chan_tile<I, MR, 3>(a); break;
    case 4: if constexpr (NVM >= 4) chan_tile<I, MR, 4>(a); break;
    case 5: if constexpr (NVM >= 5) chan_tile<I, MR, 5>(a); break;
    case 6: if constexpr (NVM >= 6) chan_tile<I, MR, 6>(a); break;
  }
}

template <class I>
INFER_INLINE void chan_tile_any(int64_t mr, int64_t nv, const ChanArgs& a) {
  constexpr int MRM = ChanTile<I>::kMR;
  static_assert(MRM <= 4, "extend the switch");
  switch (mr) {
    case 1: chan_tile_nv<I, 1>(nv, a); break;
    case 2: if constexpr (MRM >= 2) chan_tile_nv<I, 2>(nv, a); break;
    case 3: if constexpr (MRM >= 3) chan_tile_nv<I, 3>(nv, a); break;
    case 4: if constexpr (MRM >= 4) chan_tile_nv<I, 4>(nv, a); break;
  }
}

// v[i][j] -> v[j][i] for L vectors of L floats: log2(L) stages, each pairing vector i with i + L/2
// and interleaving their low halves into 2i and their high halves into 2i + 1 (a perfect shuffle of
// the row and the column index bits; after log2(L) of them the two are swapped). The compiler picks
// the instructions for each constant two-vector shuffle (vpermt2ps, vunpcklps, ...).
// (The result by reference: a vector returned by value trips GCC's ABI warning, as in mk::load.)
template <class V, int L, int Half, int... K>
INFER_INLINE void interleave(V& out, const V& a, const V& b, std::integer_sequence<int, K...>) {
  out = __builtin_shufflevector(a, b, (K % 2 ? L + Half + K / 2 : Half + K / 2)...);
}

template <class I>
INFER_INLINE void transpose(typename I::Vec (&v)[I::kLanes]) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes, H = L / 2;
  for (int stage = 1; stage < L; stage *= 2) {
    V n[L];
    for (int i = 0; i < H; ++i) {
      interleave<V, L, 0>(n[2 * i], v[i], v[i + H], std::make_integer_sequence<int, L>{});
      interleave<V, L, H>(n[2 * i + 1], v[i], v[i + H], std::make_integer_sequence<int, L>{});
    }
    for (int i = 0; i < L; ++i) v[i] = n[i];
  }
}

// The item's results, accs[row][col][nvl] (bias and ReLU applied), into y's channel planes: blocks of
// L pixels x L channels are transposed in registers and stored as L rows of L consecutive pixels;
// the columns and channels left over one by one. Then other activations, per element.
template <class I>
INFER_INLINE void store_item(const float* accs, int64_t nvl, int64_t rows, int64_t cols, float* y, int64_t nco,
                             int64_t y_ch, int64_t y_row, const Activation& act) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = accs + r * cols * nvl;
    float* yr = y + r * y_row;
    for (int64_t c0 = 0; c0 < nco; c0 += L) {
      int64_t x = 0;
      if (nco - c0 >= L)
        for (; x + L <= cols; x += L) {
          V v[L];
          for (int k = 0; k < L; ++k) mk::load(v[k], ar + (x + k) * nvl + c0);
          transpose<I>(v);
          for (int k = 0; k < L; ++k) mk::store(yr + (c0 + k) * y_ch + x, v[k]);
        }
      for (int64_t ch = c0; ch < std::min(nco, c0 + L); ++ch)
        for (int64_t xx = x; xx < cols; ++xx) yr[ch * y_ch + xx] = ar[xx * nvl + ch];
    }
    if (act.kind != ActivationKind::None && act.kind != ActivationKind::Relu)
      for (int64_t ch = 0; ch < nco; ++ch)
        for (int64_t xx = 0; xx < cols; ++xx) yr[ch * y_ch + xx] = activate(act, yr[ch * y_ch + xx]);
  }
}

// Writes act(bias) into the outputs of a phase without taps (stride > kernel) in one output row.
void fill_tapless(float* y, int64_t y_ch, int64_t sw, PixRange r, const float* bias, int64_t nco,
                  const Activation& act) {
  for (int64_t ch = 0; ch < nco; ++ch) {
    const float v = activate(act, bias[ch]);
    for (int64_t m = r.lo; m < r.hi; ++m) y[ch * y_ch + sw * m] = v;
  }
}

template <class I>
INFER_INLINE void chan_item_body(const RunCtx& c, const Item& it) {
  constexpr int L = I::kLanes, MR = ChanTile<I>::kMR, NVM = ChanTile<I>::kNV;
  const TconvDims& d = *c.d;
  const UnifiedPlan& p = *c.p;
  const Activation& act = d.p->activation;
  alignas(64) float view[kViewFloats];
  alignas(64) float accs[kAccFloats];
  alignas(64) float bias[NVM * L];
  const View v = item_view(d, p, it);
  const float* xn = c.x + it.n * d.CI * d.H * d.W;
  const int64_t rows = it.oy1 - it.oy0, cols = it.ox1 - it.ox0;
  const int64_t chunks = std::max<int64_t>(1, ceil_div(d.CI, p.blk.kc));
  ChanArgs a;
  a.bci = v.rows * v.row_floats();
  a.wb = v.row_floats();
  a.bias = bias;
  a.relu = act.kind == ActivationKind::Relu;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t ci0 = chunk * p.blk.kc, kc = std::min(p.blk.kc, d.CI - ci0);
    a.first = chunk == 0;
    a.last = chunk + 1 == chunks;
    a.kc = kc;
    fill_view(xn, d.H, d.W, ci0, kc, v, view);
    float* acc_g = accs;  // the group's sums: [row][col][nvl]
    for (int64_t g = it.g0; g < it.g1; ++g) {
      const int64_t v0 = p.gv[static_cast<size_t>(g)], nv = p.gv[static_cast<size_t>(g) + 1] - v0;
      const int64_t nvl = nv * L, co0 = v0 * L, nco = std::min(nvl, d.CO - co0);
      if (a.first || a.last)
        for (int64_t k = 0; k < nvl; ++k) bias[k] = c.bias && k < nco ? c.bias[co0 + k] : 0.f;
      for (int64_t oy = it.oy0; oy < it.oy1; ++oy) {
        const int64_t rh = (oy + d.pt) % d.sh, qy = (oy + d.pt) / d.sh;
        for (int rw = 0; rw < d.sw; ++rw) {
          const PhaseInfo& ph = p.ph[static_cast<size_t>(rh * d.sw + rw)];
          const PhaseAxis aw = phase_axis(rw, d.sw, d.pl, d.WO);
          const PixRange r = phase_range(aw, d.sw, it.ox0, it.ox1);
          if (r.lo >= r.hi) continue;
          float* arow = acc_g + ((oy - it.oy0) * cols + aw.first - it.ox0) * nvl;  // pixel m at sw * m * nvl
          if (ph.nj == 0 || ph.ni == 0) {  // the bias (ReLU here like the tiles, others in store_item)
            if (a.last)
              for (int64_t m = r.lo; m < r.hi; ++m)
                for (int64_t k = 0; k < nvl; ++k) arow[d.sw * m * nvl + k] = a.relu && bias[k] < 0.f ? 0.f : bias[k];
            continue;
          }
          // tap rows ty with input row qy - (nj - 1) + ty inside the image
          const int64_t ty0 = std::max<int64_t>(0, ph.nj - 1 - qy);
          const int64_t ty1 = std::min<int64_t>(ph.nj, d.H - qy + ph.nj - 1);
          a.nty = std::max<int64_t>(0, ty1 - ty0);
          a.ni = ph.ni;
          a.wci = ph.nj * ph.ni * nvl;
          const float* wp = p.weights() + ph.off + v0 * L * d.CI * ph.nj * ph.ni;  // phase and group
          a.w = wp + ci0 * a.wci + ty0 * ph.ni * nvl;
          const float* b_row =
              view + (qy - (ph.nj - 1) + ty0 - v.iy0) * v.row_floats() + (aw.q0 - (ph.ni - 1) - v.ix0) * v.rep;
          a.acc_stride = d.sw * nvl;
          // The tiles of each phase in a chunk prefetch the next chunk's weights of the phase into
          // L2, each its slice: where they come from memory (the 4x4-input layers' 32-128 MB of
          // weights), that overlaps the stream with this chunk's arithmetic at about its rate.
          const int64_t o = (oy - it.oy0) % d.sh, ph_rows = (rows - 1 - o) / d.sh + 1;
          const int64_t tpr = ceil_div(r.hi - r.lo, MR), ph_tiles = ph_rows * tpr;
          const int64_t next = a.last ? 0 : std::min(p.blk.kc, d.CI - ci0 - kc) * a.wci;  // floats
          const int64_t lines = ceil_div(next, 16), slice = ceil_div(lines, ph_tiles);
          const float* pf = wp + (ci0 + kc) * a.wci;
          int64_t tile = (oy - it.oy0) / d.sh * tpr;
          for (int64_t m = r.lo; m < r.hi; m += MR, ++tile) {
            a.pf = pf + tile * slice * 16;
            a.pf_lines = std::max<int64_t>(0, std::min(slice, lines - tile * slice));
            a.b = b_row + m * v.rep;
            a.acc = arow + d.sw * m * nvl;
            chan_tile_any<I>(std::min<int64_t>(MR, r.hi - m), nv, a);
          }
        }
      }
      acc_g += rows * cols * nvl;
    }
  }
  float* acc_g = accs;
  for (int64_t g = it.g0; g < it.g1; ++g) {
    const int64_t v0 = p.gv[static_cast<size_t>(g)], nvl = (p.gv[static_cast<size_t>(g) + 1] - v0) * L;
    const int64_t co0 = v0 * L, nco = std::min(nvl, d.CO - co0);
    store_item<I>(acc_g, nvl, rows, cols, c.y + ((it.n * d.CO + co0) * d.HO + it.oy0) * d.WO + it.ox0, nco,
                  d.HO * d.WO, d.WO, act);
    acc_g += rows * cols * nvl;
  }
}
INFER_PER_ISA(void, chan_item, chan_item_body, (const RunCtx& c, const Item& it), (c, it))

// ---- pixel-vectorised tiles ---------------------------------------------------------------------

constexpr int kPixMaxNp = 8;

struct PixArgs {
  const float* b;            // view at chunk channel 0 (the vectors' offsets are in boff)
  int64_t boff[kPixMaxNp];   // view offset of vector j's first pixel, tap (0, 0)
  int64_t bci, wb;
  const float* w;            // packed weights [ci][ty][tx][mc] at chunk channel 0
  int64_t kc, nj, ni;
  const float* bias;         // mc floats
  float* acc;                // partial sums, vector j of channel m at acc + (j * mc + m) * lanes
  bool first, last;
  float* y[kPixMaxNp];       // output of vector j's first pixel, channel 0
  int64_t valid[kPixMaxNp];  // pixels of vector j inside the row
  int64_t y_ch, sw;
  const Activation* act;
};

template <class I, int MC, int NP>
INFER_INLINE void pix_tile(const PixArgs& a) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  V acc[MC][NP];
  for (int m = 0; m < MC; ++m)
    for (int j = 0; j < NP; ++j) {
      if (a.first)
        acc[m][j] = V{} + a.bias[m];
      else
        mk::load(acc[m][j], a.acc + (j * MC + m) * L);
    }
  const int64_t wci = a.nj * a.ni * MC;
  for (int64_t c = 0; c < a.kc; ++c) {
    const float* bc = a.b + c * a.bci;
    const float* wc = a.w + c * wci;
    for (int64_t ty = 0; ty < a.nj; ++ty)
      for (int64_t tx = 0; tx < a.ni; ++tx) {
        const float* bt = bc + ty * a.wb + tx;
        const float* wt = wc + (ty * a.ni + tx) * MC;
        for (int j = 0; j < NP; ++j) {  // MC broadcast weights and one input vector live
          V xv;
          mk::load(xv, bt + a.boff[j]);
          // One load into a register: left alone, GCC folds the load into each of the MC FMAs
          // (MC loads of the same, mostly line-crossing, vector instead of one).
#if defined(__OPTIMIZE__)  // a codegen hint only; unoptimised builds (the fuzz build's -O0) need none
          asm("" : "+v"(xv));
#endif
          for (int m = 0; m < MC; ++m) acc[m][j] += wt[m] * xv;
        }
      }
  }
  if (!a.last) {
    for (int m = 0; m < MC; ++m)
      for (int j = 0; j < NP; ++j) mk::store(a.acc + (j * MC + m) * L, acc[m][j]);
    return;
  }
  const ActivationKind kind = a.act->kind;
  if (kind == ActivationKind::Relu)
    for (int m = 0; m < MC; ++m)
      for (int j = 0; j < NP; ++j) acc[m][j] = acc[m][j] < V{} ? V{} : acc[m][j];
  const bool other = kind != ActivationKind::None && kind != ActivationKind::Relu;
  alignas(64) float t[L];
  for (int m = 0; m < MC; ++m)
    for (int j = 0; j < NP; ++j) {
      mk::store(t, acc[m][j]);
      float* yv = a.y[j] + m * a.y_ch;
      if (other)
        for (int64_t k = 0; k < a.valid[j]; ++k) yv[k * a.sw] = activate(*a.act, t[k]);
      else
        for (int64_t k = 0; k < a.valid[j]; ++k) yv[k * a.sw] = t[k];
    }
}

template <class I, int MC>
INFER_INLINE void pix_tile_np(int np, const PixArgs& a) {
  constexpr int NPM = pix_np(I::kIsa, MC);
  static_assert(NPM <= kPixMaxNp, "extend the switch");
  switch (np) {
    case 1: pix_tile<I, MC, 1>(a); break;
    case 2: if constexpr (NPM >= 2) pix_tile<I, MC, 2>(a); break;
    case 3: if constexpr (NPM >= 3) pix_tile<I, MC, 3>(a); break;
    case 4: if constexpr (NPM >= 4) pix_tile<I, MC, 4>(a); break;
    case 5: if constexpr (NPM >= 5) pix_tile<I, MC, 5>(a); break;
    case 6: if constexpr (NPM >= 6) pix_tile<I, MC, 6>(a); break;
    case 7: if constexpr (NPM >= 7) pix_tile<I, MC, 7>(a); break;
    case 8: if constexpr (NPM >= 8) pix_tile<I, MC, 8>(a); break;
  }
}

template <class I, int MC>
INFER_INLINE void pix_item_mc(const RunCtx& c, const Item& it) {
  constexpr int L = I::kLanes, NP = pix_np(I::kIsa, MC);
  const TconvDims& d = *c.d;
  const UnifiedPlan& p = *c.p;
  const Activation& act = d.p->activation;
  alignas(64) float view[kViewFloats];
  alignas(64) float accs[kAccFloats];
  float bias[MC];
  for (int m = 0; m < MC; ++m) bias[m] = c.bias ? c.bias[m] : 0.f;
  const View v = item_view(d, p, it);
  const float* xn = c.x + it.n * d.CI * d.H * d.W;
  float* yn = c.y + it.n * d.CO * d.HO * d.WO;
  const int64_t chunks = std::max<int64_t>(1, ceil_div(d.CI, p.blk.kc));
  PixArgs a;
  a.b = view;
  a.bci = v.rows * v.wb;
  a.wb = v.wb;
  a.bias = bias;
  a.y_ch = d.HO * d.WO;
  a.sw = d.sw;
  a.act = &act;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t ci0 = chunk * p.blk.kc, kc = std::min(p.blk.kc, d.CI - ci0);
    a.first = chunk == 0;
    a.last = chunk + 1 == chunks;
    a.kc = kc;
    fill_view(xn, d.H, d.W, ci0, kc, v, view);
    int64_t acc_at = 0;  // vectors of partial sums used so far in this item
    for (int rh = 0; rh < d.sh; ++rh) {
      const PhaseAxis ah = phase_axis(rh, d.sh, d.pt, d.HO);
      const PixRange rows = phase_range(ah, d.sh, it.oy0, it.oy1);
      if (rows.lo >= rows.hi) continue;
      for (int rw = 0; rw < d.sw; ++rw) {
        const PhaseInfo& ph = p.ph[static_cast<size_t>(rh * d.sw + rw)];
        const PhaseAxis aw = phase_axis(rw, d.sw, d.pl, d.WO);
        const PixRange px = phase_range(aw, d.sw, it.ox0, it.ox1);
        if (px.lo >= px.hi) continue;
        if (ph.nj == 0 || ph.ni == 0) {
          if (a.last)
            for (int64_t m = rows.lo; m < rows.hi; ++m)
              fill_tapless(yn + (ah.first + d.sh * m) * d.WO + aw.first, a.y_ch, d.sw, px, bias, MC, act);
          continue;
        }
        a.nj = ph.nj;
        a.ni = ph.ni;
        a.w = p.weights() + ph.off + ci0 * ph.nj * ph.ni * MC;
        // vectors: (phase row m, L pixels from px.lo + k*L), row-major
        const int64_t vpr = ceil_div(px.hi - px.lo, L), total = (rows.hi - rows.lo) * vpr;
        const int64_t b0 = (ah.q0 - (ph.nj - 1) - v.iy0) * v.wb + (aw.q0 - (ph.ni - 1) - v.ix0);
        float* y0 = yn + ah.first * d.WO + aw.first;
        int64_t m = rows.lo, kv = 0;  // the next vector: phase row m, its kv-th vector
        for (int64_t j0 = 0; j0 < total; j0 += NP) {
          const int np = static_cast<int>(std::min<int64_t>(NP, total - j0));
          for (int j = 0; j < np; ++j) {  // rows outside the image are zero rows of the view
            const int64_t k = px.lo + kv * L;
            a.boff[j] = b0 + m * v.wb + k;
            a.y[j] = y0 + d.sh * m * d.WO + d.sw * k;
            a.valid[j] = std::min<int64_t>(L, px.hi - k);
            if (++kv == vpr) kv = 0, ++m;
          }
          a.acc = chunks > 1 ? accs + acc_at * MC * L : nullptr;
          acc_at += np;
          pix_tile_np<I, MC>(np, a);
        }
      }
    }
  }
}

template <class I>
INFER_INLINE void pix_item_body(const RunCtx& c, const Item& it) {
  switch (c.d->CO) {
    case 1: pix_item_mc<I, 1>(c, it); break;
    case 2: pix_item_mc<I, 2>(c, it); break;
    case 3: pix_item_mc<I, 3>(c, it); break;
    case 4: pix_item_mc<I, 4>(c, it); break;
  }
}
INFER_PER_ISA(void, pix_item, pix_item_body, (const RunCtx& c, const Item& it), (c, it))

}  // namespace

std::shared_ptr<void> conv_transpose2d_unified_prepare(const NodeDesc& node) { return make_plan(node, true); }

UnifiedLayout conv_transpose2d_unified_layout(const NodeDesc& node) {
  const auto p = make_plan(node, false);
  UnifiedLayout l;
  l.pixel = p->pixel;
  l.kc = p->blk.kc;
  l.chunks = ceil_div(std::max<int64_t>(1, p->CI), p->blk.kc);
  l.rows = p->blk.rows;
  l.cols = p->blk.cols;
  l.groups = p->groups();
  l.groups_per_item = p->gpi;
  return l;
}

bool conv_transpose2d_unified_applicable(const NodeDesc& node) {
  if (!conv_transpose2d_plain(node) || !has_constant_weight(node)) return false;
  try {
    make_plan(node, false);  // the blocking: the view of one output pixel must fit the stack buffer
    return true;
  } catch (const Error&) {
    return false;
  }
}

void conv_transpose2d_unified_run(const KernelCall& call) {
  const TconvDims d = conv_transpose2d_dims(call.node, "cpu");
  const auto* p = static_cast<const UnifiedPlan*>(call.prepared);
  if (!p || !p->matches(d, call.node.isa))
    throw Error("cpu conv_transpose2d.segregated_unified: not prepared for this node");
  const RunCtx ctx{&d, p, call.inputs[0], call.inputs.size() == 3 ? call.inputs[2] : nullptr, call.outputs[0]};
  const int64_t groups = p->group_blocks(), rb = ceil_div(d.HO, p->blk.rows), cb = ceil_div(d.WO, p->blk.cols);
  const int64_t items = d.N * groups * rb * cb;
  const auto item_fn = p->pixel ? pix_item_for(call.node.isa) : chan_item_for(call.node.isa);
  const int64_t work = d.N * d.CO * d.HO * d.WO * d.CI * d.KH * d.KW / (d.sh * d.sw);
  // Items sample-major, then channel group, row block, column block: consecutive items share the
  // group's packed weights, and with a dynamic schedule both threads work near each other.
  MasterLast last;
#pragma omp parallel if (work >= kParallelMin && items > 1)
  {
#pragma omp for schedule(dynamic) nowait
    for (int64_t i = 0; i < items; ++i) {
      Item it;
      int64_t r = i;
      const int64_t bx = r % cb;
      r /= cb;
      const int64_t by = r % rb;
      r /= rb;
      it.g0 = r % groups * p->gpi;
      it.g1 = std::min(p->groups(), it.g0 + p->gpi);
      it.n = r / groups;
      it.oy0 = by * p->blk.rows;
      it.oy1 = std::min(d.HO, it.oy0 + p->blk.rows);
      it.ox0 = bx * p->blk.cols;
      it.ox1 = std::min(d.WO, it.ox0 + p->blk.cols);
      item_fn(ctx, it);
    }
    last.arrive();
  }
}

}  // namespace infer::cpu
