// im2col (Chellapilla et al. 2006) and the im2col + cuBLAS GEMM convolution driver (im2col.cuh).
// im2col threads: x walks the output pixels j (coalesced stores), y walks the planes (image, c); each
// thread writes its pixel's KH*KW rows of the plane, so the divisions that locate the pixel and the
// plane are paid once per KH*KW elements (int64 division per element dominated the old kernel at
// VGG's first layers). Planes shorter than a 256-thread block are packed several per block.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/im2col.cuh"

#include <algorithm>
#include <climits>

namespace infer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;

// BOX: each element is the sum of g.box x g.box cells (conv_pool2d direct_sum), else one cell.
template <class T, bool BOX>
__global__ void im2col_kernel(const T* __restrict__ x, int64_t x_image_stride, T* __restrict__ col,
                              ConvGeometry g, int64_t planes) {
  const int P = static_cast<int>(g.HO * g.WO);  // <= INT_MAX (checked by the host)
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // column: output pixel
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
        const int64_t ix = ix0 + kx;
        if constexpr (!BOX) {
          *cp = (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W) ? xp[iy * g.W + ix] : from_float<T>(0.f);
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
          *cp = from_float<T>(s);
        }
      }
    }
  }
}

}  // namespace

bool im2col_is_identity(const ConvGeometry& g) {
  return g.KH == 1 && g.KW == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
         g.pad_left == 0 && g.HO == g.H && g.WO == g.W && g.box <= 1;
}

int64_t images_per_chunk(int64_t images, size_t per_image_bytes, size_t budget) {
  if (images <= 0) return 0;
  if (per_image_bytes == 0) return images;
  const int64_t fit = static_cast<int64_t>(budget / per_image_bytes);
  return std::max<int64_t>(1, std::min(images, fit));
}

int64_t conv_gemm_chunk(const ConvGeometry& g, int64_t images, Precision p) {
  if (im2col_is_identity(g)) return images;
  return images_per_chunk(images, static_cast<size_t>(g.col_elements()) * element_size(p));
}

size_t conv_gemm_workspace_bytes(const ConvGeometry& g, int64_t images, Precision p) {
  if (im2col_is_identity(g)) return 0;
  return static_cast<size_t>(conv_gemm_chunk(g, images, p)) * static_cast<size_t>(g.col_elements()) *
         element_size(p);
}

void im2col(Context& ctx, Precision p, const ConvGeometry& g, const void* x, int64_t x_image_stride,
            void* col, int64_t images) {
  const int64_t P = g.col_cols(), planes = images * g.C;
  if (P <= 0 || planes <= 0 || g.KH * g.KW <= 0) return;
  if (P > INT_MAX) throw Error("cuda im2col: more than INT_MAX output pixels per image");
  // Pixels across x (coalesced), planes across y; pack planes when a plane is shorter than a block.
  const int tx = static_cast<int>(std::min<int64_t>(kThreads, (P + 31) / 32 * 32));
  const int ty = kThreads / tx;
  const dim3 block(tx, ty);
  const dim3 grid(static_cast<unsigned>((P + tx - 1) / tx),
                  static_cast<unsigned>(std::min<int64_t>((planes + ty - 1) / ty, kMaxGridY)));
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    if (g.box > 1)
      im2col_kernel<T, true><<<grid, block, 0, ctx.stream>>>(static_cast<const T*>(x), x_image_stride,
                                                             static_cast<T*>(col), g, planes);
    else
      im2col_kernel<T, false><<<grid, block, 0, ctx.stream>>>(static_cast<const T*>(x), x_image_stride,
                                                              static_cast<T*>(col), g, planes);
  });
  INFER_CUDA_CHECK_LAUNCH();
}

void conv_gemm(Context& ctx, Precision p, const ConvGeometry& g, const void* a, int64_t M,
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
