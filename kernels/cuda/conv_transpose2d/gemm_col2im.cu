// CUDA conv_transpose2d `gemm_col2im` (Caffe / PyTorch deconvolution), any stride, groups and dilation,
// NCHW: per chunk of images, cols [C_out*KH*KW][H*W] = W^T x by cuBLAS into the workspace (one
// strided-batched GEMM per group, or per image batched over the groups), then a gathering col2im (one
// thread per output pixel of a plane, blockIdx.y over planes) that sums the taps landing on it and adds
// bias + activation (or the plane's per-channel PRelu slope). No atomics, deterministic. Also its
// per-node priority (the default heuristic).
#include <algorithm>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_transpose2d/common.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/im2col.cuh"

namespace infer::cuda::tconv {

// ================================================================================================
// gemm_col2im (Caffe / PyTorch deconvolution), any stride
// ================================================================================================
// cols_n [C_out*KH*KW][H*W] = W^T x_n: the weight [C_in][C_out*KH*KW] as stored is the transposed A
// operand, so no prepare. Then col2im as a gather: one thread per output element sums the taps
// (ky, kx) that land on it (ky = (oy + pad_top) % s + s*j, input row (oy + pad_top - ky) / s), adds
// the bias and applies the activation. No atomics, deterministic; every output written.
// Threads: blockIdx.y walks the output planes (image x channel, so channel and bias are per block),
// x the pixels of a plane. Index math within a plane is 32-bit (applicable() keeps a plane's columns
// under 2^31 elements) and the stride is a compile-time 2 for the GAN layers: the first version, one
// flat 64-bit index with int64 div/mod per tap, ran at ~34 G outputs/s on the H100 (EB-GAN batch 64:
// 2.0 ms for 64x64x128x128), bound by integer division rather than by its ~10 bytes per output.
// Groups: the columns keep the row order (co*KH + ky)*KW + kx with co = g*COG + c; group g's COG*KH*KW
// rows are w_g^T x_g, w_g the rows [g*CIG, (g+1)*CIG) of the weight [C_in][COG*KH*KW] and x_g the
// group's CIG input planes, so col2im is the same. Dilation: tap ky lands d_h*ky rows down, so the
// gather tests every tap ((oy + pad_top - ky*d_h) must be a non-negative multiple of s_h): the
// S == -1 instantiation; dilation 1 keeps the S == 2 / S == 0 ones, which step ky by s.

namespace {

int64_t col2im_chunk(const TconvDims& d, Precision p) {
  const size_t per_image = static_cast<size_t>(d.CO * d.KH * d.KW * d.H * d.W) * element_size(p);
  return images_per_chunk(d.N, per_image);
}

}  // namespace

size_t col2im_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  return static_cast<size_t>(col2im_chunk(d, node.precision)) *
         static_cast<size_t>(d.CO * d.KH * d.KW * d.H * d.W) * element_size(node.precision);
}

