// CPU conv2d "im2col_gemm" (NCHW, weight [C_out,C_in,KH,KW], float32): per sample, im2col into the
// node's workspace (Chellapilla et al. 2006, "High performance convolutional neural networks for
// document processing"), then one cblas_sgemm  y[C_out, HO*WO] = w[C_out, C_in*KH*KW] x col, then the
// bias + activation epilogue. With add_residual (the fuse_conv_residual pass) the residual r is
// copied into the output plane first and the GEMM accumulates onto it (beta = 1). A 1x1 stride-1 unpadded conv uses the input itself as the column matrix.
// Batch: samples run one after another, each a full-size GEMM written straight into its NCHW output
// plane (one GEMM over the batch would need a [C_out, N*HO*WO] -> NCHW transpose pass). OpenBLAS
// threads each GEMM; im2col and the epilogue are OpenMP loops outside it. No allocation at run time.
#include <cstring>
#include <string>

#include "infer/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/im2col.h"
#include "kernels/conv_shapes.h"

namespace infer::cpu {
namespace {

size_t conv2d_workspace(const NodeDesc& node) {
  const ConvGeometry g = conv_geometry(std::get<Conv2DParams>(node.params), node.input_shapes[0],
                                       node.input_shapes[1], node.output_shapes[0]);
  return im2col_is_identity(g) ? 0 : g.col_floats() * sizeof(float);
}

void conv2d_run(const KernelCall& call) {
  const auto& p = std::get<Conv2DParams>(call.node.params);
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const Shape& ys = call.node.output_shapes[0];
  const ConvGeometry g = conv_geometry(p, xs, ws, ys);
  const bool identity = im2col_is_identity(g);
  if (!identity && !call.workspace && g.col_floats() > 0)
    throw Error("cpu conv2d: im2col_gemm needs a workspace of " +
                std::to_string(g.col_floats() * sizeof(float)) + " bytes, got none");

  const float* x = call.inputs[0];
  const float* w = call.inputs[1];
  const float* bias = call.inputs.size() >= 3 ? call.inputs[2] : nullptr;
  const float* residual = p.add_residual ? call.inputs[3] : nullptr;
  float* y = call.outputs[0];
  float* col = static_cast<float*>(call.workspace);
  const int64_t N = xs[0], CO = ws[0], K = g.col_rows(), P = g.col_cols();
  const Activation act = fused_activation(call.node.params);

  for (int64_t n = 0; n < N; ++n) {
    const float* xn = x + n * g.C * g.H * g.W;
    float* yn = y + n * CO * P;
    const float* b_mat = xn;
    if (!identity) {
      im2col(g, xn, col);
      b_mat = col;
    }
    // The residual add rides on the GEMM: y = r, then y = w * col + 1 * y.
    if (residual) std::memcpy(yn, residual + n * CO * P, static_cast<size_t>(CO * P) * sizeof(float));
    sgemm(false, false, CO, P, K, 1.f, w, K, b_mat, P, residual ? 1.f : 0.f, yn, P);
    bias_activation_rows(yn, CO, P, P, bias, act);
  }
}

}  // namespace

void register_conv2d(KernelRegistry& registry) {
  registry.add("cpu", {
      {.op = "conv2d", .name = "im2col_gemm", .priority = 10, .applicable = conv2d_undilated,
       .workspace_bytes = conv2d_workspace, .run = conv2d_run},
  });
}

}  // namespace infer::cpu
