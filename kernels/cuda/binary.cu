// CUDA binary ops (add, sub, mul, div) with NumPy broadcasting in float or half storage with float
// arithmetic, then the fused activation; NCHW and NHWC nodes alike (the broadcast plan of
// kernels/broadcast.h knows each input's memory strides: 4-D activations in the node's layout,
// constants in NCHW). One thread per output element, grid-stride; a 1-dim plan (same shape, scalar)
// indexes directly, others decompose the index over the collapsed dims (1-3 in practice). Each thread
// reads its index before writing it, so in place (y == an input of y's shape) is safe.
#include <cstdint>
#include <string>

#include "kernels/broadcast.h"
#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

struct AddOp { __device__ static float f(float a, float b) { return a + b; } };
struct SubOp { __device__ static float f(float a, float b) { return a - b; } };
struct MulOp { __device__ static float f(float a, float b) { return a * b; } };
struct DivOp { __device__ static float f(float a, float b) { return a / b; } };  // IEEE (no fast math)

template <class T, class Op>
__global__ void binary_kernel(const T* a, const T* b, T* y, BroadcastPlan p, DeviceActivation act) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.numel; i += step) {
    int64_t ia = 0, ib = 0;
    if (p.ndim == 1) {
      ia = i * p.stride_a[0];
      ib = i * p.stride_b[0];
    } else {
      int64_t rest = i;
      for (int d = p.ndim - 1; d >= 0; --d) {
        const int64_t k = rest % p.dims[d];
        rest /= p.dims[d];
        ia += k * p.stride_a[d];
        ib += k * p.stride_b[d];
      }
    }
    y[i] = from_float<T>(activate(act, Op::f(to_float(a[ia]), to_float(b[ib]))));
  }
}

template <class Op>
void launch(Context& ctx, Precision precision, const BroadcastPlan& plan, const float* a,
            const float* b, float* y, const Activation& act) {
  dispatch(precision, [&](auto tag) {
    using T = decltype(tag);
    binary_kernel<T, Op><<<grid_for(plan.numel), 256, 0, ctx.stream>>>(
        reinterpret_cast<const T*>(a), reinterpret_cast<const T*>(b), reinterpret_cast<T*>(y), plan,
        device_activation(act));
  });
  INFER_CUDA_CHECK_LAUNCH();
}

void binary_run(const KernelCall& call) {
  const auto& params = std::get<BinaryParams>(call.node.params);
  const BroadcastPlan plan = plan_broadcast(call.node, "cuda");
  if (plan.numel == 0) return;
  Context& ctx = context_of(call);
  const float *a = call.inputs[0], *b = call.inputs[1];
  float* y = call.outputs[0];
  const Precision pr = call.node.precision;
  switch (params.kind) {
    case BinaryKind::Add: return launch<AddOp>(ctx, pr, plan, a, b, y, params.activation);
    case BinaryKind::Sub: return launch<SubOp>(ctx, pr, plan, a, b, y, params.activation);
    case BinaryKind::Mul: return launch<MulOp>(ctx, pr, plan, a, b, y, params.activation);
    case BinaryKind::Div: return launch<DivOp>(ctx, pr, plan, a, b, y, params.activation);
  }
  throw Error("cuda binary: unknown kind " + std::to_string(static_cast<int>(params.kind)));
}

}  // namespace

INFER_REGISTER_KERNELS(binary) {
  registry.add("cuda", {
      // every broadcast pattern in either layout
      {.op = "binary", .name = "broadcast", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = broadcast_ok, .run = binary_run},
  });
}

}  // namespace infer::cuda
