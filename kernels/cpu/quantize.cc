// CPU quantize_linear / dequantize_linear "direct": per-tensor scale and zero point (the activation pairs
// of a QDQ model), either layout (element by element), quantize.h's vectorised rounding compiled per ISA
// level; chunks of kChunk elements over the kernels' team, one thread below kParallelMin. Per-axis
// nodes keep the reference kernel. Values bit for bit the reference's (tests/test_quantized_conv.cc).
#include <algorithm>

#include "infer/kernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;
constexpr int64_t kChunk = 4096;

template <class I>
INFER_INLINE void q_body(const float* x, int64_t n, float scale, float zero, float lo, float hi, float* y) {
  quant::quantize_row<I>(x, n, scale, zero, lo, hi, y);
}
INFER_PER_ISA(void, q_row, q_body, (const float* x, int64_t n, float scale, float zero, float lo, float hi, float* y),
              (x, n, scale, zero, lo, hi, y))

template <class I>
INFER_INLINE void dq_body(const float* x, int64_t n, float scale, float zero, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - zero) * scale;
}
INFER_PER_ISA(void, dq_row, dq_body, (const float* x, int64_t n, float scale, float zero, float* y),
              (x, n, scale, zero, y))

bool per_tensor(const NodeDesc& node) { return shape_numel(node.input_shapes[1]) == 1; }

template <class F>
void chunked(const KernelCall& call, F&& row) {
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  parallel_for((n + kChunk - 1) / kChunk, n >= kParallelMin, [&](int64_t b, int64_t e, int) {
    const int64_t lo = b * kChunk, hi = std::min(n, e * kChunk);
    row(lo, hi - lo);
  });
}

void quantize_run(const KernelCall& call) {
  const auto& p = std::get<QuantizeLinearParams>(call.node.params);
  float lo, hi;
  quant::range_of(p.dtype, lo, hi);
  const float scale = call.inputs[1][0], zero = call.inputs.size() > 2 ? call.inputs[2][0] : 0.f;
  const auto fn = q_row_for(call.node.isa);
  chunked(call, [&](int64_t at, int64_t n) { fn(call.inputs[0] + at, n, scale, zero, lo, hi, call.outputs[0] + at); });
}

void dequantize_run(const KernelCall& call) {
  const float scale = call.inputs[1][0], zero = call.inputs.size() > 2 ? call.inputs[2][0] : 0.f;
  const auto fn = dq_row_for(call.node.isa);
  chunked(call, [&](int64_t at, int64_t n) { fn(call.inputs[0] + at, n, scale, zero, call.outputs[0] + at); });
}

}  // namespace

INFER_REGISTER_KERNELS(quantize) {
  registry.add("cpu", {
      {.op = "quantize_linear", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .applicable = per_tensor, .run = quantize_run},
      {.op = "dequantize_linear", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .isa = KernelVariant::Isa::PerIsa, .applicable = per_tensor, .run = dequantize_run},
  });
}

}  // namespace infer::cpu
