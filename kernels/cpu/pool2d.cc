// CPU pool2d "direct" (max / average over NCHW, any kernel, stride and asymmetric padding, float32):
// one OpenMP iteration per (n, c) plane; each output clips its window to the image, so padded cells
// never win a max, and an average divides by the window clipped to the padded image
// (count_include_pad, as PyTorch/ONNX) or by the real cells it read -- the reference's semantics.
// ceil_mode needs nothing here: its extra last window is clipped the same way (shape inference sizes it).
#include <algorithm>
#include <limits>
#include <string>

#include "kernels/cpu/cpu_kernels.h"

namespace infer::cpu {
namespace {

// Loops smaller than this many elements run on one thread: waking a thread team costs more than they
// do (and far more on a loaded machine).
constexpr int64_t kParallelMin = int64_t(1) << 15;


void pool2d_run(const KernelCall& call) {
  const auto& p = std::get<Pool2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  const int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], HO = ys[2], WO = ys[3];
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const bool is_max = p.kind == PoolKind::Max;

  const int64_t work = NC * HO * WO * p.kernel_h * p.kernel_w;
#pragma omp parallel for schedule(static) if (work >= kParallelMin)
  for (int64_t c = 0; c < NC; ++c) {
    const float* xp = x + c * H * W;
    float* yp = y + c * HO * WO;
    for (int64_t oy = 0; oy < HO; ++oy) {
      const int64_t y0 = oy * p.stride_h - p.pad.top;
      const int64_t yb = std::max<int64_t>(y0, 0), ye = std::min<int64_t>(y0 + p.kernel_h, H);
      const int64_t py = std::min<int64_t>(y0 + p.kernel_h, H + p.pad.bottom) - y0;
      for (int64_t ox = 0; ox < WO; ++ox) {
        const int64_t x0 = ox * p.stride_w - p.pad.left;
        const int64_t xb = std::max<int64_t>(x0, 0), xe = std::min<int64_t>(x0 + p.kernel_w, W);
        if (yb >= ye || xb >= xe) {  // a window entirely in the padding (padding >= kernel)
          yp[oy * WO + ox] = 0.f;
          continue;
        }
        if (is_max) {
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t iy = yb; iy < ye; ++iy)
            for (int64_t ix = xb; ix < xe; ++ix) m = std::max(m, xp[iy * W + ix]);
          yp[oy * WO + ox] = m;
        } else {
          float s = 0.f;
          for (int64_t iy = yb; iy < ye; ++iy)
            for (int64_t ix = xb; ix < xe; ++ix) s += xp[iy * W + ix];
          const int64_t px = std::min<int64_t>(x0 + p.kernel_w, W + p.pad.right) - x0;
          const int64_t divisor = p.count_include_pad ? py * px : (ye - yb) * (xe - xb);
          yp[oy * WO + ox] = s / float(divisor);
        }
      }
    }
  }
}

}  // namespace

void register_pool2d(KernelRegistry& registry) {
  registry.add("cpu", {
      {.op = "pool2d", .name = "direct", .priority = 10, .run = pool2d_run},
  });
}

}  // namespace infer::cpu
