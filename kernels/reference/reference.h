// The reference backend: every op as plain, obviously-correct loops that accumulate in double. It is
// the test oracle for every fast kernel and the first working CPU backend. Shapes are concrete (batch
// fixed) and trusted (validated by the loader / shape inference); the functions still never read or
// write outside the extents the shapes describe, and throw infer::Error for shapes they cannot run.
#pragma once

#include <vector>

#include "infer/ops.h"

namespace infer::ref {

// x [N,C_in,H,W], w [C_out,C_in/groups,KH,KW], bias [C_out] or nullptr, y [N,C_out,H_out,W_out].
// Any stride, (asymmetric) padding, dilation and groups. Adds `residual` (y's shape, or nullptr)
// before applying p.activation. `slope` [C_out]: the per-channel PRelu epilogue's, where p.activation
// is ActivationKind::PRelu (likewise for conv_transpose2d and dense).
void conv2d(const Conv2DParams& p, const float* x, const Shape& x_shape, const float* w,
            const Shape& w_shape, const float* bias, float* y, const Shape& y_shape,
            const float* residual = nullptr, const float* slope = nullptr);

// x [N,C_in,H,W], w [C_in,C_out/groups,KH,KW], bias [C_out] or nullptr, y [N,C_out,H_out,W_out] with
// H_out = (H-1)*stride - pad_top - pad_bottom + dilation*(KH-1) + 1 + output_padding (likewise W); any
// groups (depthwise: groups == C_in) and dilation. Applies p.activation.
void conv_transpose2d(const ConvTranspose2DParams& p, const float* x, const Shape& x_shape,
                      const float* w, const Shape& w_shape, const float* bias, float* y,
                      const Shape& y_shape, const float* slope = nullptr);

// Max or average pooling over [N,C,H,W]. Padded cells never win a max; an average divides by the
// window's padded extent (count_include_pad) or by its real cells only.
void pool2d(const Pool2DParams& p, const float* x, const Shape& x_shape, float* y,
            const Shape& y_shape);

// x [N,F_in], w [F_out,F_in], bias [F_out] or nullptr, y [N,F_out]. Applies p.activation.
void dense(const DenseParams& p, const float* x, const Shape& x_shape, const float* w,
           const Shape& w_shape, const float* bias, float* y, const Shape& y_shape,
           const float* slope = nullptr);

// Inference batch norm over axis 1 of a rank >= 2 tensor; scale, bias, mean, var have C = shape[1]
// elements. y = (x - mean) / sqrt(var + epsilon) * scale + bias, then p.activation. y may be x.
void batchnorm(const BatchNormParams& p, const float* x, const Shape& shape, const float* scale,
               const float* bias, const float* mean, const float* var, float* y);

// Element-wise p.activation (None copies). y may be x.
void activation(const ActivationParams& p, const float* x, const Shape& shape, float* y);

// Flatten and reshape only relabel the shape: both copy the element sequence unchanged.
void flatten(const FlattenParams& p, const float* x, const Shape& x_shape, float* y,
             const Shape& y_shape);
void reshape(const ReshapeParams& p, const float* x, const Shape& x_shape, float* y,
             const Shape& y_shape);

// Numerically stable softmax along p.axis (negative counts from the end). y may be x.
void softmax(const SoftmaxParams& p, const float* x, const Shape& shape, float* y);

// y = a + b for equal shapes, then p.activation. y may be a or b.
void add(const AddParams& p, const float* a, const float* b, const Shape& shape, float* y);

// y = act(a <p.kind> b) with NumPy broadcasting of a and b to y_shape (row-major NCHW, missing leading
// dims and size-1 dims broadcast). y may be an input of y's shape.
void binary(const BinaryParams& p, const float* a, const Shape& a_shape, const float* b,
            const Shape& b_shape, float* y, const Shape& y_shape);
double binary_apply(BinaryKind kind, double a, double b);  // a + b, a - b, a * b or a / b

// Concatenation of any number of inputs along p.axis (negative counts from the end).
void concat(const ConcatParams& p, const std::vector<const float*>& xs,
            const std::vector<Shape>& x_shapes, float* y, const Shape& y_shape);

// p.conv (without its activation), then pool x pool average pooling at stride pool (floor, no
// padding), then p.conv.activation. Same tensors as conv2d; y is the pooled result.
void conv_pool2d(const ConvPool2DParams& p, const float* x, const Shape& x_shape, const float* w,
                 const Shape& w_shape, const float* bias, float* y, const Shape& y_shape);

// 2-D padding of x [N,C,H,W] into y [N,C,H+top+bottom,W+left+right] by p.mode (y != x).
void pad2d(const Pad2DParams& p, const float* x, const Shape& x_shape, float* y, const Shape& y_shape);
// The input index that output index i (in input coordinates, i.e. already shifted by the leading pad)
// reads along an axis of `size` under `mode`; -1 for Constant mode's fill. Shared by the tests.
int64_t pad_source_index(PadMode mode, int64_t i, int64_t size);

// Instance norm of x [N,C,...] (rank >= 3) with scale [C], bias [C], then p.activation. y may be x.
void instance_norm(const InstanceNormParams& p, const float* x, const Shape& shape,
                   const float* scale, const float* bias, float* y);

// Channel shuffle of x [N,C,H,W]: output channel j*groups + i = input channel i*(C/groups) + j (y != x).
void channel_shuffle(const ChannelShuffleParams& p, const float* x, const Shape& shape, float* y);
// Elements p.start..p.end-1 of axis p.axis (y != x).
void slice(const SliceParams& p, const float* x, const Shape& x_shape, float* y, const Shape& y_shape);
// Nearest / bilinear resize of [N,C,H,W] to y_shape (see ResizeParams); blends in double.
void resize(const ResizeParams& p, const float* x, const Shape& x_shape, float* y, const Shape& y_shape);

// DepthToSpace (DCR / CRD) of [N,C,H,W] into y_shape [N, C/b^2, H b, W b]: a pure permutation.
void depth_to_space(const DepthToSpaceParams& p, const float* x, const Shape& x_shape, float* y,
                    const Shape& y_shape);

// Copies [N,C,H,W] from p.from's memory order to p.to's (NCHW <-> NHWC; equal layouts copy). y != x.
void layout(const LayoutParams& p, const float* x, const Shape& shape, float* y);

// x [N,C,H,W], w1 [C_r,C] (the 1x1 kernel), b1 [C_r], w2 [C,C_r], b2 [C] (C_r = reduced), y x's shape:
// y = act(x * gate_act(w2 hidden_act(w1 mean_hw(x) + b1) + b2)). Never in place.
void squeeze_excite(const SqueezeExciteParams& p, const float* x, const Shape& x_shape, const float* w1,
                    const float* b1, const float* w2, const float* b2, int64_t reduced, float* y);

}  // namespace infer::ref
