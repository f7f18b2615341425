// CPU shape and channel ops on NHWC activations, "direct_nhwc", float32, block copies compiled per ISA
// level (isa.h: a pixel's run of channels is tens of floats, copied as whole vectors and one masked
// vector, nhwc::copy_n; runs of 1024 floats and more by memcpy):
//  - concat and slice: the same [outer, axis, inner] block copies as the NCHW kernels, on the shapes in
//    memory order ([N, H, W, C]: the channel axis is the innermost, so a channel concat copies each
//    input's C_k floats per pixel, a slice of channels a run of end - start per pixel); threads
//    (thread_pool.h) over the outer index;
//  - channel_shuffle: per pixel, y[j*g + i] = x[i*(C/g) + j]; two groups (ShuffleNetV2) zip a vector of
//    each half into two output vectors, other group counts go per float; threads over the pixels;
//  - depth_to_space (DCR, CRD): per output pixel the C_out channels of its input pixel from channel
//    (i*b + j)*C_out on (DCR: one run, nhwc::copy_n) or c*b*b + i*b + j (CRD: a gather); threads over
//    the output rows;
//  - flatten and reshape where the memory order is the NCHW one anyway (a 4-D tensor with H*W == 1 or
//    C == 1, on both sides: the global pool's output before a classifier): one copy (none in place).
// Constants keep their NCHW order (the channels_last pass never converts them): concat takes none.
#include <algorithm>
#include <cstring>
#include <vector>

#include "infer/kernel.h"
#include "kernels/cpu/isa.h"
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

// Blocks of this many floats or more are copied by memcpy, shorter ones by nhwc::copy_n.
constexpr int64_t kMemcpyMin = 1024;

// Outer indices [o0, o1) of a concat: each input's block of every outer index, in input order.
template <class I>
INFER_INLINE void concat_rows_body(const float* const* in, const int64_t* blocks, size_t K, int64_t out_block,
                                   float* y, int64_t o0, int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    float* out = y + o * out_block;
    for (size_t k = 0; k < K; ++k) {
      const int64_t block = blocks[k];
      if (block >= kMemcpyMin) std::memcpy(out, in[k] + o * block, static_cast<size_t>(block) * sizeof(float));
      else nhwc::copy_n<I>(out, in[k] + o * block, block);
      out += block;
    }
  }
}
INFER_PER_ISA(void, concat_rows, concat_rows_body,
              (const float* const* in, const int64_t* blocks, size_t K, int64_t out_block, float* y, int64_t o0,
               int64_t o1),
              (in, blocks, K, out_block, y, o0, o1))

void concat_run(const KernelCall& call) {
  const Shape& ys = call.node.output_shapes[0];
  const int axis = resolved_axis(std::get<ConcatParams>(call.node.params).axis, ys);
  int64_t outer, dim, inner;
  split_at(ys, axis, outer, dim, inner);
  const int64_t out_block = dim * inner;
  const size_t K = call.inputs.size();
  std::vector<int64_t> blocks(K);
  for (size_t k = 0; k < K; ++k) {
    int64_t ko, kd, ki;
    split_at(call.node.input_shapes[k], axis, ko, kd, ki);
    blocks[k] = kd * ki;
  }
  const auto rows = concat_rows_for(call.node.isa);
  float* y = call.outputs[0];
  parallel_for(outer, outer * out_block >= kParallelMin, [&](int64_t o0, int64_t o1, int) {
    rows(call.inputs.data(), blocks.data(), K, out_block, y, o0, o1);
  });
}

bool slice_applicable(const NodeDesc& node) { return all_4d(node); }

// Outer indices [o0, o1) of a slice: a run of `run` floats each, `stride` floats apart in x.
template <class I>
INFER_INLINE void slice_rows_body(const float* x, int64_t stride, int64_t run, float* y, int64_t o0, int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    if (run >= kMemcpyMin) std::memcpy(y + o * run, x + o * stride, size_t(run) * sizeof(float));
    else nhwc::copy_n<I>(y + o * run, x + o * stride, run);
  }
}
INFER_PER_ISA(void, slice_rows, slice_rows_body,
              (const float* x, int64_t stride, int64_t run, float* y, int64_t o0, int64_t o1),
              (x, stride, run, y, o0, o1))

void slice_run(const KernelCall& call) {
  const auto& p = std::get<SliceParams>(call.node.params);
  int64_t outer, dim, inner;
  split_at(call.node.input_shapes[0], p.axis, outer, dim, inner);
  const int64_t run = (p.end - p.start) * inner;
  const float* x = call.inputs[0] + p.start * inner;
  float* y = call.outputs[0];
  const auto rows = slice_rows_for(call.node.isa);
  parallel_for(outer, outer * run >= kParallelMin,
               [&](int64_t o0, int64_t o1, int) { rows(x, dim * inner, run, y, o0, o1); });
}

