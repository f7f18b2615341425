// CPU binary ops (add, sub, mul, div) with NumPy broadcasting, float32, NCHW, then the fused
// activation. The broadcast is collapsed once (kernels/broadcast.h) into rows of the innermost dim;
// the inner loop has fast paths for both inputs contiguous (same shape), one input constant along the
// row (per-channel scale, squeeze-excitation gate, scalar) and a general strided form. Rows, or blocks
// of a long row, are spread over OpenMP threads. In place (y == a or b of y's shape) is safe.
#include <algorithm>

#include "kernels/broadcast.h"
#include "infer/error.h"
#include "infer/kernel.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // fewer elements run on one thread
constexpr int64_t kBlock = int64_t(1) << 14;        // a long row splits into blocks of this many

struct AddOp { static float f(float a, float b) { return a + b; } };
struct SubOp { static float f(float a, float b) { return a - b; } };
struct MulOp { static float f(float a, float b) { return a * b; } };
struct DivOp { static float f(float a, float b) { return a / b; } };

// y[0..n) = a[i*sa] op b[i*sb]; sa, sb are element strides (0: broadcast along the row).
template <class Op>
void row(const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  if (sa == 1 && sb == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = Op::f(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const float bv = b[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = Op::f(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    const float av = a[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = Op::f(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = Op::f(a[i * sa], b[i * sb]);
  }
}

template <class Op>
void run_plan(const BroadcastPlan& p, const float* a, const float* b, float* y, const Activation& act) {
  const int last = p.ndim - 1;
  const int64_t inner = p.dims[last];
  const int64_t rows = p.numel / inner;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (p.numel >= kParallelMin)
  for (int64_t task = 0; task < rows * blocks; ++task) {
    const int64_t r = task / blocks, start = (task % blocks) * kBlock;
    const int64_t len = std::min(kBlock, inner - start);
    // The row's offsets: r decomposed over the outer dims, innermost of them fastest.
    int64_t oa = 0, ob = 0, rest = r;
    for (int d = last - 1; d >= 0; --d) {
      const int64_t i = rest % p.dims[d];
      rest /= p.dims[d];
      oa += i * p.stride_a[d];
      ob += i * p.stride_b[d];
    }
    float* yr = y + r * inner + start;
    row<Op>(a + oa + start * p.stride_a[last], p.stride_a[last], b + ob + start * p.stride_b[last],
            p.stride_b[last], yr, len);
    if (act.kind != ActivationKind::None)
      for (int64_t i = 0; i < len; ++i) yr[i] = activate(act, yr[i]);
  }
}

void binary_run(const KernelCall& call) {
  const auto& params = std::get<BinaryParams>(call.node.params);
  const BroadcastPlan plan = plan_broadcast(call.node, "cpu");
  if (plan.numel == 0) return;
  const float *a = call.inputs[0], *b = call.inputs[1];
  float* y = call.outputs[0];
  switch (params.kind) {
    case BinaryKind::Add: return run_plan<AddOp>(plan, a, b, y, params.activation);
    case BinaryKind::Sub: return run_plan<SubOp>(plan, a, b, y, params.activation);
    case BinaryKind::Mul: return run_plan<MulOp>(plan, a, b, y, params.activation);
    case BinaryKind::Div: return run_plan<DivOp>(plan, a, b, y, params.activation);
  }
  throw Error("cpu binary: unknown kind " + std::to_string(static_cast<int>(params.kind)));
}

}  // namespace

INFER_REGISTER_KERNELS(binary) {
  registry.add("cpu", {
      // every broadcast pattern in either layout (plan_broadcast knows NHWC operands' strides)
      {.op = "binary", .name = "broadcast", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = broadcast_ok, .run = binary_run},
  });
}

}  // namespace infer::cpu
