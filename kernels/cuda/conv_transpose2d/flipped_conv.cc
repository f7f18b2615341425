// CUDA conv_transpose2d `flipped_conv`, stride 1 only: the convolution of x with the flipped,
// in/out-swapped kernel (prepared once, common.h) through the shared im2col + cuBLAS GEMM driver
// (im2col.cuh: columns per chunk of images in the workspace, GEMM threads as cuBLAS maps them), then
// bias + activation over NCHW (epilogue.h). Host code only: no kernel of its own.
#include "infer/error.h"
#include "kernels/cuda/conv_transpose2d/common.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/im2col.cuh"

namespace infer::cuda::tconv {

// ================================================================================================
// flipped_conv (stride 1)
// ================================================================================================
// A stride-1 transposed convolution is the convolution of x with the flipped, in/out-swapped kernel
// and padding KH-1-pad_top / KW-1-pad_left (negative when pad >= k: an offset into x; the bottom and
// right padding follow from HO, WO). im2col + cuBLAS GEMM per chunk of images (im2col.cuh), then
// bias + activation.

namespace {

ConvProblem flipped_geometry(const TconvDims& d) {
  return conv_transpose2d_flipped_problem(d, d.KH, d.KW, d.KH - 1 - d.pt, d.KW - 1 - d.pl, d.HO, d.WO);
}

}  // namespace

size_t flipped_workspace_bytes(const NodeDesc& node) {
  const TconvDims d = tconv_dims(node);
  return conv_gemm_workspace_bytes(flipped_geometry(d), d.N, node.precision);
}

void run_flipped_conv(const KernelCall& call) {
  const TconvCall c = tconv_call(call);
  const TconvDims& d = c.d;
  if (d.sh != 1 || d.sw != 1) throw Error("cuda conv_transpose2d.flipped_conv: stride must be 1x1");
  require_plain(d, "flipped_conv");
  const FlippedWeights& f = flipped_of(call, d, "flipped_conv");
  const ConvProblem g = flipped_geometry(d);
  const Precision p = call.node.precision;
  if (!call.workspace && conv_gemm_workspace_bytes(g, d.N, p) > 0)
    throw Error("cuda conv_transpose2d.flipped_conv: missing workspace");
  Context& ctx = context_of(call);
  conv_gemm(ctx, p, g, f.w->data(), d.CO, c.x, d.CI * d.H * d.W, c.y, d.CO * d.HO * d.WO, d.N,
            call.workspace, conv_gemm_chunk(g, d.N, p));
  bias_activation(ctx, p, c.y, c.bias, d.N, d.CO, d.HO * d.WO, d.act, nullptr, c.slope);
}

}  // namespace infer::cuda::tconv
