// CPU squeeze_excite "direct_nhwc" (the fuse_squeeze_excite pass's node) on NHWC activations, float32.
// One OpenMP region with one barrier: (1) each thread sums its share of every image's pixels into
// its own partial channel sums (runs of 8 channel vectors held in registers while the pixels pass);
// (2) after the barrier every thread adds the partial sums into the means and computes the hidden
// layer (C_r dots of length C) and all C gates (vectors of channels, w2 transposed in prepare())
// itself, into its own slot: the same values, redundantly, which costs 2 C C_r multiply-adds per
// image (110K for EfficientNet's widest block, a few microseconds) and saves the two barriers of the
// NCHW kernel's order; (3) y = x
// * gate (+ the output activation) over blocks of pixels, a pixel's channels times the gate vector.
// The master reaches the end last (omp_last.h). Channel counts not a multiple of the vector end in a
// masked vector (nhwc.h). Workspace per thread slot: N (2 C + C_r) floats.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "infer/error.h"

#include "infer/kernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/omp_last.h"

namespace infer::cpu {
namespace {

// Elements of x below which one thread runs the node: in EfficientNet-B0 at batch 1 (x of 56K to 451K
// elements) two threads never paid (docs/kernels.md).
constexpr int64_t kParallelMin = int64_t(1) << 20;
constexpr int kSumVectors = 8;                       // channel vectors summed per pass over the pixels
constexpr int64_t kPixelBlock = 64;                  // pixels per iteration of the multiply

struct SeDims {
  int64_t N, C, HW, R, blocks, slots;
  int64_t slot_floats() const { return N * (2 * C + R); }  // partial sums [N][C], gates [N][C], hidden [N][R]
};

// sum[c] = sum over pixels [p0, p1) of image xn's channel c, every channel.
template <class I>
INFER_INLINE void partial_sums_body(const SeDims& d, const float* xn, float* sum, int64_t p0, int64_t p1) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const int64_t C = d.C;
  for (int64_t c0 = 0; c0 < C; c0 += kSumVectors * L) {
    V acc[kSumVectors];
    for (int v = 0; v < kSumVectors; ++v) acc[v] = V{};
    const int64_t nv = std::min<int64_t>(kSumVectors, (C - c0 + L - 1) / L);
    const bool full = c0 + nv * L <= C;
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = xn + p * C + c0;
      for (int v = 0; v < kSumVectors; ++v) {
        if (v >= nv) break;
        V x;
        if (full || v + 1 < nv) mk::load(x, xp + v * L);
        else nhwc::load_n<I>(x, xp + v * L, C - c0 - v * L);
        acc[v] += x;
      }
    }
    for (int v = 0; v < kSumVectors; ++v) {
      if (v >= nv) break;
      nhwc::store_upto<I>(sum + c0 + v * L, acc[v], C - c0 - v * L);
    }
  }
}
INFER_PER_ISA(void, se_partial_sums, partial_sums_body,
              (const SeDims& d, const float* xn, float* sum, int64_t p0, int64_t p1), (d, xn, sum, p0, p1))

// The gates of one image from its channel means: hidden[r] = act_h(w1[r] . mean + b1[r]) (C_r dots of
// length C), then gate[c] = act_g(sum_r w2t[r][c] hidden[r] + b2[c]) a vector of channels at a time
// (w2 transposed once in prepare()), so the C gates cost C C_r / kLanes FMAs, not C short dots. The
// activations (sigmoid: an exp) per element.
template <class I>
INFER_INLINE void gates_body(const float* mean, const float* w1, const float* b1, const float* w2t, const float* b2,
                             int64_t C, int64_t R, const SqueezeExciteParams& p, float* hidden, float* gate) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  for (int64_t r = 0; r < R; ++r) {
    const float* wr = w1 + r * C;
    V acc = V{};
    int64_t c = 0;
    for (; c + L <= C; c += L) {
      V a, m;
      mk::load(a, wr + c);
      mk::load(m, mean + c);
      acc += a * m;
    }
    float h = b1[r];
    for (int l = 0; l < L; ++l) h += acc[l];
    for (; c < C; ++c) h += wr[c] * mean[c];
    hidden[r] = activate(p.hidden_activation, h);
  }
  for (int64_t c = 0; c < C; c += L) {
    const int64_t nl = std::min<int64_t>(L, C - c);
    V acc;
    nhwc::load_upto<I>(acc, b2 + c, nl);
    for (int64_t r = 0; r < R; ++r) {
      V w;
      nhwc::load_upto<I>(w, w2t + r * C + c, nl);
      acc += hidden[r] * w;
    }
    nhwc::store_upto<I>(gate + c, acc, nl);
  }
  for (int64_t c = 0; c < C; ++c) gate[c] = activate(p.gate_activation, gate[c]);
}
INFER_PER_ISA(void, se_gates, gates_body,
              (const float* mean, const float* w1, const float* b1, const float* w2t, const float* b2, int64_t C,
               int64_t R, const SqueezeExciteParams& p, float* hidden, float* gate),
              (mean, w1, b1, w2t, b2, C, R, p, hidden, gate))

// w2 [C][C_r] transposed to [C_r][C], once.
struct SePrepared {
  std::vector<float> w2t;
};

