// CUDA shape/tensor "direct" kernels, float or half storage: flatten and reshape are one device-to-device
// cudaMemcpyAsync (skipped when in == out); softmax and log_softmax along any axis as [outer, len,
// inner], stable in float via the one-pass online max-and-sum (Milakov & Gimelshein 2018) then a write
// pass (exp(x - m) / s, or (x - m) - log s), a warp, block or thread per line; concat along any axis as
// one strided slab copy per input (16/8/4/2-byte units, as alignment allows), NCHW or NHWC (the shape in
// memory order: a channel concat copies each input's C_k values per pixel). No workspace; all
// asynchronous on the context's stream.
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

// --- flatten, reshape ---

// flatten and reshape: the same elements under another shape (a copy unless in place).
void copy_relabelled(const KernelCall& call) {
  const int64_t n = shape_numel(call.node.input_shapes[0]);
  if (n > 0 && call.inputs[0] != call.outputs[0])
    INFER_CUDA_CHECK(cudaMemcpyAsync(call.outputs[0], call.inputs[0],
                                     size_t(n) * element_size(call.node.precision),
                                     cudaMemcpyDeviceToDevice, context_of(call).stream));
}

// --- softmax ---
// Line l of the [outer, len, inner] view holds the elements base(l) + k * inner, k < len, with
// base(l) = (l / inner) * len * inner + l % inner. Three mappings of lines to threads, same arithmetic:
//   warp per line   (len <= 1024): lanes stride over k; for inner == 1 ([N, 1000] logits) the loads
//                   of a warp are contiguous and the line is re-read from L1 by the write pass;
//   block per line  (len > 1024): 256 threads stride over k, reduced through shared memory;
//   thread per line (inner > 1 with enough lines to fill the GPU, or short lines): adjacent threads
//                   take adjacent i, so every load of a warp is contiguous across the warp.
// Each mapping first finishes its line's reduction (a warp shuffle or __syncthreads) and then writes,
// so running in place (y == x) is safe.

// The running maximum m and sum s = sum exp(x - m) of part of a line.
struct MaxSum {
  float m = -INFINITY;
  float s = 0.f;
};

__device__ __forceinline__ void add_element(MaxSum& a, float x) {
  if (x > a.m) {  // a new maximum rescales the sum (exp(-inf) = 0 covers the empty start)
    a.s = a.s * expf(a.m - x) + 1.f;
    a.m = x;
  } else if (x != -INFINITY) {  // -inf contributes exp(-inf) = 0; skipping it avoids -inf - -inf
    a.s += expf(x - a.m);
  }
}

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return MaxSum{m, a.s + b.s};
  return MaxSum{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    MaxSum o;
    o.m = __shfl_xor_sync(0xffffffffu, v.m, off);
    o.s = __shfl_xor_sync(0xffffffffu, v.s, off);
    v = merge(v, o);
  }
  return v;
}

// Writes y = exp(x - m) / s (softmax) or y = (x - m) - log(s) (log_softmax, Log) over k = first,
// first + step, ... < len of the line at base.
template <bool Log, class T>
__device__ __forceinline__ void write_line(const T* x, T* y, int64_t base, int64_t len, int64_t inner,
                                           int64_t first, int64_t step, MaxSum r) {
  if constexpr (Log) {
    const float log_s = logf(r.s);
    for (int64_t k = first; k < len; k += step) {
      const int64_t j = base + k * inner;
      y[j] = from_float<T>((to_float(x[j]) - r.m) - log_s);
    }
  } else {
    const float inv = 1.f / r.s;
    for (int64_t k = first; k < len; k += step) {
      const int64_t j = base + k * inner;
      y[j] = from_float<T>(expf(to_float(x[j]) - r.m) * inv);
    }
  }
}

constexpr int kSoftmaxThreads = 256;
constexpr int kWarpLineMax = 1024;  // longest line a warp takes; longer ones get a block

