// CUDA conv2d, the GEMM variants (NCHW but gemm_1x1_nhwc; weight [C_out,C_in,KH,KW], optional bias, any
// stride, asymmetric padding, fused activation or per-channel PRelu, residual input; groups and
// dilation 1) in the session precision (float or half storage, float sums): gemm_1x1 (1x1/stride
// 1/unpadded: one strided-batched cuBLAS GEMM over the batch), gemm_1x1_nhwc (the same in NHWC: one GEMM
// over all pixels of the batch), im2col_gemm (im2col into a <= 1 GiB workspace + strided-batched GEMM per
// chunk of images). They end with bias_activation, or, split over K at batch 1 (few output tiles, K >=
// 4096), with the kernel that adds the slices' partial sums and the epilogue.
#include <algorithm>
#include <climits>
#include <string>
#include <variant>

#include "infer/error.h"
#include "kernels/cuda/common.cuh"
#include "infer/kernel.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/gemm.h"
#include "kernels/conv_shapes.h"
#include "kernels/cuda/conv2d/common.h"

namespace infer::cuda::conv {

// ---- im2col_gemm / gemm_1x1 -----------------------------------------------------------------------

// Split-K at batch 1: a GEMM with few output tiles and a long K (VGG-16's conv5 at 14x14: M = 512,
// N = 196, K = 4608, so ~8 of cuBLAS's 128x128 tiles on 132 SMs) leaves the GPU mostly idle. Its K
// is cut into `splits` equal slices, multiplied as one strided-batched GEMM into float partial sums
// in the workspace, and one kernel adds them in slice order with bias (+ residual) and the
// activation. H100, 2026-11-25, batch 1 (infer-bench model, split cap 1 / 4 / 8 / 16): VGG-16 conv5
// 27.6 -> 22.8 us per layer in fp16, the model fp16 0.457 -> 0.442 ms, fp32 1.257 -> 1.236 ms; VGG-11
// fp16 0.287 -> 0.279 ms; AlexNet's 13x13 layers (K = 2304 / 3456) lost in fp16 (0.158 -> 0.163 ms),
// hence K >= 4096. 1 (no split) above batch 1, when the tiles already fill an eighth of the GPU, or
// where no split leaves slices of >= 256.
int split_k(const ConvProblem& g, int64_t N, int64_t CO) {
  const int64_t K = g.col_rows(), P = g.col_cols();
  if (N != 1 || K < 4096) return 1;
  const int64_t tiles = ((CO + 127) / 128) * ((P + 127) / 128);
  if (tiles > 16) return 1;
  int s = 1;
  while (s < 16 && tiles * s * 2 <= 128 && K % (s * 2) == 0 && K / (s * 2) >= 256) s *= 2;
  return s;
}

size_t split_bytes(const ConvProblem& g, int64_t N, int64_t CO) {
  const int s = split_k(g, N, CO);
  return s > 1 ? static_cast<size_t>(s) * static_cast<size_t>(CO * g.col_cols()) * sizeof(float) : 0;
}

size_t im2col_gemm_workspace(const NodeDesc& node) {
  const ConvProblem g = conv2d_problem(node);
  const int64_t N = node.input_shapes[0][0], CO = node.input_shapes[1][0];
  const size_t split = split_bytes(g, N, CO);
  return split ? align256(conv_gemm_workspace_bytes(g, N, node.precision)) + split
               : conv_gemm_workspace_bytes(g, N, node.precision);
}

// y[i] = act(sum_s part[s][i] + bias[i / P] + r[i]) for i < total (= C_out * P of one image), then
// channel i / P's PRelu slope where there is one.
template <class T>
__global__ void split_k_sum_kernel(const float* __restrict__ part, int splits, int64_t total, int64_t P,
                                   const T* __restrict__ bias, const T* __restrict__ r,
                                   const T* __restrict__ slope, T* __restrict__ y, DeviceActivation act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    float v = 0.f;
    for (int s = 0; s < splits; ++s) v += part[s * total + i];
    if (bias) v += to_float(bias[i / P]);
    if (r) v += to_float(r[i]);
    y[i] = from_float<T>(activate_channel(act, v, slope, i / P));
  }
}

