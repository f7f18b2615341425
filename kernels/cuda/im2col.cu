// im2col (Chellapilla et al. 2006) and the im2col + cuBLAS GEMM convolution driver (im2col.cuh).
// im2col threads, two paths: per pixel (x walks the output pixels j, coalesced stores; y walks the
// planes (image, c); each thread writes the KH*KW rows of V <= 8 bytes of consecutive pixels of one
// output row (one pixel for box sums), so the divisions that locate the pixel and the plane are paid
// once per KH*KW*V elements: int64 division per element dominated at VGG's first layers), and per
// element (one thread per column element, 32-bit index math) for small grids such as LeNet's, where
// per-pixel threads would be too few and each too long.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/im2col.cuh"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <type_traits>

namespace infer::cuda {
namespace {

constexpr int kThreads = 256;

// One column element: the input cell (iy, ix) of the plane at xp, 0 in the padding; with BOX the sum
// of the g.box x g.box cells from there at the box strides (conv_pool2d direct_sum).
template <class T, bool BOX>
__device__ __forceinline__ T gather(const T* __restrict__ xp, const ConvProblem& g, int64_t iy, int64_t ix) {
  if constexpr (!BOX) {
    return (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W) ? xp[iy * g.W + ix] : from_float<T>(0.f);
  } else {
    float s = 0.f;
    for (int64_t dy = 0; dy < g.box; ++dy) {
      const int64_t r = iy + dy * g.box_stride_h;
      if (r < 0 || r >= g.H) continue;
      for (int64_t dx = 0; dx < g.box; ++dx) {
        const int64_t q = ix + dx * g.box_stride_w;
        if (q >= 0 && q < g.W) s += to_float(xp[r * g.W + q]);
      }
    }
    return from_float<T>(s);
  }
}

// Per pixel: a thread takes V consecutive output pixels of one row (the host picks V with WO % V == 0
// and the columns aligned) and writes each of their KH*KW rows as one V-element store: 2-byte stores
// held VGG's 224x224 gather (58 MB of fp16 columns) to ~0.75 TB/s.
template <class T, bool BOX, int V>
__global__ void im2col_kernel(const T* __restrict__ x, int64_t x_image_stride, T* __restrict__ col,
                              ConvProblem g, int64_t planes) {
  const int P = static_cast<int>(g.HO * g.WO);  // <= INT_MAX (checked by the host)
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x) * V;  // first of V pixels
  if (j >= P) return;
  const int WO = static_cast<int>(g.WO);
  const int oy = j / WO, ox = j - oy * WO;
  const int64_t iy0 = oy * g.stride_h - g.pad_top, ix0 = ox * g.stride_w - g.pad_left;
  const int64_t taps = g.KH * g.KW, HW = g.H * g.W;
  for (int64_t plane = blockIdx.y * int64_t(blockDim.y) + threadIdx.y; plane < planes;
       plane += int64_t(gridDim.y) * blockDim.y) {
    const int64_t img = plane / g.C, c = plane - img * g.C;
    const T* xp = x + img * x_image_stride + c * HW;
    // Image img's matrix starts at img*C*taps rows, its channel c at c*taps more: plane*taps.
    T* cp = col + plane * taps * P + j;
    for (int64_t ky = 0; ky < g.KH; ++ky) {
      const int64_t iy = iy0 + ky;
      for (int64_t kx = 0; kx < g.KW; ++kx, cp += P) {
        Pack<T, V> out;
#pragma unroll
        for (int v = 0; v < V; ++v) out.v[v] = gather<T, BOX>(xp, g, iy, ix0 + v * g.stride_w + kx);
        *reinterpret_cast<Pack<T, V>*>(cp) = out;
      }
    }
  }
}

// One thread per column element: idx = ((plane * KH + ky) * KW + kx) * P + j is also its offset in
// col. The caller guarantees planes * KH * KW * P <= INT_MAX.
template <class T, bool BOX>
__global__ void im2col_element_kernel(const T* __restrict__ x, int64_t x_image_stride,
                                      T* __restrict__ col, ConvProblem g, int total) {
  const int idx = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (idx >= total) return;
  const int WO = static_cast<int>(g.WO), P = static_cast<int>(g.HO) * WO;
  const int KW = static_cast<int>(g.KW), taps = static_cast<int>(g.KH) * KW;
  const int C = static_cast<int>(g.C), H = static_cast<int>(g.H), W = static_cast<int>(g.W);
  const int j = idx % P, row = idx / P;
  const int tap = row % taps, plane = row / taps;
  const int ky = tap / KW, kx = tap - ky * KW;
  const int img = plane / C, c = plane - img * C;
  const int oy = j / WO, ox = j - oy * WO;
  const int iy = oy * static_cast<int>(g.stride_h) - static_cast<int>(g.pad_top) + ky;
  const int ix = ox * static_cast<int>(g.stride_w) - static_cast<int>(g.pad_left) + kx;
  const T* xp = x + img * x_image_stride + static_cast<int64_t>(c) * H * W;
  if constexpr (!BOX) {
    col[idx] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? xp[iy * W + ix] : from_float<T>(0.f);
  } else {
    const int box = static_cast<int>(g.box);
    const int bsh = static_cast<int>(g.box_stride_h), bsw = static_cast<int>(g.box_stride_w);
    float s = 0.f;
    for (int dy = 0; dy < box; ++dy) {
      const int r = iy + dy * bsh;
      if (r < 0 || r >= H) continue;
      for (int dx = 0; dx < box; ++dx) {
        const int q = ix + dx * bsw;
        if (q >= 0 && q < W) s += to_float(xp[r * W + q]);
      }
    }
    col[idx] = from_float<T>(s);
  }
}

// Below this many per-pixel threads (a quarter of one wave of 256-thread blocks on 132 SMs at 8
// blocks each, about), the grid is too small to hide the latency of a thread's KH*KW (x box^2)
// sequential loads: LeNet-5's conv+pool gathers have 150-200 such threads. Then one thread per
// element instead, if the 32-bit element index fits (sizes that small always do).
constexpr int64_t kPerElementBelowThreads = 32768;

}  // namespace

