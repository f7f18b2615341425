// CPU squeeze_excite "direct_nhwc" (the fuse_squeeze_excite pass's node) on NHWC activations, float32.
// One OpenMP region in four work-shared loops, as squeeze_excite.direct: (1) the channel means, per
// (image, group of channel vectors) a sum over the image's pixels of channel-vector rows; (2) the
// hidden layer, one dot of length C per (n, r); (3) the gates, one dot of length C_r per (n, c);
// (4) y = x * gate (+ the output activation), per (image, block of pixels), a pixel's channels times
// the gate vector. A bounded spin before each barrier and the master last (omp_last.h). Channel counts
// not a multiple of the vector end in a masked vector (nhwc.h). Workspace: means, hidden values and
// gates, N (2 C + C_r) floats.
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/omp_last.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // elements of x (the NCHW kernel's threshold)
constexpr int64_t kGroupVectors = 4;                 // channel vectors per iteration of the means
constexpr int64_t kPixelBlock = 64;                  // pixels per iteration of the multiply

struct SeDims {
  int64_t N, C, HW, R, group, groups, blocks;
};

// mean[n][c0 .. c1) over the HW pixels of image n.
template <class I>
INFER_INLINE void means_body(const SeDims& d, const float* x, float* mean, int64_t n, int64_t c0, int64_t c1) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const float inv = d.HW ? 1.f / float(d.HW) : 0.f;
  const float* xn = x + n * d.HW * d.C;
  for (int64_t c = c0; c < c1; c += L) {
    const int64_t nl = std::min<int64_t>(L, c1 - c);
    V s0 = V{}, s1 = V{};
    int64_t p = 0;
    for (; p + 1 < d.HW; p += 2) {
      V a, b;
      nhwc::load_upto<I>(a, xn + p * d.C + c, nl);
      nhwc::load_upto<I>(b, xn + (p + 1) * d.C + c, nl);
      s0 += a;
      s1 += b;
    }
    if (p < d.HW) {
      V a;
      nhwc::load_upto<I>(a, xn + p * d.C + c, nl);
      s0 += a;
    }
    nhwc::store_upto<I>(mean + n * d.C + c, (s0 + s1) * inv, nl);
  }
}
INFER_PER_ISA(void, se_means, means_body,
              (const SeDims& d, const float* x, float* mean, int64_t n, int64_t c0, int64_t c1),
              (d, x, mean, n, c0, c1))

template <class>
INFER_INLINE float dot_body(const float* a, const float* b, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
INFER_PER_ISA(float, se_dot, dot_body, (const float* a, const float* b, int64_t n), (a, b, n))

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
    nhwc::activate_span(yp, d.C, act);
  }
}
INFER_PER_ISA(void, se_scale, scale_body,
              (const SeDims& d, const float* x, const float* gate, float* y, int64_t n, int64_t p0, int64_t p1,
               const Activation& act),
              (d, x, gate, y, n, p0, p1, act))

size_t se_workspace(const NodeDesc& node) {
  const Shape& x = node.input_shapes[0];
  return static_cast<size_t>(x[0] * (2 * x[1] + node.input_shapes[1][0])) * sizeof(float);
}

void se_run(const KernelCall& call) {
  const auto& p = std::get<SqueezeExciteParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  const int64_t L = isa::shape(call.node.isa).lanes;
  SeDims d{s[0], s[1], s[2] * s[3], call.node.input_shapes[1][0], 0, 0, 0};
  d.group = std::max<int64_t>(1, std::min((d.C + L - 1) / L, kGroupVectors)) * L;
  d.groups = (d.C + d.group - 1) / d.group;
  d.blocks = (d.HW + kPixelBlock - 1) / kPixelBlock;
  const float *x = call.inputs[0], *w1 = call.inputs[1], *b1 = call.inputs[2], *w2 = call.inputs[3],
              *b2 = call.inputs[4];
  float* y = call.outputs[0];
  float* mean = static_cast<float*>(call.workspace);  // [N, C]
  float* gate = mean + d.N * d.C;                      // [N, C]
  float* hidden = gate + d.N * d.C;                    // [N, R]
  const auto means = se_means_for(call.node.isa);
  const auto dot = se_dot_for(call.node.isa);
  const auto scale = se_scale_for(call.node.isa);
  SpinArrival means_done, hidden_done, gates_done;
  MasterLast last;
#pragma omp parallel if (d.N * d.C * d.HW >= kParallelMin)
  {
#pragma omp for schedule(guided) nowait
    for (int64_t t = 0; t < d.N * d.groups; ++t) {
      const int64_t n = t / d.groups, c0 = (t % d.groups) * d.group;
      means(d, x, mean, n, c0, std::min(d.C, c0 + d.group));
    }
    means_done.arrive();
#pragma omp barrier
#pragma omp for schedule(guided) nowait
    for (int64_t nr = 0; nr < d.N * d.R; ++nr) {
      const float h = dot(w1 + (nr % d.R) * d.C, mean + (nr / d.R) * d.C, d.C);
      hidden[nr] = activate(p.hidden_activation, h + b1[nr % d.R]);
    }
    hidden_done.arrive();
#pragma omp barrier
#pragma omp for schedule(guided) nowait
    for (int64_t nc = 0; nc < d.N * d.C; ++nc) {
      const int64_t c = nc % d.C;
      gate[nc] = activate(p.gate_activation, dot(w2 + c * d.R, hidden + (nc / d.C) * d.R, d.R) + b2[c]);
    }
    gates_done.arrive();
#pragma omp barrier
#pragma omp for schedule(guided) nowait
    for (int64_t t = 0; t < d.N * d.blocks; ++t) {
      const int64_t n = t / d.blocks, p0 = (t % d.blocks) * kPixelBlock;
      scale(d, x, gate, y, n, p0, std::min(d.HW, p0 + kPixelBlock), p.activation);
    }
    last.arrive();
  }
}

}  // namespace

void register_squeeze_excite_nhwc(KernelRegistry& registry) {
  registry.add("cpu", {
      // the node's NCHW priority: squeeze-excitation follows its input's layout
      {.op = "squeeze_excite", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .isa = KernelVariant::Isa::PerIsa, .workspace_bytes = se_workspace,
       .run = se_run},
  });
}

}  // namespace infer::cpu
