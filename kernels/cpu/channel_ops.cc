// CPU channel_shuffle and slice "direct": block copies. channel_shuffle moves whole H*W planes
// (output channel j*g + i <- input channel i*(C/g) + j), one memcpy per plane, OpenMP over the N*C
// planes; slice views x as [outer, dim, inner] and copies each outer index's contiguous
// (end-start)*inner run with one memcpy, OpenMP over outer. float32, NCHW, not in place.
#include <cstring>

#include "infer/kernel.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;

void channel_shuffle_run(const KernelCall& call) {
  const Shape& s = call.node.input_shapes[0];
  const int64_t C = s[1], HW = s[2] * s[3], planes = s[0] * C;
  const int64_t g = std::get<ChannelShuffleParams>(call.node.params).groups, per = C / g;
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
#pragma omp parallel for schedule(static) if (planes * HW >= kParallelMin)
  for (int64_t nc = 0; nc < planes; ++nc) {  // output plane (n, c = j*g + i)
    const int64_t n = nc / C, c = nc % C, j = c / g, i = c % g;
    std::memcpy(y + nc * HW, x + (n * C + i * per + j) * HW, size_t(HW) * sizeof(float));
  }
}

void slice_run(const KernelCall& call) {
  const auto& p = std::get<SliceParams>(call.node.params);
  const Shape& s = call.node.input_shapes[0];
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < p.axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(p.axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t dim = s[static_cast<size_t>(p.axis)], run = (p.end - p.start) * inner;
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
#pragma omp parallel for schedule(static) if (outer * run >= kParallelMin)
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(y + o * run, x + (o * dim + p.start) * inner, size_t(run) * sizeof(float));
}

}  // namespace

INFER_REGISTER_KERNELS(channel_ops) {
  registry.add("cpu", {
      {.op = "channel_shuffle", .name = "direct", .priority = 10, .run = channel_shuffle_run},
      {.op = "slice", .name = "direct", .priority = 10, .run = slice_run},
  });
}

}  // namespace infer::cpu
