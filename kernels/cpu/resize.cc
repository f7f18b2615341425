// CPU resize "direct" (nearest / bilinear, float32, NCHW): the row and column source indices and
// weights are computed once per call (kernels/resize_coords.h, float), then one OpenMP iteration per
// (n, c, output row) gathers or blends from those tables. Same rules as the reference.
// Also depth_to_space "direct" (DCR / CRD, NCHW): OpenMP over (n, c_out, output row), each row a
// gather from its b input channels (one per column phase) of one input row.
#include <vector>

#include "infer/kernel.h"
#include "kernels/resize_coords.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // smaller loops stay on one thread

void resize_run(const KernelCall& call) {
  const auto& p = std::get<ResizeParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  const int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], HO = ys[2], WO = ys[3];
  const auto ay = resize::make_axis(H, HO, p.coord, p.scale_h);
  const auto ax = resize::make_axis(W, WO, p.coord, p.scale_w);
  const bool nearest = p.mode == ResizeMode::Nearest;
  std::vector<resize::Taps> rows(HO), cols(WO);
  for (int o = 0; o < HO; ++o)
    rows[o] = nearest ? resize::Taps{resize::nearest(ay, o, p.nearest), 0, 0.f} : resize::linear(ay, o);
  for (int o = 0; o < WO; ++o)
    cols[o] = nearest ? resize::Taps{resize::nearest(ax, o, p.nearest), 0, 0.f} : resize::linear(ax, o);
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
#pragma omp parallel for schedule(static) if (NC * HO * WO >= kParallelMin)
  for (int64_t r = 0; r < NC * HO; ++r) {
    const int64_t c = r / HO, oy = r % HO;
    const float* xp = x + c * H * W;
    float* yp = y + r * WO;
    const resize::Taps& t = rows[oy];
    if (nearest) {
      const float* src = xp + t.i0 * W;
      for (int64_t ox = 0; ox < WO; ++ox) yp[ox] = src[cols[ox].i0];
      continue;
    }
    const float* r0 = xp + t.i0 * W;
    const float* r1 = xp + t.i1 * W;
    for (int64_t ox = 0; ox < WO; ++ox) {
      const resize::Taps& u = cols[ox];
      const float top = r0[u.i0] + u.w1 * (r0[u.i1] - r0[u.i0]);
      const float bot = r1[u.i0] + u.w1 * (r1[u.i1] - r1[u.i0]);
      yp[ox] = top + t.w1 * (bot - top);
    }
  }
}

void depth_to_space_run(const KernelCall& call) {
  const auto& p = std::get<DepthToSpaceParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  const int64_t b = p.block, C = xs[1], H = xs[2], W = xs[3], CO = ys[1], HO = ys[2], WO = ys[3];
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const bool dcr = p.mode == DepthToSpaceMode::DCR;
#pragma omp parallel for schedule(static) if (ys[0] * CO * HO * WO >= kParallelMin)
  for (int64_t r = 0; r < ys[0] * CO * HO; ++r) {
    const int64_t oy = r % HO, nc = r / HO, c = nc % CO, n = nc / CO, i = oy % b;
    float* yp = y + r * WO;
    for (int64_t j = 0; j < b; ++j) {
      const int64_t ic = dcr ? (i * b + j) * CO + c : c * b * b + i * b + j;
      const float* xp = x + ((n * C + ic) * H + oy / b) * W;
      for (int64_t w = 0; w < W; ++w) yp[w * b + j] = xp[w];
    }
  }
}

}  // namespace

INFER_REGISTER_KERNELS(resize) {
  registry.add("cpu", {
      {.op = "resize", .name = "direct", .priority = 10, .run = resize_run},
      {.op = "depth_to_space", .name = "direct", .priority = 10, .run = depth_to_space_run},
  });
}

}  // namespace infer::cpu
