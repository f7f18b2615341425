// CUDA `layout` nodes (the channels_last pass): NCHW <-> NHWC copies of a 4-D activation, float or
// half. Both directions are a batch of matrix transposes ([C][H*W] <-> [H*W][C] per image), done with
// the classic 32x32 shared-memory tile (one padded column against bank conflicts): a block of 32x8
// threads reads a tile with coalesced rows and writes it transposed with coalesced rows; images
// across grid.z (looping past 65535); fp16 with even sizes moves 64x64 tiles as half2 (below). Few
// channels (C <= 8: image inputs, generator outputs) would leave most of each tile empty: one thread
// per pixel then moves its C values (adjacent threads, adjacent pixels, so every plane access and the
// pixel-major side are coalesced).
#include <string>

#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"

namespace infer::cuda {
namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

// in: `batch` matrices rows x cols (row-major); out: the same matrices transposed (cols x rows).
template <class T>
__global__ void transpose_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t batch, int rows,
                                 int cols) {
  __shared__ T tile[kTile][kTile + 1];
  const int c0 = blockIdx.x * kTile, r0 = blockIdx.y * kTile;
  const int64_t plane = int64_t(rows) * cols;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const T* src = in + b * plane;
    T* dst = out + b * plane;
    for (int k = threadIdx.y; k < kTile; k += kRowsPerPass) {
      const int r = r0 + k, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[k][threadIdx.x] = src[int64_t(r) * cols + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kRowsPerPass) {
      const int c = c0 + k, r = r0 + threadIdx.x;  // out row c, column r
      if (c < cols && r < rows) dst[int64_t(c) * rows + r] = tile[threadIdx.x][k];
    }
    __syncthreads();
  }
}

// fp16 with an even number of rows and columns: 64x64 tiles moved as half2 on both sides, so a warp
// reads and writes 128 contiguous bytes per row instead of 64 (H100, DCGAN's 64x128x32x32 NHWC -> NCHW at
// batch 64: 26.4 us with the 32x32 tile of halves, 1.27 TB/s). The tile row is 66 halves (33 words, so
// the half2 row writes are conflict-free; the transposed reads, rows 2t and 2t + 1 of one column per
// thread t, meet at most two to a bank).
constexpr int kTile2 = 64, kTile2Row = kTile2 + 2;

__global__ void transpose_half2_kernel(const __half* __restrict__ in, __half* __restrict__ out, int64_t batch,
                                       int rows, int cols) {
  __shared__ __half tile[kTile2][kTile2Row];
  const int c0 = blockIdx.x * kTile2, r0 = blockIdx.y * kTile2, tx = threadIdx.x;
  const int64_t plane = int64_t(rows) * cols;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const __half* src = in + b * plane;
    __half* dst = out + b * plane;
    for (int k = threadIdx.y; k < kTile2; k += kRowsPerPass) {
      const int r = r0 + k, c = c0 + 2 * tx;  // cols is even: c < cols means c + 1 < cols too
      if (r < rows && c < cols)
        *reinterpret_cast<__half2*>(&tile[k][2 * tx]) = *reinterpret_cast<const __half2*>(src + int64_t(r) * cols + c);
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile2; k += kRowsPerPass) {
      const int c = c0 + k, r = r0 + 2 * tx;  // out row c, columns r and r + 1 (rows is even)
      if (c < cols && r < rows)
        *reinterpret_cast<__half2*>(dst + int64_t(c) * rows + r) = __halves2half2(tile[2 * tx][k], tile[2 * tx + 1][k]);
    }
    __syncthreads();
  }
}

constexpr int64_t kSmallC = 8;

// One thread per pixel (n, i) of N*HW: the C values of the pixel, from/to planes [n][c][i] and the
// pixel-major [n][i][c].
template <class T, bool kToNhwc>
__global__ void small_c_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t pixels, int64_t HW,
                               int C) {
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pixels;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = p / HW, i = p - n * HW;
    for (int c = 0; c < C; ++c) {
      const int64_t planar = (n * C + c) * HW + i, packed = p * C + c;
      if (kToNhwc)
        out[packed] = in[planar];
      else
        out[planar] = in[packed];
    }
  }
}

