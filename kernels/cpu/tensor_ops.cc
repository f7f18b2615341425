// CPU shape and tensor kernels, "direct", float32: flatten and reshape only relabel a contiguous
// tensor (one memmove, skipped when the executor hands the same buffer in and out); softmax along any
// axis, numerically stable (max subtracted, double sum), one OpenMP iteration per line; concat along
// any axis as, per outer index, each input's contiguous block copied in turn (OpenMP over outer).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/cpu/call_util.h"
#include "kernels/cpu/cpu_kernels.h"

namespace infer::cpu {
namespace {

// Loops smaller than this many elements run on one thread: waking a thread team costs more than they
// do (and far more on a loaded machine).
constexpr int64_t kParallelMin = int64_t(1) << 15;


void copy_relabelled(const KernelCall& call, const char* op) {
  check_call(call, op, 1, 1);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  check_dims(op, xs);
  check_dims(op, ys);
  if (shape_numel(xs) != shape_numel(ys))
    throw Error(std::string("cpu ") + op + ": output " + shape_str(ys) + " has a different element count than input " +
                shape_str(xs));
  const int64_t n = shape_numel(xs);
  if (n > 0 && call.inputs[0] != call.outputs[0])
    std::memmove(call.outputs[0], call.inputs[0], static_cast<size_t>(n) * sizeof(float));
}

void flatten_run(const KernelCall& call) {
  params_of<FlattenParams>(call.node, "flatten");
  copy_relabelled(call, "flatten");
}

void reshape_run(const KernelCall& call) {
  params_of<ReshapeParams>(call.node, "reshape");
  copy_relabelled(call, "reshape");
}

// Resolves a possibly negative axis against rank; an Error naming op when out of range.
int resolve_axis(const char* op, int axis, const Shape& s) {
  const int rank = static_cast<int>(s.size());
  const int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw Error(std::string("cpu ") + op + ": axis " + std::to_string(axis) + " is out of range for shape " +
                shape_str(s));
  return a;
}

void softmax_run(const KernelCall& call) {
  check_call(call, "softmax", 1, 1);
  check_same_shapes(call, "softmax");
  const Shape& s = call.node.input_shapes[0];
  check_dims("softmax", s);
  const int axis = resolve_axis("softmax", params_of<SoftmaxParams>(call.node, "softmax").axis, s);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t len = s[size_t(axis)];
  const float* x = call.inputs[0];
  float* y = call.outputs[0];

  // line (o, i): elements base + k*inner, k < len; in place is fine (each line read before written)
#pragma omp parallel for schedule(static) if (outer * inner * len >= kParallelMin)
  for (int64_t line = 0; line < outer * inner; ++line) {
    const int64_t base = (line / inner) * len * inner + line % inner;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t k = 0; k < len; ++k) max = std::max(max, x[base + k * inner]);
    double sum = 0;
    for (int64_t k = 0; k < len; ++k) {
      const float e = std::exp(x[base + k * inner] - max);
      y[base + k * inner] = e;
      sum += e;
    }
    const float inv = float(1.0 / sum);
    for (int64_t k = 0; k < len; ++k) y[base + k * inner] *= inv;
  }
}

void concat_run(const KernelCall& call) {
  check_call(call, "concat", 1, std::numeric_limits<size_t>::max());
  const Shape& ys = call.node.output_shapes[0];
  check_dims("concat", ys);
  const int axis = resolve_axis("concat", params_of<ConcatParams>(call.node, "concat").axis, ys);
  int64_t axis_total = 0;
  for (const Shape& s : call.node.input_shapes) {
    check_dims("concat", s);
    bool ok = s.size() == ys.size();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = int(d) == axis || s[d] == ys[d];
    if (!ok)
      throw Error("cpu concat: input " + shape_str(s) + " is incompatible with output " + shape_str(ys) +
                  " along axis " + std::to_string(axis));
    axis_total += s[size_t(axis)];
  }
  if (axis_total != ys[size_t(axis)])
    throw Error("cpu concat: inputs sum to " + std::to_string(axis_total) + " along axis " +
                std::to_string(axis) + ", output has " + std::to_string(ys[size_t(axis)]));
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

void register_tensor_ops(KernelRegistry& registry) {
  struct Entry {
    const char* op;
    void (*run)(const KernelCall&);
  };
  for (const Entry& e : {Entry{"flatten", flatten_run}, Entry{"reshape", reshape_run},
                         Entry{"softmax", softmax_run}, Entry{"concat", concat_run}}) {
    KernelVariant v;
    v.op = e.op;
    v.name = "direct";
    v.backend = "cpu";
    v.priority = 10;
    v.run = e.run;
    registry.add(std::move(v));
  }
}

}  // namespace infer::cpu