int64_t images_per_chunk(int64_t images, size_t per_image_bytes, size_t budget) {
  if (images <= 0) return 0;
  if (per_image_bytes == 0) return images;
  const int64_t fit = static_cast<int64_t>(budget / per_image_bytes);
  return std::max<int64_t>(1, std::min(images, fit));
}

int64_t conv_gemm_chunk(const ConvProblem& g, int64_t images, Precision p) {
  if (im2col_is_identity(g)) return images;
  return images_per_chunk(images, static_cast<size_t>(g.col_elements()) * element_size(p));
}

size_t conv_gemm_workspace_bytes(const ConvProblem& g, int64_t images, Precision p) {
  if (im2col_is_identity(g)) return 0;
  return static_cast<size_t>(conv_gemm_chunk(g, images, p)) * static_cast<size_t>(g.col_elements()) *
         element_size(p);
}

void im2col(Context& ctx, Precision p, const ConvProblem& g, const void* x, int64_t x_image_stride,
            void* col, int64_t images) {
  const int64_t P = g.col_cols(), planes = images * g.C;
  if (P <= 0 || planes <= 0 || g.KH * g.KW <= 0) return;
  if (P > INT_MAX) throw Error("cuda im2col: more than INT_MAX output pixels per image");
  const int64_t elements = planes * g.KH * g.KW * P;
  // The element kernel's 32-bit index math: every coordinate it forms stays below 2^30 in magnitude.
  const auto small = [](int64_t v) { return v >= -(int64_t(1) << 30) && v < (int64_t(1) << 30); };
  const bool small_grid =
      P * planes < kPerElementBelowThreads && elements <= INT_MAX && small(g.H * g.W) &&
      small(g.stride_h * g.HO + std::abs(g.pad_top) + g.KH + g.box * g.box_stride_h) &&
      small(g.stride_w * g.WO + std::abs(g.pad_left) + g.KW + g.box * g.box_stride_w);
  if (small_grid) {
    const int total = static_cast<int>(elements);
    const unsigned blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
    dispatch(p, [&](auto tag) {
      using T = decltype(tag);
      if (g.box > 1)
        im2col_element_kernel<T, true><<<blocks, kThreads, 0, ctx.stream>>>(
            static_cast<const T*>(x), x_image_stride, static_cast<T*>(col), g, total);
      else
        im2col_element_kernel<T, false><<<blocks, kThreads, 0, ctx.stream>>>(
            static_cast<const T*>(x), x_image_stride, static_cast<T*>(col), g, total);
    });
    INFER_CUDA_CHECK_LAUNCH();
    return;
  }
  // Pixels across x (coalesced), planes across y; pack planes when a plane is shorter than a block.
  // Box sums stay one pixel per thread: each element is box^2 loads, so packs would only cut the
  // threads that hide their latency (direct_sum at C=128, 16x16 outputs, fp16: 0.015 -> 0.031 ms).
  const int V = g.box > 1 ? 1 : pack_width(element_size(p), g.WO, {col});
  const PlaneLaunch l = plane_launch(P / V, planes);
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    const auto launch = [&](auto box, auto v) {
      im2col_kernel<T, decltype(box)::value, decltype(v)::value><<<l.grid, l.block, 0, ctx.stream>>>(
          static_cast<const T*>(x), x_image_stride, static_cast<T*>(col), g, planes);
    };
    using One = std::integral_constant<int, 1>;
    if (g.box > 1) launch(std::true_type{}, One{});
    else if (V == 4) launch(std::false_type{}, std::integral_constant<int, 4>{});
    else if (V == 2) launch(std::false_type{}, std::integral_constant<int, 2>{});
    else launch(std::false_type{}, One{});
  });
  INFER_CUDA_CHECK_LAUNCH();
}

