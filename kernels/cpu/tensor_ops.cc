// CPU shape and tensor kernels, "direct", float32: flatten and reshape only relabel a contiguous
// tensor (one memmove, skipped when the executor hands the same buffer in and out); softmax and
// log_softmax along any axis, numerically stable (max subtracted, double sum), one OpenMP iteration
// per line; concat along any axis as, per outer index, each input's contiguous block copied in turn
// (OpenMP over outer).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "infer/kernel.h"

namespace infer::cpu {
namespace {

// Loops smaller than this many elements run on one thread: waking a thread team costs more than they
// do (and far more on a loaded machine).
constexpr int64_t kParallelMin = int64_t(1) << 15;

// flatten and reshape: the same elements under another shape (a copy unless in place).
void copy_relabelled(const KernelCall& call) {
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  if (n > 0 && call.inputs[0] != call.outputs[0])
    std::memmove(call.outputs[0], call.inputs[0], static_cast<size_t>(n) * sizeof(float));
}

// softmax and log_softmax (Log): line (o, i) holds elements base + k*inner, k < len; in place is fine
// (each line is read before it is written). log_softmax writes (x - max) - log(sum), not log(softmax).
template <bool Log, class Params>
void softmax_run(const KernelCall& call) {
  const Shape& s = call.node.input_shapes[0];
  const int axis = resolved_axis(std::get<Params>(call.node.params).axis, s);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t len = s[size_t(axis)];
  const float* x = call.inputs[0];
  float* y = call.outputs[0];

#pragma omp parallel for schedule(static) if (outer * inner * len >= kParallelMin)
  for (int64_t line = 0; line < outer * inner; ++line) {
    const int64_t base = (line / inner) * len * inner + line % inner;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t k = 0; k < len; ++k) max = std::max(max, x[base + k * inner]);
    double sum = 0;
    if constexpr (Log) {
      for (int64_t k = 0; k < len; ++k) sum += std::exp(x[base + k * inner] - max);
      const float log_sum = float(std::log(sum));
      for (int64_t k = 0; k < len; ++k) y[base + k * inner] = (x[base + k * inner] - max) - log_sum;
    } else {
      for (int64_t k = 0; k < len; ++k) {
        const float e = std::exp(x[base + k * inner] - max);
        y[base + k * inner] = e;
        sum += e;
      }
      const float inv = float(1.0 / sum);
      for (int64_t k = 0; k < len; ++k) y[base + k * inner] *= inv;
    }
  }
}

void concat_run(const KernelCall& call) {
  const Shape& ys = call.node.output_shapes[0];
  const int axis = resolved_axis(std::get<ConcatParams>(call.node.params).axis, ys);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= ys[d];
  for (size_t d = size_t(axis) + 1; d < ys.size(); ++d) inner *= ys[d];
  const int64_t out_block = ys[size_t(axis)] * inner;
  const size_t K = call.inputs.size();
  float* y = call.outputs[0];

#pragma omp parallel for schedule(static) if (outer * out_block >= kParallelMin)
  for (int64_t o = 0; o < outer; ++o) {
    float* out = y + o * out_block;
    for (size_t k = 0; k < K; ++k) {
      const int64_t block = call.node.input_shapes[k][size_t(axis)] * inner;
      if (block > 0) std::memcpy(out, call.inputs[k] + o * block, static_cast<size_t>(block) * sizeof(float));
      out += block;
    }
  }
}

}  // namespace

INFER_REGISTER_KERNELS(tensor_ops) {
  registry.add("cpu", {
      {.op = "flatten", .name = "direct", .priority = 10, .run = copy_relabelled},
      {.op = "reshape", .name = "direct", .priority = 10, .run = copy_relabelled},
      {.op = "softmax", .name = "direct", .priority = 10, .run = softmax_run<false, SoftmaxParams>},
      {.op = "log_softmax", .name = "direct", .priority = 10, .run = softmax_run<true, LogSoftmaxParams>},
      {.op = "concat", .name = "direct", .priority = 10, .run = concat_run},
  });
}

}  // namespace infer::cpu
