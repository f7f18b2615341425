// CUDA quantize_linear / dequantize_linear "direct": per-tensor scale and zero point (the pairs of a QDQ
// model no int8 kernel took), either layout, float or half storage holding the integers (exact in half:
// |q| <= 255). quantize: quantize.cuh's arithmetic; dequantize: float(x - zero) * scale. Scale and zero
// point come from the node's float32 constants when prepared (an upload in half would round the
// scale). One thread an element, grid-stride.
#include <memory>
#include <string>

#include "infer/kernel.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/quantize.cuh"

namespace infer::cuda {
namespace {

struct QParams {
  float scale = 1.f, zero = 0.f, lo = 0.f, hi = 255.f;
};

template <class T>
__global__ void quantize_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, QParams q) {
  const float rcp = __frcp_rn(q.scale);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_float<T>(quantize_float(to_float(x[i]), q.scale, rcp, q.zero, q.lo, q.hi));
}

template <class T>
__global__ void dequantize_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, QParams q) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_float<T>((to_float(x[i]) - q.zero) * q.scale);
}

// Per tensor, with the scale (and zero point) constants: what the session hands a QDQ model's pairs.
bool per_tensor_constant(const NodeDesc& node) {
  if (shape_numel(node.input_shapes[1]) != 1 || node.constants.size() < 2 || !node.constants[1]) return false;
  return node.input_shapes.size() < 3 || (node.constants.size() >= 3 && node.constants[2]);
}

std::shared_ptr<void> prepare(const NodeDesc& node) {
  if (!per_tensor_constant(node))
    throw Error("cuda " + std::string(op_name(op_type(node.params))) +
                ".direct: needs a constant per-tensor scale and zero point");
  auto q = std::make_shared<QParams>();
  q->scale = node.constants[1][0];
  q->zero = node.input_shapes.size() >= 3 ? node.constants[2][0] : 0.f;
  if (const auto* p = std::get_if<QuantizeLinearParams>(&node.params)) {
    q->lo = p->dtype == DType::I8 ? -128.f : 0.f;
    q->hi = p->dtype == DType::I8 ? 127.f : 255.f;
  }
  return q;
}

template <bool kQuantize>
void run(const KernelCall& call) {
  if (!call.prepared) throw Error("cuda quantize_linear / dequantize_linear.direct: not prepared");
  const QParams& q = *static_cast<const QParams*>(call.prepared);
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  if (n == 0) return;
  Context& ctx = context_of(call);
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const T* x = reinterpret_cast<const T*>(call.inputs[0]);
    T* y = reinterpret_cast<T*>(call.outputs[0]);
    if constexpr (kQuantize)
      quantize_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(x, y, n, q);
    else
      dequantize_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(x, y, n, q);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(quantize) {
  registry.add("cuda", {
      {.op = "quantize_linear", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = per_tensor_constant, .prepare = prepare, .run = run<true>},
      {.op = "dequantize_linear", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = per_tensor_constant, .prepare = prepare, .run = run<false>},
  });
}

}  // namespace infer::cuda
