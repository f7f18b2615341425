// CPU element-wise kernels, all "direct" OpenMP loops over contiguous float32 data: activation (every
// ActivationKind through im2col.h's activate(); none copies), add (equal shapes, then the fused activation) and inference
// batchnorm over axis 1 (when the fold pass did not remove it): per channel, scale and shift are
// precomputed as a = scale / sqrt(var + eps), b = bias - mean * a, so y = act(a * x + b). Each output
// depends only on the input at the same index, so every kernel may run in place (y == x).
#include <cmath>
#include <string>
#include <algorithm>

#include "kernels/cpu/call_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {
namespace {

// Loops smaller than this many elements run on one thread: waking a thread team costs more than they
// do (and far more on a loaded machine).
constexpr int64_t kParallelMin = int64_t(1) << 15;


void activation_run(const KernelCall& call) {
  check_call(call, "activation", 1, 1);
  check_same_shapes(call, "activation");
  check_dims("activation", call.node.input_shapes[0]);
  const Activation act = params_of<ActivationParams>(call.node, "activation").activation;
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  switch (act.kind) {
    case ActivationKind::Relu:
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.f ? 0.f : x[i];
      break;
    default:
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = activate(act, x[i]);
  }
}

void add_run(const KernelCall& call) {
  check_call(call, "add", 2, 2);
  check_same_shapes(call, "add");
  check_dims("add", call.node.input_shapes[0]);
  const Activation act = params_of<AddParams>(call.node, "add").activation;
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  const float *a = call.inputs[0], *b = call.inputs[1];
  float* y = call.outputs[0];
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  activate_inplace(y, n, act);
}

bool batchnorm_applicable(const NodeDesc& node) {
  if (!std::holds_alternative<BatchNormParams>(node.params) || node.input_shapes.size() != 5 ||
      node.output_shapes.size() != 1)
    return false;
  const Shape& s = node.input_shapes[0];
  if (s.size() < 2 || s != node.output_shapes[0]) return false;
  for (size_t i = 1; i < 5; ++i)
    if (shape_numel(node.input_shapes[i]) != s[1]) return false;
  return true;
}

void batchnorm_run(const KernelCall& call) {
  check_call(call, "batchnorm", 5, 5);
  const auto& p = params_of<BatchNormParams>(call.node, "batchnorm");
  const Shape& s = call.node.input_shapes[0];
  if (!batchnorm_applicable(call.node))
    throw Error("cpu batchnorm: input " + shape_str(s) + " needs rank >= 2, an equal output shape and "
                "per-channel scale, bias, mean and var");
  check_dims("batchnorm", s);
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

void register_elementwise(KernelRegistry& registry) {
  struct Entry {
    const char* op;
    void (*run)(const KernelCall&);
  };
  for (const Entry& e : {Entry{"activation", activation_run}, Entry{"add", add_run},
                         Entry{"batchnorm", batchnorm_run}}) {
    KernelVariant v;
    v.op = e.op;
    v.name = "direct";
    v.backend = "cpu";
    v.priority = 10;
    if (std::string(e.op) == "batchnorm") v.applicable = batchnorm_applicable;
    v.run = e.run;
    registry.add(std::move(v));
  }
}

}  // namespace infer::cpu
