// CPU shape and channel ops on NHWC activations, "direct_nhwc", float32, block copies:
//  - concat and slice: the same [outer, axis, inner] block copies as the NCHW kernels, on the shapes in
//    memory order ([N, H, W, C]: the channel axis is the innermost, so a channel concat copies each
//    input's C_k floats per pixel, a slice of channels a run of end - start per pixel); threads (thread_pool.h) over
//    the outer index;
//  - channel_shuffle: per pixel, y[j*g + i] = x[i*(C/g) + j], threads over the pixels;
//  - flatten and reshape where the memory order is the NCHW one anyway (a 4-D tensor with H*W == 1 or
//    C == 1, on both sides: the global pool's output before a classifier): one copy (none in place).
// Constants keep their NCHW order (the channels_last pass never converts them): concat takes none.
#include <algorithm>
#include <cstring>

#include "infer/kernel.h"
#include "kernels/cpu/nhwc.h"
#include "kernels/cpu/thread_pool.h"

namespace infer::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 17;  // elements copied

// NCHW axis a of a 4-D shape -> its position in the NHWC memory order.
int memory_axis(int a) { return a == 1 ? 3 : a == 0 ? 0 : a - 1; }

// [outer, dim, inner] of shape s (NCHW order, 4-D) around NCHW axis `axis`, in NHWC memory order.
void split_at(const Shape& s, int axis, int64_t& outer, int64_t& dim, int64_t& inner) {
  const Shape m = nhwc_order(s);
  const int a = memory_axis(axis);
  outer = inner = 1;
  for (int d = 0; d < a; ++d) outer *= m[size_t(d)];
  for (int d = a + 1; d < 4; ++d) inner *= m[size_t(d)];
  dim = m[size_t(a)];
}

bool all_4d(const NodeDesc& node) {
  for (const Shape& s : node.input_shapes)
    if (s.size() != 4) return false;
  return node.output_shapes[0].size() == 4;
}

bool concat_applicable(const NodeDesc& node) {
  for (const float* c : node.constants)
    if (c) return false;
  return all_4d(node);
}

void concat_run(const KernelCall& call) {
  const Shape& ys = call.node.output_shapes[0];
  const int axis = resolved_axis(std::get<ConcatParams>(call.node.params).axis, ys);
  int64_t outer, dim, inner;
  split_at(ys, axis, outer, dim, inner);
  const int64_t out_block = dim * inner;
  const size_t K = call.inputs.size();
  float* y = call.outputs[0];
  parallel_for(outer, outer * out_block >= kParallelMin, [&](int64_t o0, int64_t o1, int) {
    for (int64_t o = o0; o < o1; ++o) {
      float* out = y + o * out_block;
      for (size_t k = 0; k < K; ++k) {
        int64_t ko, kd, ki;
        split_at(call.node.input_shapes[k], axis, ko, kd, ki);
        const int64_t block = kd * ki;
        if (block > 0) std::memcpy(out, call.inputs[k] + o * block, static_cast<size_t>(block) * sizeof(float));
        out += block;
      }
    }
  });
}

bool slice_applicable(const NodeDesc& node) { return all_4d(node); }

void slice_run(const KernelCall& call) {
  const auto& p = std::get<SliceParams>(call.node.params);
  int64_t outer, dim, inner;
  split_at(call.node.input_shapes[0], p.axis, outer, dim, inner);
  const int64_t run = (p.end - p.start) * inner;
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  parallel_for(outer, outer * run >= kParallelMin, [&](int64_t o0, int64_t o1, int) {
    for (int64_t o = o0; o < o1; ++o)
      std::memcpy(y + o * run, x + (o * dim + p.start) * inner, size_t(run) * sizeof(float));
  });
}

void channel_shuffle_run(const KernelCall& call) {
  const Shape& s = call.node.input_shapes[0];
  const int64_t C = s[1], pixels = s[0] * s[2] * s[3];
  const int64_t g = std::get<ChannelShuffleParams>(call.node.params).groups, per = C / g;
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  parallel_for(pixels, pixels * C >= kParallelMin, [&](int64_t p0, int64_t p1, int) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x + p * C;
      float* yp = y + p * C;
      for (int64_t i = 0; i < g; ++i)
        for (int64_t j = 0; j < per; ++j) yp[j * g + i] = xp[i * per + j];
    }
  });
}

// A 4-D shape whose NHWC memory order is its NCHW order; other ranks have no layout.
bool same_order(const Shape& s) { return s.size() != 4 || s[2] * s[3] == 1 || s[1] == 1; }

bool relabel_applicable(const NodeDesc& node) {
  return same_order(node.input_shapes[0]) && same_order(node.output_shapes[0]);
}

void copy_relabelled(const KernelCall& call) {
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  if (n > 0 && call.inputs[0] != call.outputs[0])
    std::memmove(call.outputs[0], call.inputs[0], static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

INFER_REGISTER_KERNELS(tensor_ops_nhwc) {
  // Each at the node's NCHW priority: these ops follow their input's layout.
  registry.add("cpu", {
      {.op = "concat", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .applicable = concat_applicable, .run = concat_run},
      {.op = "slice", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .applicable = slice_applicable, .run = slice_run},
      {.op = "channel_shuffle", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .run = channel_shuffle_run},
      {.op = "flatten", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .applicable = relabel_applicable, .run = copy_relabelled},
      {.op = "reshape", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .applicable = relabel_applicable, .run = copy_relabelled},
  });
}

}  // namespace infer::cpu