namespace {

// S > 0: both strides are S, dilation 1 (compile time: shifts instead of divisions); S == 0: sh, sw
// at run time, dilation 1; S == -1: sh, sw and dilation dh, dw at run time.
template <class T, int S>
__global__ void col2im_kernel(const T* __restrict__ cols, const T* __restrict__ bias,
                              const T* __restrict__ slope, T* __restrict__ y,
                              int64_t planes, int CO, int H, int W, int KH, int KW, int HO, int WO,
                              int sh_rt, int sw_rt, int pt, int pl, int dh, int dw, DeviceActivation act) {
  const int sh = S > 0 ? S : sh_rt, sw = S > 0 ? S : sw_rt;
  const int hw = H * W, hwo = HO * WO;
  for (int64_t c = blockIdx.y; c < planes; c += gridDim.y) {  // c = img * CO + co
    const T* cp = cols + c * KH * KW * hw;
    T* yp = y + c * hwo;
    const float b = bias ? to_float(bias[c % CO]) : 0.f;
    const float a = slope ? to_float(slope[c % CO]) : 0.f;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < hwo; p += gridDim.x * blockDim.x) {
      const int oy = p / WO, ox = p - oy * WO;
      const int ty = oy + pt, tx = ox + pl;
      float acc = b;
      if (S >= 0) {  // dilation 1: the taps of this output's phase, s apart
        for (int ky = ty % sh; ky < KH && ky <= ty; ky += sh) {
          const int iy = (ty - ky) / sh;
          if (iy >= H) continue;
          const T* row = cp + ky * KW * hw + iy * W;
          for (int kx = tx % sw; kx < KW && kx <= tx; kx += sw) {
            const int ix = (tx - kx) / sw;
            if (ix < W) acc += to_float(row[kx * hw + ix]);
          }
        }
      } else {  // dilated: output oy = iy*sh - pt + ky*dh, so ty - ky*dh must be a multiple of sh
        for (int ky = 0; ky < KH && ky * dh <= ty; ++ky) {
          const int t = ty - ky * dh;
          if (t % sh != 0 || t / sh >= H) continue;
          const T* row = cp + ky * KW * hw + (t / sh) * W;
          for (int kx = 0; kx < KW && kx * dw <= tx; ++kx) {
            const int u = tx - kx * dw;
            if (u % sw == 0 && u / sw < W) acc += to_float(row[kx * hw + u / sw]);
          }
        }
      }
      yp[p] = from_float<T>(activate_prelu(act, acc, slope != nullptr, a));
    }
  }
}

}  // namespace

void run_gemm_col2im(const KernelCall& call) {
  const TconvCall c = tconv_call(call);
  const TconvDims& d = c.d;
  const Precision p = call.node.precision;
  const size_t es = element_size(p);
  const int64_t M = d.CO * d.KH * d.KW, HW = d.H * d.W, out_image = d.CO * d.HO * d.WO;
  if (d.N == 0 || out_image == 0) return;
  if (!call.workspace && M * HW > 0) throw Error("cuda conv_transpose2d.gemm_col2im: missing workspace");
  Context& ctx = context_of(call);
  const int64_t chunk = col2im_chunk(d, p);
  for (int64_t n0 = 0; n0 < d.N; n0 += chunk) {
    const int64_t images = std::min(chunk, d.N - n0);
    if (d.CI > 0) {
      // Group gi's columns (rows [gi*Mg, (gi+1)*Mg) of each image's [M][HW]) = w_gi^T x_gi. One GEMM
      // per group batched over the images, or (more groups than images: depthwise) one per image
      // batched over the groups. G = 1 is the single GEMM over the chunk.
      const int64_t Mg = d.COG * d.KH * d.KW, wg = d.CIG * Mg;  // a group's column rows, weights
      GemmArgs g;
      g.m = Mg;
      g.n = HW;
      g.k = d.CIG;
      g.lda = Mg;
      g.trans_a = true;
      g.ldb = HW;
      g.ldc = HW;
      const char* x0 = static_cast<const char*>(c.x) + n0 * d.CI * HW * es;
      char* c0 = static_cast<char*>(call.workspace);
      if (d.G == 1 || images >= d.G) {
        for (int64_t gi = 0; gi < d.G; ++gi) {
          g.a = static_cast<const char*>(c.w) + gi * wg * es;
          g.stride_a = 0;
          g.b = x0 + gi * d.CIG * HW * es;
          g.stride_b = d.CI * HW;
          g.c = c0 + gi * Mg * HW * es;
          g.stride_c = M * HW;
          g.batch = images;
          gemm(ctx, p, g);
        }
      } else {
        for (int64_t i = 0; i < images; ++i) {
          g.a = c.w;
          g.stride_a = wg;
          g.b = x0 + i * d.CI * HW * es;
          g.stride_b = d.CIG * HW;
          g.c = c0 + i * M * HW * es;
          g.stride_c = Mg * HW;
          g.batch = d.G;
          gemm(ctx, p, g);
        }
      }
    } else {
      INFER_CUDA_CHECK(cudaMemsetAsync(call.workspace, 0, static_cast<size_t>(images * M * HW) * es, ctx.stream));
    }
    // a block per (pixel range, plane); small planes get smaller blocks (DCGAN's 8x8 outputs: 64)
    const int64_t planes = images * d.CO, hwo = d.HO * d.WO;
    const int threads = static_cast<int>(std::min<int64_t>(256, (hwo + 31) / 32 * 32));
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((hwo + threads - 1) / threads, 65535)),
                    static_cast<unsigned>(std::min<int64_t>(planes, 65535)));
    const bool dilated = d.dh != 1 || d.dw != 1;
    const bool s2 = d.sh == 2 && d.sw == 2 && !dilated;
    dispatch(p, [&](auto tag) {
      using T = decltype(tag);
      auto* kernel = dilated ? col2im_kernel<T, -1> : s2 ? col2im_kernel<T, 2> : col2im_kernel<T, 0>;
      kernel<<<grid, threads, 0, ctx.stream>>>(
          static_cast<const T*>(call.workspace), static_cast<const T*>(c.bias), static_cast<const T*>(c.slope),
          static_cast<T*>(c.y) + n0 * out_image, planes, static_cast<int>(d.CO), static_cast<int>(d.H),
          static_cast<int>(d.W), static_cast<int>(d.KH), static_cast<int>(d.KW), static_cast<int>(d.HO),
          static_cast<int>(d.WO), d.sh, d.sw, d.pt, d.pl, d.dh, d.dw, device_activation(d.act));
    });
    INFER_CUDA_CHECK_LAUNCH();
  }
}

