// Validated sizes of the transposed-convolution and conv+pool nodes, shared by every backend's
// kernels (cpu and cuda) so that each checks a node the same way: every size a kernel loop uses comes
// from here, and a malformed node is an infer::Error naming the backend and op ("cpu conv_pool2d:
// ..."), never an out-of-bounds access. Also the kernel-segregation phase math and the conv + pool
// fused filter. Host code only.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/kernel.h"

namespace infer {

// conv_transpose2d: x [N,CI,H,W], weight [CI,CO/G,KH,KW], optional bias [CO], y [N,CO,HO,WO]; G groups
// of CIG = CI/G input and COG = CO/G output channels; dilation dh, dw (tap ky lands dh*ky rows down).
struct ConvTranspose2DDims {
  int64_t N, CI, H, W, CO, KH, KW, HO, WO;
  int sh, sw, pt, pl, pb, pr;
  Activation act;
  const ConvTranspose2DParams* p;
  int64_t G = 1, CIG = 0, COG = 0;
  int dh = 1, dw = 1;
};
ConvTranspose2DDims conv_transpose2d_dims(const NodeDesc& node, const char* backend);

// conv_pool2d: HC x WC is the conv's own output, PH x PW the pooled output, P the pool size.
struct ConvPool2DDims {
  int64_t N, CI, H, W, CO, KH, KW, HC, WC, PH, PW, P;
  int sh, sw, pt, pl;
  const ConvPool2DParams* p;
};
ConvPool2DDims conv_pool2d_dims(const NodeDesc& node, const char* backend);
// The fused filter of a conv + pool node (Tokura et al.): pooled output (py, px) averages conv outputs
// (py*p + dy, px*p + dx), which read padded input rows (py*p + dy)*s + ky, i.e. offset u = dy*s + ky in
// [0, kh = (p-1)*s + KH); summing the kernel over every (dy, ky) with the same u gives
// F[u][v] = (1/p^2) * sum w[u - dy*s][v - dx*s], applied at stride p*s with the conv's own padding.
// w is the node's [CO][CI][KH][KW] weight; returns F as [CO][CI][kh][kw] (summed in double).
std::vector<float> conv_pool2d_fused_filter(const ConvPool2DDims& d, const float* w, int64_t& kh, int64_t& kw);

// A conv-like call unpacked (conv_transpose2d, conv_pool2d): the node's validated sizes and the input,
// weight, optional bias, output and (a conv_transpose2d with the per-channel PRelu epilogue of the
// fuse_prelu pass) slope pointers (check_kernel_call has checked they are there). T is float on cpu,
// void on cuda (half or float data by the session's precision).
template <class Dims, class T>
struct ConvLikeCall {
  Dims d;
  const T *x, *w, *bias;
  T* y;
  const T* slope;  // [CO] where the activation is ActivationKind::PRelu, else nullptr
};
template <class T, class Dims>
ConvLikeCall<Dims, T> conv_like_call(const KernelCall& call, const Dims& d) {
  return {d, call.inputs[0], call.inputs[1], call.inputs.size() >= 3 ? call.inputs[2] : nullptr,
          call.outputs[0], prelu_slope(call)};
}

// The convolutions a conv_pool2d node is computed as, on every backend:
//  conv: the node's own convolution (stride, padding) of the CI input planes, output HO x WO (the
//        conv's outputs the pooling reads);
//  fused: the fused filter ((P-1)*s + K taps, conv_pool2d_fused_filter) at stride P*s, output PH x PW;
//  sum: the node's kernel at stride P*s over the p x p box sums of the input (box = P cells s apart),
//       output PH x PW (conv_pool2d.direct_sum).
ConvProblem conv_pool2d_conv_problem(const ConvPool2DDims& d, int64_t HO, int64_t WO);
ConvProblem conv_pool2d_fused_problem(const ConvPool2DDims& d);
ConvProblem conv_pool2d_sum_problem(const ConvPool2DDims& d);
// A stride-1 convolution over a conv_transpose2d node's CI input planes (its flipped kernel, or one
// phase's sub-kernel): kernel kh x kw, top/left padding (negative: an offset into x), output ho x wo.
ConvProblem conv_transpose2d_flipped_problem(const ConvTranspose2DDims& d, int64_t kh, int64_t kw,
                                             int64_t pad_top, int64_t pad_left, int64_t ho, int64_t wo);

// True when the *_dims function above accepts the node (for the variants' applicable()).
bool conv_transpose2d_valid(const NodeDesc& node);
// True when a valid conv_transpose2d node has groups 1 and dilation 1: what every variant but the
// general ones (cpu and cuda gemm_col2im, cuda conventional) requires in its `applicable`.
bool conv_transpose2d_plain(const NodeDesc& node);
bool conv_pool2d_valid(const NodeDesc& node);
// True when a conv2d node has groups 1 and dilation 1, with or without a residual input (add_residual,
// from the fuse_conv_residual pass): what the GEMM variants take, whose epilogue adds the residual.
inline bool conv2d_ungrouped(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  return p.groups == 1 && p.dilation_h == 1 && p.dilation_w == 1;
}
// True when a conv2d node is ungrouped and has no residual input: the plain convolution most conv2d
// variants handle (their `applicable`); grouped, depthwise, dilated and residual nodes go to the
// variants that take them.
inline bool conv2d_plain(const NodeDesc& node) {
  return conv2d_ungrouped(node) && !std::get<Conv2DParams>(node.params).add_residual;
}
// True when a conv2d node is depthwise: groups == C_in > 1, one input channel per group (weight
// [M*C_in, 1, KH, KW], output channel co reads input channel co / M), any stride and dilation; no
// residual input.
inline bool conv2d_depthwise(const NodeDesc& node) {
  const auto& p = std::get<Conv2DParams>(node.params);
  return p.groups > 1 && !p.add_residual && node.input_shapes.size() >= 2 && node.input_shapes[0].size() == 4 &&
         node.input_shapes[1].size() == 4 && p.groups == node.input_shapes[0][1] &&
         node.input_shapes[1][1] == 1;
}

// Host re-layout of float weights [K][C][R][S] (KCRS) into [K][R][S][C] (KRSC): the filter layout of
// channels-last convolutions (cuDNN's NHWC filters, CUTLASS's implicit GEMMs).
void krsc_from_kcrs(const float* kcrs, int64_t K, int64_t C, int64_t R, int64_t S, float* krsc);

// True when the weight (input 1) is a constant, which the variants that prepare it need.
inline bool has_constant_weight(const NodeDesc& node) {
  return node.constants.size() >= 2 && node.constants[1] != nullptr;
}

// The phase decomposition of a transposed convolution (docs/kernels.md): output row oy receives
// x[iy] * w[ky] exactly when iy*s - pad + ky = oy, i.e. ky = r + s*j with phase r = (oy + pad) % s.
// Along one axis, phase r's outputs are first + s*m for m < count; q0 is the input index of tap
// j = 0 for m = 0 (tap t of the flipped sub-kernel reads q0 + m - (taps-1) + t).
struct PhaseAxis {
  int64_t first, count, q0;
};
PhaseAxis phase_axis(int64_t r, int64_t s, int64_t pad, int64_t out);
// Taps of phase r: r, r+s, ... below k (0 when s > k leaves the phase without taps).
inline int64_t phase_taps(int64_t r, int64_t s, int64_t k) { return r < k ? (k - r + s - 1) / s : 0; }

}  // namespace infer