std::shared_ptr<void> se_prepare(const NodeDesc& node) {
  const float* w2 = node.constants.size() >= 4 ? node.constants[3] : nullptr;
  if (!w2) throw Error("cpu squeeze_excite.direct_nhwc: w2 must be a constant");
  const int64_t C = node.input_shapes[0][1], R = node.input_shapes[1][0];
  auto prep = std::make_shared<SePrepared>();
  prep->w2t.resize(static_cast<size_t>(C * R));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = 0; r < R; ++r) prep->w2t[static_cast<size_t>(r * C + c)] = w2[c * R + r];
  return prep;
}

bool se_applicable(const NodeDesc& node) { return node.constants.size() >= 4 && node.constants[3]; }

// y = act(x * gate) for pixels [p0, p1) of image n.
template <class I>
INFER_INLINE void scale_body(const SeDims& d, const float* x, const float* gate, float* y, int64_t n, int64_t p0,
                             int64_t p1, const Activation& act) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const float* g = gate + n * d.C;
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + (n * d.HW + p) * d.C;
    float* yp = y + (n * d.HW + p) * d.C;
    for (int64_t c = 0; c < d.C; c += L) {
      const int64_t nl = std::min<int64_t>(L, d.C - c);
      V xv, gv;
      nhwc::load_upto<I>(xv, xp + c, nl);
      nhwc::load_upto<I>(gv, g + c, nl);
      nhwc::store_upto<I>(yp + c, nhwc::activate_v<I>(xv * gv, act), nl);
    }
    nhwc::activate_span<I>(yp, d.C, act);
  }
}
INFER_PER_ISA(void, se_scale, scale_body,
              (const SeDims& d, const float* x, const float* gate, float* y, int64_t n, int64_t p0, int64_t p1,
               const Activation& act),
              (d, x, gate, y, n, p0, p1, act))

SeDims se_dims(const NodeDesc& node) {
  const Shape& s = node.input_shapes[0];
  SeDims d{s[0], s[1], s[2] * s[3], node.input_shapes[1][0], 0, omp_get_num_procs()};
  d.blocks = (d.HW + kPixelBlock - 1) / kPixelBlock;
  return d;
}

size_t se_workspace(const NodeDesc& node) {
  const SeDims d = se_dims(node);
  return static_cast<size_t>(d.slots * d.slot_floats()) * sizeof(float);
}

void se_run(const KernelCall& call) {
  const auto& p = std::get<SqueezeExciteParams>(call.node.params);
  const SeDims d = se_dims(call.node);
  // w2 (input 3) is read transposed, from prepare()
  const float *x = call.inputs[0], *w1 = call.inputs[1], *b1 = call.inputs[2], *b2 = call.inputs[4];
  float* y = call.outputs[0];
  float* ws = static_cast<float*>(call.workspace);
  const auto partial_sums = se_partial_sums_for(call.node.isa);
  const auto gates = se_gates_for(call.node.isa);
  const auto* prep = static_cast<const SePrepared*>(call.prepared);
  if (!prep) throw Error("cpu squeeze_excite.direct_nhwc: not prepared for this node");
  const auto scale = se_scale_for(call.node.isa);
  const float inv_hw = d.HW ? 1.f / float(d.HW) : 0.f;
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), d.slots));
  SpinArrival sums_done;
  MasterLast last;
#pragma omp parallel if (d.N * d.C * d.HW >= kParallelMin) num_threads(threads)
  {
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    float* slot = ws + t * d.slot_floats();
    float *sums = slot, *gate = slot + d.N * d.C, *hidden = gate + d.N * d.C;
    for (int64_t n = 0; n < d.N; ++n)
      partial_sums(d, x + n * d.HW * d.C, sums + n * d.C, d.HW * t / T, d.HW * (t + 1) / T);
    sums_done.arrive();
#pragma omp barrier
    for (int64_t n = 0; n < d.N; ++n) {
      float* mean = gate + n * d.C;  // the means first, replaced by the gates below
      for (int64_t c = 0; c < d.C; ++c) {
        float m = 0.f;
        for (int u = 0; u < T; ++u) m += ws[u * d.slot_floats() + n * d.C + c];
        mean[c] = m * inv_hw;
      }
      gates(mean, w1, b1, prep->w2t.data(), b2, d.C, d.R, p, hidden + n * d.R, mean);
    }
#pragma omp for schedule(guided) nowait
    for (int64_t task = 0; task < d.N * d.blocks; ++task) {
      const int64_t n = task / d.blocks, p0 = (task % d.blocks) * kPixelBlock;
      scale(d, x, gate, y, n, p0, std::min(d.HW, p0 + kPixelBlock), p.activation);
    }
    last.arrive();
  }
}

}  // namespace

INFER_REGISTER_KERNELS(squeeze_excite_nhwc) {
  registry.add("cpu", {
      // the node's NCHW priority: squeeze-excitation follows its input's layout
      {.op = "squeeze_excite", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .isa = KernelVariant::Isa::PerIsa, .applicable = se_applicable,
       .workspace_bytes = se_workspace, .prepare = se_prepare, .run = se_run},
  });
}

}  // namespace infer::cpu