void conv_gemm(Context& ctx, Precision p, const ConvProblem& g, const void* a, int64_t M,
               const void* x, int64_t x_image_stride, void* y, int64_t y_image_stride, int64_t images,
               void* col, int64_t chunk, float alpha) {
  const int64_t K = g.col_rows(), P = g.col_cols();
  const size_t es = element_size(p);
  if (images <= 0 || M <= 0 || P <= 0) return;
  if (K == 0) {  // an empty sum: the GEMM would not reliably write C
    for (int64_t i = 0; i < images; ++i)
      INFER_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(y) + i * y_image_stride * es, 0,
                                       static_cast<size_t>(M * P) * es, ctx.stream));
    return;
  }
  const bool identity = im2col_is_identity(g);
  if (!identity && !col) throw Error("cuda conv_gemm: missing column workspace");
  if (chunk <= 0) chunk = images;
  for (int64_t i0 = 0; i0 < images; i0 += chunk) {
    const int64_t n = std::min(chunk, images - i0);
    const void* xi = static_cast<const char*>(x) + i0 * x_image_stride * es;
    GemmArgs ga;
    ga.m = M;
    ga.n = P;
    ga.k = K;
    ga.a = a;
    ga.lda = K;
    ga.stride_a = 0;  // one weight matrix for every image
    if (identity) {
      ga.b = xi;
      ga.stride_b = x_image_stride;
    } else {
      im2col(ctx, p, g, xi, x_image_stride, col, n);
      ga.b = col;
      ga.stride_b = K * P;
    }
    ga.ldb = P;
    ga.c = static_cast<char*>(y) + i0 * y_image_stride * es;
    ga.ldc = P;
    ga.stride_c = y_image_stride;
    ga.batch = n;
    ga.alpha = alpha;
    ga.beta = 0.f;
    gemm(ctx, p, ga);
  }
}

}  // namespace infer::cuda