// gemm_col2im's per-node priority (KernelVariant::priority_for; fixed ones: flipped_conv 30,
// segregated_gemm 20, segregated_unified 10, conventional 1). Reasoning, from the H100 batch-1
// measurements of DCGAN / EB-GAN (docs/kernels.md) and what the kernels are bound by:
//  - 1x1 input (the z -> 4x4 first layer, any stride): a GEMM M = C_out*KH*KW, N = 1, K = C_in per
//    image (strided-batched, so the weight is read once per image: 31% of DCGAN at batch 64 fp16;
//    one GEMM with N = batch would read it once) and a trivial col2im; flipped_conv would im2col a
//    mostly-padding 4x4 window per output pixel, and segregated_gemm's phases have one column each.
//    35: above everything.
//  - stride 2, H*W <= 4096 (4x4 .. 64x64 inputs): cuBLAS + col2im measured faster than both of
//    segregated_gemm's paths on the H100 (2026-11-23, EB-GAN batch 1 fp32: 4x4x2048 0.105 vs 0.127 ms
//    for the skinny weight-streaming path, 8x8x1024 0.043 vs 0.112 ms; fp16 and batch 32 likewise).
//    25: above segregated_gemm.
//  - stride 2, H*W > 4096 (128x128): segregated_gemm measured faster (fp32 0.130 vs 0.183 ms, fp16
//    0.062 vs 0.116): the col2im columns (16x the output for a 4x4 kernel) dominate. Stay below.
//  - any other case: 12, above segregated_unified and conventional, which it beats everywhere it
//    was measured (e.g. a stride-2 node with a non-constant weight, or stride 3).
//  - stride 1 (not 1x1): flipped_conv (30) stays the default.
int gemm_col2im_priority(const NodeDesc& node) {
  if (!valid(node)) return 12;
  const TconvDims d = tconv_dims(node);
  if (d.H * d.W == 1) return 35;
  if (d.sh == 2 && d.sw == 2 && segregated_gemm_applicable(node)) return d.H * d.W <= 4096 ? 25 : 5;
  return 12;
}

}  // namespace infer::cuda::tconv
