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

#include "kernels/cpu/call_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/im2col.h"

namespace infer::cpu {
namespace {

bool conv2d_applicable(const NodeDesc& node) {
  const auto* p = std::get_if<Conv2DParams>(&node.params);
  const size_t max_inputs = p && p->add_residual ? 4 : 3;
  if (!p || node.input_shapes.size() < 2 || node.input_shapes.size() > max_inputs ||
      node.output_shapes.size() != 1)
    return false;
  if (p->add_residual && (node.input_shapes.size() != 4 || node.input_shapes[3] != node.output_shapes[0]))
    return false;
  if (p->dilation_h != 1 || p->dilation_w != 1 || p->stride_h <= 0 || p->stride_w <= 0) return false;
  const Shape &x = node.input_shapes[0], &w = node.input_shapes[1], &y = node.output_shapes[0];
  return x.size() == 4 && w.size() == 4 && y.size() == 4;
}

size_t conv2d_workspace(const NodeDesc& node) {
  if (!conv2d_applicable(node)) return 0;
  const ConvGeometry g = conv_geometry(std::get<Conv2DParams>(node.params), node.input_shapes[0],
                                       node.input_shapes[1], node.output_shapes[0]);
  return im2col_is_identity(g) ? 0 : g.col_floats() * sizeof(float);
}

void conv2d_run(const KernelCall& call) {
  const auto& p = params_of<Conv2DParams>(call.node, "conv2d");
  check_call(call, "conv2d", p.add_residual ? 4 : 2, p.add_residual ? 4 : 3);
  if (p.add_residual && call.node.input_shapes[3] != call.node.output_shapes[0])
    throw Error("cpu conv2d: residual has shape " + shape_str(call.node.input_shapes[3]) +
                " but the output is " + shape_str(call.node.output_shapes[0]));
  const Shape &xs = call.node.input_shapes[0], &ws = call.node.input_shapes[1];
  const Shape& ys = call.node.output_shapes[0];
  const ConvGeometry g = conv_geometry(p, xs, ws, ys);
  for (const Shape* s : {&xs, &ws, &ys}) check_dims("conv2d", *s);
  if (call.node.input_shapes.size() >= 3 && shape_numel(call.node.input_shapes[2]) != ws[0])
    throw Error("cpu conv2d: bias has shape " + shape_str(call.node.input_shapes[2]) +
                ", expected " + std::to_string(ws[0]) + " elements");
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
  KernelVariant v;
  v.op = "conv2d";
  v.name = "im2col_gemm";
  v.backend = "cpu";
  v.priority = 10;
  v.applicable = conv2d_applicable;
  v.workspace_bytes = conv2d_workspace;
  v.run = conv2d_run;
  registry.add(std::move(v));
}

}  // namespace infer::cpu