template <bool Log, class T>
__global__ void softmax_warp_kernel(const T* x, T* y, int64_t lines, int64_t len, int64_t inner) {
  const int lane = threadIdx.x % 32;
  const int64_t warps_per_grid = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t l = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32; l < lines;
       l += warps_per_grid) {
    const int64_t base = (l / inner) * len * inner + l % inner;
    MaxSum r;
    for (int64_t k = lane; k < len; k += 32) add_element(r, to_float(x[base + k * inner]));
    r = warp_merge(r);
    write_line<Log>(x, y, base, len, inner, lane, 32, r);
  }
}

template <bool Log, class T>
__global__ void softmax_block_kernel(const T* x, T* y, int64_t lines, int64_t len, int64_t inner) {
  __shared__ float partial_m[kSoftmaxThreads / 32], partial_s[kSoftmaxThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    const int64_t base = (l / inner) * len * inner + l % inner;
    MaxSum r;
    for (int64_t k = threadIdx.x; k < len; k += blockDim.x) add_element(r, to_float(x[base + k * inner]));
    r = warp_merge(r);
    if (lane == 0) {
      partial_m[warp] = r.m;
      partial_s[warp] = r.s;
    }
    __syncthreads();
    MaxSum total;  // every thread merges the warps' partials in the same order: identical results
    for (int w = 0; w < warps; ++w) total = merge(total, MaxSum{partial_m[w], partial_s[w]});
    write_line<Log>(x, y, base, len, inner, threadIdx.x, blockDim.x, total);
    __syncthreads();  // partial_m/_s are reused by the next line
  }
}

template <bool Log, class T>
__global__ void softmax_thread_kernel(const T* x, T* y, int64_t lines, int64_t len, int64_t inner) {
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < lines;
       l += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (l / inner) * len * inner + l % inner;
    MaxSum r;
    for (int64_t k = 0; k < len; ++k) add_element(r, to_float(x[base + k * inner]));
    write_line<Log>(x, y, base, len, inner, 0, 1, r);
  }
}

// softmax (Params = SoftmaxParams) and log_softmax (Log, LogSoftmaxParams): the same lines and launches.
template <bool Log, class Params>
void softmax_run(const KernelCall& call) {
  const Shape& s = call.node.input_shapes[0];
  if (s != call.node.output_shapes[0])
    throw Error(std::string("cuda ") + (Log ? "log_softmax" : "softmax") + ": input shape " + shape_str(s) +
                " differs from output shape " + shape_str(call.node.output_shapes[0]));
  const int axis = resolved_axis(std::get<Params>(call.node.params).axis, s);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t len = s[size_t(axis)], lines = outer * inner;
  if (lines == 0 || len == 0) return;

  Context& ctx = context_of(call);
  // Enough independent lines to give every SM a full complement of threads (2048 on sm_80/90).
  const int64_t fill = int64_t(ctx.sm_count > 0 ? ctx.sm_count : 1) * 2048;
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    const T* x = reinterpret_cast<const T*>(call.inputs[0]);
    T* y = reinterpret_cast<T*>(call.outputs[0]);
    if (inner > 1 && (lines >= fill || len < 32)) {
      softmax_thread_kernel<Log, T><<<grid_for(lines, kSoftmaxThreads), kSoftmaxThreads, 0, ctx.stream>>>(
          x, y, lines, len, inner);
    } else if (len <= kWarpLineMax) {
      constexpr int kWarps = kSoftmaxThreads / 32;
      softmax_warp_kernel<Log, T><<<grid_for(lines, kWarps), kSoftmaxThreads, 0, ctx.stream>>>(
          x, y, lines, len, inner);
    } else {
      softmax_block_kernel<Log, T><<<grid_for(lines, 1), kSoftmaxThreads, 0, ctx.stream>>>(x, y, lines, len,
                                                                                       inner);
    }
  });
  INFER_CUDA_CHECK_LAUNCH();
}

// --- concat ---
// Per input k, the output viewed as [outer, out_block] receives the input's [outer, block] at column
// offset: one launch per input, one thread per copy unit (U = 16, 8, 4 or 2 bytes), grid-stride.

template <class U>
__global__ void copy_slab_kernel(const U* x, U* y, int64_t outer, int64_t block, int64_t out_block) {
  const int64_t total = outer * block;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / block;
    y[o * out_block + (i - o * block)] = x[i];
  }
}