// The split-K GEMM of one image (N == 1): im2col unless the identity, then the sliced GEMM into the
// partial sums after the columns, then split_k_sum_kernel.
void run_split_k(Context& ctx, Precision p, const ConvCall& c, int splits, void* workspace, const Activation& act) {
  const ConvProblem& g = c.g;
  const int64_t K = g.col_rows(), P = g.col_cols(), Ks = K / splits;
  const size_t col_bytes = conv_gemm_workspace_bytes(g, 1, p);
  const void* cols = c.x;
  if (!im2col_is_identity(g)) {
    im2col(ctx, p, g, c.x, g.C * g.H * g.W, workspace, 1);
    cols = workspace;
  }
  float* part = reinterpret_cast<float*>(static_cast<char*>(workspace) + align256(col_bytes));
  GemmArgs ga;
  ga.m = c.CO, ga.n = P, ga.k = Ks;
  ga.a = c.w, ga.lda = K, ga.stride_a = Ks;      // slice s: columns [s*Ks, (s+1)*Ks) of A
  ga.b = cols, ga.ldb = P, ga.stride_b = Ks * P;  // and rows [s*Ks, (s+1)*Ks) of the columns
  ga.c = part, ga.ldc = P, ga.stride_c = c.CO * P, ga.c_float = true;
  ga.batch = splits;
  gemm(ctx, p, ga);
  const int64_t total = c.CO * P;
  dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    split_k_sum_kernel<T><<<grid_for(total), 256, 0, ctx.stream>>>(
        part, splits, total, P, static_cast<const T*>(c.bias), static_cast<const T*>(c.residual),
        static_cast<const T*>(c.slope), static_cast<T*>(c.y), device_activation(act));
  });
  INFER_CUDA_CHECK_LAUNCH();
}

void run_gemm(const KernelCall& call, const char* variant) {
  const ConvCall c = conv_call(call);
  Context& ctx = context_of(call);
  const Precision p = call.node.precision;
  const ConvProblem& g = c.g;
  if (!im2col_is_identity(g) && !call.workspace && g.col_elements() > 0 && c.N > 0)
    throw Error(std::string("cuda conv2d.") + variant + ": needs a workspace of " +
                std::to_string(conv_gemm_workspace_bytes(g, c.N, p)) + " bytes, got none");
  const int64_t P = g.HO * g.WO;
  const int splits = split_k(g, c.N, c.CO);
  if (splits > 1) {
    if (!call.workspace) throw Error(std::string("cuda conv2d.") + variant + ": split-K needs its workspace");
    run_split_k(ctx, p, c, splits, call.workspace, fused_activation(call.node.params));
    return;
  }
  conv_gemm(ctx, p, g, c.w, c.CO, c.x, g.C * g.H * g.W, c.y, c.CO * P, c.N, call.workspace,
            conv_gemm_chunk(g, c.N, p));
  bias_activation(ctx, p, c.y, c.bias, c.N, c.CO, P, fused_activation(call.node.params), c.residual, c.slope);
}

void run_im2col_gemm(const KernelCall& call) { run_gemm(call, "im2col_gemm"); }

void run_gemm_1x1(const KernelCall& call) {
  if (!gemm_1x1_applicable(call.node))
    throw Error("cuda conv2d.gemm_1x1: needs a 1x1 kernel, stride 1 and no padding");
  run_gemm(call, "gemm_1x1");
}

// ---- gemm_1x1_nhwc --------------------------------------------------------------------------------
// In NHWC a 1x1 stride-1 unpadded convolution is one GEMM over every pixel of the batch, like a dense
// layer: y [N*H*W, C_out] = x [N*H*W, C_in] * W^T (the weight [C_out, C_in] as stored), M = N*H*W
// rows on the tensor cores, then bias (+ residual) + activation in bias_activation_nhwc. H100 fp16,
// MobileNetV2 batch 64 (2026-11-24): its 34 1x1 convolutions took 4.19 ms through conv2d.cudnn in
// NHWC and 1.88 ms through gemm_1x1 in NCHW (per-node profile sums).

// Where cudnn would run the node NHWC (aligned channels, batch >= 4; so the channels_last pass decides
// as before; below the NCHW variants otherwise): ahead of cudnn (50) unless the activation is ReLU,
// which cudnn fuses with the bias and a residual into its convolution while this variant's epilogue
// is a second pass over the output. Same run: ResNet-50 batch 64 fp16 (1x1 convolutions with ReLU)
// 2.71 ms with cudnn, 3.13 ms with this variant; MobileNetV2 (ReLU6 and linear 1x1 convolutions)
// 6.53 ms with cudnn, 3.34 ms with this one.
int gemm_1x1_nhwc_priority(const NodeDesc& node) {
  const int64_t a = tensor_core_multiple(node.precision);
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1];
  if (x[0] < 4 || x[1] % a != 0 || w[0] % a != 0) return 3;
  return fused_activation(node.params).kind == ActivationKind::Relu ? 45 : 55;
}

void run_gemm_1x1_nhwc(const KernelCall& call) {
  if (!gemm_1x1_applicable(call.node) || call.node.layout != Layout::NHWC)
    throw Error("cuda conv2d.gemm_1x1_nhwc: needs an NHWC 1x1 kernel, stride 1 and no padding");
  const ConvCall c = conv_call(call);
  Context& ctx = context_of(call);
  const int64_t rows = c.N * c.g.H * c.g.W;
  if (rows == 0 || c.CO == 0) return;
  gemm_x_wt(ctx, call.node.precision, c.x, c.w, c.y, rows, c.g.C, c.CO);  // the weight [C_out, C_in]
  bias_activation_nhwc(ctx, call.node.precision, c.y, c.bias, rows, c.CO,
                       fused_activation(call.node.params), c.residual, c.slope);
}


}  // namespace infer::cuda::conv
