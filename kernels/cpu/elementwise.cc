// CPU element-wise kernels, all "direct" OpenMP loops over contiguous float32 data: activation (every
// ActivationKind through activation_simd.h's activate_row, compiled per ISA level, in chunks of
// kActChunk floats; none copies), add (equal shapes, then the fused activation) and inference
// batchnorm over axis 1 (when the fold pass did not remove it): per channel, scale and shift are
// precomputed as a = scale / sqrt(var + eps), b = bias - mean * a, so y = act(a * x + b). An add whose
// inputs come through QDQ pairs (input_qdq) applies them per element, per ISA level. Each output
// depends only on the input at the same index, so every kernel may run in place (y == x).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/activation_simd.h"
#include "infer/kernel.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/quantize.h"

namespace infer::cpu {
namespace {

// Loops smaller than this many elements run on one thread: waking a thread team costs more than they
// do (and far more on a loaded machine).
constexpr int64_t kParallelMin = int64_t(1) << 15;


INFER_PER_ISA(void, act_row, activate_row, (float* y, const float* x, int64_t n, const Activation& act),
              (y, x, n, act))

// Elements per OpenMP iteration: a multiple of every level's vector width.
constexpr int64_t kActChunk = 4096;

void activation_run(const KernelCall& call) {
  const Activation act = std::get<ActivationParams>(call.node.params).activation;
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const auto row = act_row_for(call.node.isa);
  const int64_t chunks = (n + kActChunk - 1) / kActChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c)
    row(y + c * kActChunk, x + c * kActChunk, std::min(kActChunk, n - c * kActChunk), act);
}

// An input through its QDQ pair (AddParams::input_qdq): quantize.h's quantize_vec (the cpu
// quantize_linear kernel's values), then (q - zero) * scale as dequantize_linear's kernel computes it,
// kept a rounding of its own (opaque: no FMA with the sum), so the fused add is the pair's and the add's
// values bit for bit; L lanes a step, the tail element by element.
struct QDQIn {
  bool on;
  float scale, zero, lo, hi;
};
template <class I>
INFER_INLINE typename I::Vec qdq_vec(const float* x, const QDQIn& q) {
  using V = typename I::Vec;
  V v;
  if (!q.on) {
    std::memcpy(&v, x, sizeof v);
    return v;
  }
  v = quant::quantize_vec<I>(x, q.scale, q.zero, q.lo, q.hi) - q.zero;
  v *= q.scale;
  return opaque(v);
}
INFER_INLINE float qdq_one(float x, const QDQIn& q) {
  if (!q.on) return x;
  return opaque((quant::quantize_value(x, q.scale, q.zero, q.lo, q.hi) - q.zero) * q.scale);
}
template <class I>
INFER_INLINE void add_qdq_body(const float* a, const float* b, float* y, int64_t n, const QDQIn& qa,
                               const QDQIn& qb) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const V s = qdq_vec<I>(a + i, qa) + qdq_vec<I>(b + i, qb);
    std::memcpy(y + i, &s, sizeof s);
  }
  for (; i < n; ++i) y[i] = qdq_one(a[i], qa) + qdq_one(b[i], qb);
}
INFER_PER_ISA(void, add_qdq_row, add_qdq_body,
              (const float* a, const float* b, float* y, int64_t n, const QDQIn& qa, const QDQIn& qb),
              (a, b, y, n, qa, qb))

QDQIn qdq_in(const AddInputQDQ& q) {
  float lo, hi;
  quant::range_of(q.dtype, lo, hi);
  return {q.on, q.scale, float(q.zero_point), lo, hi};
}

bool has_qdq(const NodeDesc& node) {
  const auto& p = std::get<AddParams>(node.params);
  return p.input_qdq[0].on || p.input_qdq[1].on;
}

// add "qdq": a QDQ model's residual add (fuse_quantized_add), its inputs' pairs applied as it reads.
void add_qdq_run(const KernelCall& call) {
  const auto& p = std::get<AddParams>(call.node.params);
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  const float *a = call.inputs[0], *b = call.inputs[1];
  float* y = call.outputs[0];
  const QDQIn qa = qdq_in(p.input_qdq[0]), qb = qdq_in(p.input_qdq[1]);
  const auto row = add_qdq_row_for(call.node.isa);
  const Activation& act = p.activation;
  const int64_t chunks = (n + kActChunk - 1) / kActChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t at = c * kActChunk, len = std::min(kActChunk, n - at);
    float* yc = y + at;
    row(a + at, b + at, yc, len, qa, qb);
    // the plain add's activation (activate_inplace's arithmetic), chunk by chunk while it is in cache
    if (act.kind == ActivationKind::Relu)
      for (int64_t i = 0; i < len; ++i) yc[i] = yc[i] < 0.f ? 0.f : yc[i];
    else if (act.kind != ActivationKind::None)
      for (int64_t i = 0; i < len; ++i) yc[i] = activate(act, yc[i]);
  }
}

void add_run(const KernelCall& call) {
  const auto& p = std::get<AddParams>(call.node.params);
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  const float *a = call.inputs[0], *b = call.inputs[1];
  float* y = call.outputs[0];
  const Activation act = p.activation;
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  activate_inplace(y, n, act);
}

void batchnorm_run(const KernelCall& call) {
  const auto& p = std::get<BatchNormParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  const int64_t N = s[0], C = s[1], inner = shape_numel(s) / std::max<int64_t>(N * C, 1);
  const float *x = call.inputs[0], *scale = call.inputs[1], *bias = call.inputs[2],
              *mean = call.inputs[3], *var = call.inputs[4];
  float* y = call.outputs[0];
  // One plane per iteration; its channel's a and b are computed there (in double, rounded once), which
  // costs one sqrt per plane and needs no scratch memory.
#pragma omp parallel for schedule(static) if (N * C * inner >= kParallelMin)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const int64_t c = nc % C;
    const double inv_std = 1.0 / std::sqrt(double(var[c]) + double(p.epsilon));
    const float a = float(double(scale[c]) * inv_std);
    const float b = float(double(bias[c]) - double(mean[c]) * double(scale[c]) * inv_std);
    const float* xp = x + nc * inner;
    float* yp = y + nc * inner;
    for (int64_t i = 0; i < inner; ++i) yp[i] = activate(p.activation, a * xp[i] + b);
  }
}

}  // namespace

INFER_REGISTER_KERNELS(elementwise) {
  registry.add("cpu", {
      // element by element (add: equal shapes, so equal layouts): either layout
      {.op = "activation", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .run = activation_run},
      {.op = "add", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = [](const NodeDesc& d) { return !has_qdq(d); }, .run = add_run},
      {.op = "add", .name = "qdq", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .applicable = has_qdq, .run = add_qdq_run},
      {.op = "batchnorm", .name = "direct", .priority = 10, .run = batchnorm_run},
  });
}

}  // namespace infer::cpu
