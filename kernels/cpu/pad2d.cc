// CPU pad2d "direct": OpenMP over the N*C*H_out output rows. A row of the interior is one memcpy of
// the input row (reflect/edge rows above and below copy the row they map to); the left and right
// borders are filled per element (constant value, mirrored or clamped column). float32, NCHW.
#include <algorithm>
#include <cstring>

#include "infer/kernel.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;

// The input index that index i (input coordinates) reads along an axis of `size`; -1: the fill.
inline int64_t source(PadMode mode, int64_t i, int64_t size) {
  if (i >= 0 && i < size) return i;
  if (mode == PadMode::Edge) return i < 0 ? 0 : size - 1;
  if (mode == PadMode::Reflect) return i < 0 ? -i : 2 * (size - 1) - i;  // pad < size (shape rule)
  return -1;
}

void pad2d_run(const KernelCall& call) {
  const auto& p = std::get<Pad2DParams>(call.node.params);
  const Shape& xs = call.node.input_shapes[0];
  const Shape& ys = call.node.output_shapes[0];
  const int64_t H = xs[2], W = xs[3], HO = ys[2], WO = ys[3], rows = xs[0] * xs[1] * HO;
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const int64_t left = p.pad.left, right = p.pad.right;
#pragma omp parallel for schedule(static) if (rows * WO >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t plane = r / HO, oy = r % HO;
    const int64_t iy = source(p.mode, oy - p.pad.top, H);
    float* yr = y + r * WO;
    if (iy < 0) {
      std::fill(yr, yr + WO, p.value);
      continue;
    }
    const float* xr = x + (plane * H + iy) * W;
    for (int64_t o = 0; o < left; ++o) {
      const int64_t ix = source(p.mode, o - left, W);
      yr[o] = ix < 0 ? p.value : xr[ix];
    }
    std::memcpy(yr + left, xr, size_t(W) * sizeof(float));
    for (int64_t o = 0; o < right; ++o) {
      const int64_t ix = source(p.mode, W + o, W);
      yr[left + W + o] = ix < 0 ? p.value : xr[ix];
    }
  }
}

}  // namespace

INFER_REGISTER_KERNELS(pad2d) {
  registry.add("cpu", {{.op = "pad2d", .name = "direct", .priority = 10, .run = pad2d_run}});
}

}  // namespace infer::cpu