bool layout_applicable(const NodeDesc& node) {
  const auto* p = std::get_if<LayoutParams>(&node.params);
  if (!p || node.input_shapes.size() != 1 || node.output_shapes.size() != 1) return false;
  const Shape& s = node.input_shapes[0];
  if (s.size() != 4 || node.output_shapes[0] != s) return false;
  for (int64_t d : s)
    if (d < 0) return false;
  // The tile grid's dimensions are ints.
  return s[1] < (int64_t(1) << 31) - kTile && s[2] * s[3] < (int64_t(1) << 31) - kTile;
}

void layout_run(const KernelCall& call) {
  const auto& p = std::get<LayoutParams>(call.node.params);
  if (!layout_applicable(call.node))
    throw Error("cuda layout: needs a 4-D input and an output of the same shape, got " +
                shape_str(call.node.input_shapes[0]) + " -> " + shape_str(call.node.output_shapes[0]));
  const Shape& s = call.node.input_shapes[0];
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  Context& ctx = context_of(call);
  const size_t bytes = static_cast<size_t>(shape_numel(s)) * element_size(call.node.precision);
  if (bytes == 0) return;
  if (p.from == p.to || C == 1 || HW == 1) {  // the same memory order
    INFER_CUDA_CHECK(cudaMemcpyAsync(call.outputs[0], call.inputs[0], bytes, cudaMemcpyDeviceToDevice,
                                     ctx.stream));
    return;
  }
  if (C <= kSmallC) {
    dispatch(call.node.precision, [&](auto tag) {
      using T = decltype(tag);
      const T* in = reinterpret_cast<const T*>(call.inputs[0]);
      T* out = reinterpret_cast<T*>(call.outputs[0]);
      const int64_t pixels = N * HW;
      if (p.to == Layout::NHWC)
        small_c_kernel<T, true><<<grid_for(pixels), 256, 0, ctx.stream>>>(in, out, pixels, HW, int(C));
      else
        small_c_kernel<T, false><<<grid_for(pixels), 256, 0, ctx.stream>>>(in, out, pixels, HW, int(C));
    });
    INFER_CUDA_CHECK_LAUNCH();
    return;
  }
  // NCHW -> NHWC transposes [C][HW] per image; NHWC -> NCHW transposes [HW][C].
  const int rows = static_cast<int>(p.from == Layout::NCHW ? C : HW);
  const int cols = static_cast<int>(p.from == Layout::NCHW ? HW : C);
  const auto* in_ptr = reinterpret_cast<const char*>(call.inputs[0]);
  if (call.node.precision == Precision::FP16 && rows % 2 == 0 && cols % 2 == 0 &&
      reinterpret_cast<uintptr_t>(in_ptr) % 4 == 0 && reinterpret_cast<uintptr_t>(call.outputs[0]) % 4 == 0) {
    const dim3 grid((cols + kTile2 - 1) / kTile2, (rows + kTile2 - 1) / kTile2,
                    static_cast<unsigned>(std::min<int64_t>(N, 65535)));
    if (grid.y > 65535) throw Error("cuda layout: " + shape_str(s) + " has too many tiles for one grid");
    transpose_half2_kernel<<<grid, dim3(32, kRowsPerPass), 0, ctx.stream>>>(
        reinterpret_cast<const __half*>(call.inputs[0]), reinterpret_cast<__half*>(call.outputs[0]), N, rows, cols);
    INFER_CUDA_CHECK_LAUNCH();
    return;
  }
  const dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile,
                  static_cast<unsigned>(std::min<int64_t>(N, 65535)));
  if (grid.y > 65535) throw Error("cuda layout: " + shape_str(s) + " has too many tiles for one grid");
  dispatch(call.node.precision, [&](auto tag) {
    using T = decltype(tag);
    transpose_kernel<T><<<grid, dim3(kTile, kRowsPerPass), 0, ctx.stream>>>(
        reinterpret_cast<const T*>(call.inputs[0]), reinterpret_cast<T*>(call.outputs[0]), N, rows, cols);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

INFER_REGISTER_KERNELS(layout) {
  registry.add("cuda", {
      {.op = "layout", .name = "transpose_tiled", .priority = 10,
       .layouts = {Layout::NCHW, Layout::NHWC}, .applicable = layout_applicable, .run = layout_run},
  });
}

}  // namespace infer::cuda