// Pixels [p0, p1) of a channel shuffle, C = g * per channels each: y[j*g + i] = x[i*per + j]. Two groups
// (ShuffleNetV2's): the halves' vectors zipped, a vector of each half giving two of y; else per float.
template <class I>
INFER_INLINE void shuffle_pixels_body(const float* x, float* y, int64_t g, int64_t per, int64_t p0, int64_t p1) {
  using V = typename I::Vec;
  constexpr int L = I::kLanes;
  const int64_t C = g * per;
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + p * C;
    float* yp = y + p * C;
    if (g == 2) {
      int64_t j = 0;
      for (; j + L <= per; j += L) {
        V a, b;
        nhwc::load(a, xp + j);
        nhwc::load(b, xp + per + j);
        const V lo = nhwc::zip<I, 0>(a, b), hi = nhwc::zip<I, 1>(a, b);
        nhwc::store(yp + 2 * j, lo);
        nhwc::store(yp + 2 * j + L, hi);
      }
      if (j < per) {
        const int64_t n = per - j;
        V a, b;
        nhwc::load_n<I>(a, xp + j, n);
        nhwc::load_n<I>(b, xp + per + j, n);
        const V lo = nhwc::zip<I, 0>(a, b), hi = nhwc::zip<I, 1>(a, b);
        nhwc::store_n<I>(yp + 2 * j, lo, std::min<int64_t>(2 * n, L));
        nhwc::store_n<I>(yp + 2 * j + L, hi, std::max<int64_t>(2 * n - L, 0));
      }
      continue;
    }
    for (int64_t i = 0; i < g; ++i)
      for (int64_t j = 0; j < per; ++j) yp[j * g + i] = xp[i * per + j];
  }
}
INFER_PER_ISA(void, shuffle_pixels, shuffle_pixels_body,
              (const float* x, float* y, int64_t g, int64_t per, int64_t p0, int64_t p1), (x, y, g, per, p0, p1))

void channel_shuffle_run(const KernelCall& call) {
  const Shape& s = call.node.input_shapes[0];
  const int64_t C = s[1], pixels = s[0] * s[2] * s[3];
  const int64_t g = std::get<ChannelShuffleParams>(call.node.params).groups, per = C / g;
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const auto shuffle = shuffle_pixels_for(call.node.isa);
  parallel_for(pixels, pixels * C >= kParallelMin,
               [&](int64_t p0, int64_t p1, int) { shuffle(x, y, g, per, p0, p1); });
}

// A 4-D shape whose NHWC memory order is its NCHW order; other ranks have no layout.
bool same_order(const Shape& s) { return s.size() != 4 || s[2] * s[3] == 1 || s[1] == 1; }

bool relabel_applicable(const NodeDesc& node) {
  return same_order(node.input_shapes[0]) && same_order(node.output_shapes[0]);
}

// Output rows [r0, r1) (r = n * H*b + oy) of a depth_to_space from x [N, H, W, C_out*b*b] (NHWC).
template <class I>
INFER_INLINE void depth_to_space_rows_body(const float* x, float* y, int64_t H, int64_t W, int64_t b, int64_t CO,
                                           bool dcr, int64_t r0, int64_t r1) {
  const int64_t HO = H * b, WO = W * b, C = CO * b * b;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / HO, oy = r % HO, i = oy % b;
    const float* xr = x + (n * H + oy / b) * W * C;
    float* yp = y + r * WO * CO;
    for (int64_t ox = 0; ox < WO; ++ox, yp += CO) {
      const int64_t j = ox % b;
      const float* xp = xr + (ox / b) * C;
      if (dcr) {
        nhwc::copy_n<I>(yp, xp + (i * b + j) * CO, CO);
      } else {
        for (int64_t c = 0; c < CO; ++c) yp[c] = xp[c * b * b + i * b + j];
      }
    }
  }
}
INFER_PER_ISA(void, depth_to_space_rows, depth_to_space_rows_body,
              (const float* x, float* y, int64_t H, int64_t W, int64_t b, int64_t CO, bool dcr, int64_t r0,
               int64_t r1),
              (x, y, H, W, b, CO, dcr, r0, r1))

void depth_to_space_run(const KernelCall& call) {
  const auto& p = std::get<DepthToSpaceParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ys = call.node.output_shapes[0];
  const auto rows = depth_to_space_rows_for(call.node.isa);
  const float* x = call.inputs[0];
  float* y = call.outputs[0];
  const bool dcr = p.mode == DepthToSpaceMode::DCR;
  parallel_for(ys[0] * ys[2], shape_numel(ys) >= kParallelMin, [&](int64_t r0, int64_t r1, int) {
    rows(x, y, xs[2], xs[3], p.block, ys[1], dcr, r0, r1);
  });
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
       .layouts = {Layout::NHWC}, .isa = KernelVariant::Isa::PerIsa, .applicable = concat_applicable, .run = concat_run},
      {.op = "slice", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .isa = KernelVariant::Isa::PerIsa, .applicable = slice_applicable, .run = slice_run},
      {.op = "depth_to_space", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .isa = KernelVariant::Isa::PerIsa, .run = depth_to_space_run},
      {.op = "channel_shuffle", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .isa = KernelVariant::Isa::PerIsa, .run = channel_shuffle_run},
      {.op = "flatten", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .applicable = relabel_applicable, .run = copy_relabelled},
      {.op = "reshape", .name = "direct_nhwc", .priority = 10, .priority_for = nchw_priority,
       .layouts = {Layout::NHWC}, .applicable = relabel_applicable, .run = copy_relabelled},
  });
}

}  // namespace infer::cpu