template <class U>
void launch_copy_slab(Context& ctx, const void* x, void* y, int64_t outer, int64_t block_bytes,
                      int64_t out_block_bytes) {
  const int64_t block = block_bytes / int64_t(sizeof(U)), out_block = out_block_bytes / int64_t(sizeof(U));
  copy_slab_kernel<U><<<grid_for(outer * block), 256, 0, ctx.stream>>>(
      static_cast<const U*>(x), static_cast<U*>(y), outer, block, out_block);
  INFER_CUDA_CHECK_LAUNCH();
}

// A shape and axis in memory order: an NHWC tensor's [N, H, W, C] (its channel axis the innermost).
void memory_order(const NodeDesc& node, Shape& s, int& axis) {
  if (node.layout != Layout::NHWC || s.size() != 4) return;
  s = {s[0], s[2], s[3], s[1]};
  axis = axis == 1 ? 3 : axis == 0 ? 0 : axis - 1;
}

// NHWC: 4-D activations only (constants keep their NCHW order).
bool concat_applicable(const NodeDesc& node) {
  if (node.layout != Layout::NHWC) return true;
  for (size_t k = 0; k < node.input_shapes.size(); ++k)
    if (node.input_shapes[k].size() != 4 || node.constants[k]) return false;
  return node.output_shapes[0].size() == 4;
}

void concat_run(const KernelCall& call) {
  Shape ys = call.node.output_shapes[0];
  int axis = resolved_axis(std::get<ConcatParams>(call.node.params).axis, ys);
  const int logical_axis = axis;
  memory_order(call.node, ys, axis);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= ys[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < ys.size(); ++d) inner *= ys[d];
  if (outer == 0 || inner == 0) return;

  Context& ctx = context_of(call);
  const int64_t es = int64_t(element_size(call.node.precision));
  const int64_t out_block_bytes = ys[size_t(axis)] * inner * es;
  char* y = reinterpret_cast<char*>(call.outputs[0]);
  int64_t offset_bytes = 0;  // of input k's slab within an output block
  for (size_t k = 0; k < call.inputs.size(); ++k) {
    const int64_t block_bytes = call.node.input_shapes[k][size_t(logical_axis)] * inner * es;
    const void* src = call.inputs[k];
    void* dst = y + offset_bytes;
    offset_bytes += block_bytes;
    if (block_bytes == 0) continue;
    if (outer == 1 || block_bytes == out_block_bytes) {  // one contiguous range
      if (src != dst)
        INFER_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(outer * block_bytes), cudaMemcpyDeviceToDevice,
                                         ctx.stream));
      continue;
    }
    // The widest unit that divides both pointers, the slab width and the output row pitch.
    const uint64_t bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                          uint64_t(block_bytes) | uint64_t(out_block_bytes);
    if (bits % 16 == 0)
      launch_copy_slab<int4>(ctx, src, dst, outer, block_bytes, out_block_bytes);
    else if (bits % 8 == 0)
      launch_copy_slab<int2>(ctx, src, dst, outer, block_bytes, out_block_bytes);
    else if (bits % 4 == 0)
      launch_copy_slab<int>(ctx, src, dst, outer, block_bytes, out_block_bytes);
    else
      launch_copy_slab<short>(ctx, src, dst, outer, block_bytes, out_block_bytes);
  }
}

}  // namespace

INFER_REGISTER_KERNELS(tensor_ops) {
  registry.add("cuda", {
      {.op = "flatten", .name = "direct", .priority = 10, .run = copy_relabelled},
      {.op = "reshape", .name = "direct", .priority = 10, .run = copy_relabelled},
      {.op = "softmax", .name = "direct", .priority = 10, .run = softmax_run<false, SoftmaxParams>},
      {.op = "log_softmax", .name = "direct", .priority = 10, .run = softmax_run<true, LogSoftmaxParams>},
      {.op = "concat", .name = "direct", .priority = 10, .layouts = {Layout::NCHW, Layout::NHWC},
       .applicable = concat_applicable, .run = concat_run},
  });
}

}  // namespace infer::cuda
