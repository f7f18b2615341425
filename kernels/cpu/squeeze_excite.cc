// CPU squeeze_excite "direct" (the fuse_squeeze_excite pass's node), float32 NCHW. One OpenMP region
// in three work-shared loops (guided, a bounded spin before each barrier, the master last: omp_last.h):
// the channel means (a vectorised sum per (n, c) plane), the hidden layer (one dot of length C per
// (n, r)), then per plane its gate (a dot of length C_r) and the multiply (and an activation after it,
// vectorised: activation_simd.h).
// x is read twice (mean, multiply) and y written once, as by the unfused pool + mul, but with one
// thread-team start instead of four nodes and a vectorised mean (the global pool's loop is scalar).
#include <algorithm>

#include "kernels/cpu/activation_simd.h"
#include "infer/kernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/omp_last.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;

// The inner loops, compiled per ISA level (isa.h) and picked by the node's level (the build
// targets baseline x86-64; the unfused 1x1 convolutions ran in OpenBLAS's AVX-512 GEMV). Not
// target_clones: the IFUNC resolvers GCC 12 generates for these small functions are
// ThreadSanitizer-instrumented and crash the TSan build while the library is relocated.
template <class>
INFER_INLINE float dot_body(const float* a, const float* b, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
template <class>
INFER_INLINE float sum_body(const float* a, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i];
  return s;
}
template <class>
INFER_INLINE void scale_body(const float* x, float* y, int64_t n, float g) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * g;
}
// y = act(x * g) (an activation after the multiply; activation_simd.h)
template <class I>
INFER_INLINE void scale_act_body(const float* x, float* y, int64_t n, float g, const Activation& act) {
  scale_body<I>(x, y, n, g);
  activate_row<I>(y, n, act);
}
INFER_PER_ISA(float, dot, dot_body, (const float* a, const float* b, int64_t n), (a, b, n))
INFER_PER_ISA(float, sum, sum_body, (const float* a, int64_t n), (a, n))
INFER_PER_ISA(void, scale, scale_body, (const float* x, float* y, int64_t n, float g), (x, y, n, g))
INFER_PER_ISA(void, scale_act, scale_act_body,
              (const float* x, float* y, int64_t n, float g, const Activation& act), (x, y, n, g, act))

size_t se_workspace(const NodeDesc& node) {
  const Shape& x = node.input_shapes[0];
  return static_cast<size_t>(x[0] * (x[1] + node.input_shapes[1][0])) * sizeof(float);
}

void squeeze_excite_run(const KernelCall& call) {
  const auto& p = std::get<SqueezeExciteParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3], R = call.node.input_shapes[1][0];
  const float *x = call.inputs[0], *w1 = call.inputs[1], *b1 = call.inputs[2], *w2 = call.inputs[3],
              *b2 = call.inputs[4];
  float* y = call.outputs[0];
  float* mean = static_cast<float*>(call.workspace);  // [N, C]
  float* hidden = mean + N * C;                        // [N, R]
  const float inv_hw = HW ? 1.f / float(HW) : 0.f;
  const auto dot = dot_for(call.node.isa);
  const auto sum = sum_for(call.node.isa);
  const auto scale = scale_for(call.node.isa);
  const auto scale_act = scale_act_for(call.node.isa);
  // guided loops, a bounded spin before each barrier and the master last at the end, as in the
  // Winograd kernel (omp_last.h): with OMP_WAIT_POLICY=passive a thread that reaches a barrier first
  // sleeps and wakes late, and this node has two barriers of its own
  SpinArrival means_done, hidden_done;
  MasterLast last;
#pragma omp parallel if (N * C * HW >= kParallelMin)
  {
#pragma omp for schedule(guided) nowait
    for (int64_t nc = 0; nc < N * C; ++nc) {
      mean[nc] = sum(x + nc * HW, HW) * inv_hw;
    }
    means_done.arrive();
#pragma omp barrier
#pragma omp for schedule(guided) nowait
    for (int64_t nr = 0; nr < N * R; ++nr) {
      const float h = dot(w1 + (nr % R) * C, mean + (nr / R) * C, C);
      hidden[nr] = activate(p.hidden_activation, h + b1[nr % R]);
    }
    hidden_done.arrive();
#pragma omp barrier
#pragma omp for schedule(guided) nowait
    for (int64_t nc = 0; nc < N * C; ++nc) {
      const int64_t c = nc % C;
      const float gate = activate(p.gate_activation, dot(w2 + c * R, hidden + (nc / C) * R, R) + b2[c]);
      const float* xp = x + nc * HW;
      float* yp = y + nc * HW;
      if (p.activation.kind == ActivationKind::None) {
        scale(xp, yp, HW, gate);
      } else {
        scale_act(xp, yp, HW, gate, p.activation);
      }
    }
    last.arrive();
  }
}

}  // namespace

INFER_REGISTER_KERNELS(squeeze_excite) {
  registry.add("cpu", {{.op = "squeeze_excite", .name = "direct", .priority = 10,
                        .isa = KernelVariant::Isa::PerIsa, .workspace_bytes = se_workspace, .run = squeeze_excite_run}});
}

}  // namespace infer::cpu
