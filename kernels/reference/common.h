// Helpers private to the reference kernels: the activation function in double, the shape checks that
// keep every loop inside its buffers, and the index-range arithmetic the convolution loops share.
// Internal: not part of the kernel interface.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "infer/kernel.h"
#include "infer/error.h"
#include "infer/ops.h"

namespace infer::ref::detail {

// Input i of a kernel call, nullptr when the call has fewer inputs (an optional bias).
inline const float* optional_input(const KernelCall& call, size_t i) {
  return i < call.inputs.size() ? call.inputs[i] : nullptr;
}

// NaN in, NaN out for every kind: the clamps are written as v < lo ? lo : v, which keeps a NaN.
inline double clamp_nan(double v, double lo, double hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

inline double activate(const Activation& a, double v) {
  switch (a.kind) {
    case ActivationKind::None: return v;
    case ActivationKind::Relu: return v < 0 ? 0.0 : v;  // written so that NaN propagates
    case ActivationKind::LeakyRelu: return v < 0 ? double(a.alpha) * v : v;
    case ActivationKind::Tanh: return std::tanh(v);
    case ActivationKind::Sigmoid: return 1.0 / (1.0 + std::exp(-v));
    case ActivationKind::Clip: return clamp_nan(v, a.alpha, a.beta);
    case ActivationKind::HardSigmoid: return clamp_nan(double(a.alpha) * v + double(a.beta), 0.0, 1.0);
    case ActivationKind::HardSwish: return v * clamp_nan(v + 3.0, 0.0, 6.0) / 6.0;
    case ActivationKind::Silu: return v / (1.0 + std::exp(-v));
    case ActivationKind::Elu: return v > 0 ? v : double(a.alpha) * std::expm1(v);
    case ActivationKind::Exp: return std::exp(v);
    case ActivationKind::Sqrt: return std::sqrt(v);
    case ActivationKind::Neg: return -v;
    case ActivationKind::Abs: return std::fabs(v);
    // log(1 + e^v) without overflow: v + log1p(e^-v) for v > 0.
    case ActivationKind::Softplus: return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
    case ActivationKind::PRelu:  // per channel: the kernel passes channel_act(a, slope, c)
      throw Error("reference: a prelu epilogue applied without its channel's slope");
  }
  return v;
}

// The epilogue of output channel c (infer/ops.h channel_activation), checking that a per-channel PRelu
// came with its slopes.
inline Activation channel_act(const Activation& a, const float* slope, int64_t c) {
  if (a.kind == ActivationKind::PRelu && !slope) throw Error("reference: a prelu epilogue without slopes");
  return channel_activation(a, slope, c);
}

// quantize_linear of one value (ONNX Runtime's arithmetic in float32): x / scale rounded half to even
// (nearbyint in the default rounding mode), plus the zero point, saturated to `type`'s range (I8
// [-128, 127], else U8 [0, 255]); NaN gives the low end. Integers below 2^24: exact.
inline float quantize_value(float x, float scale, float zero, DType type) {
  const float lo = type == DType::I8 ? -128.f : 0.f, hi = type == DType::I8 ? 127.f : 255.f;
  const float v = std::nearbyint(x / scale) + zero;
  return std::isnan(v) ? lo : v < lo ? lo : v > hi ? hi : v;
}

// Throws if any dimension of `s` is negative (a trusted shape never has one; cheap insurance).
inline void check_dims(const char* op, const char* what, const Shape& s) {
  for (int64_t d : s)
    if (d < 0) throw Error(std::string(op) + ": " + what + " has a negative dimension (" + shape_str(s) + ")");
}

// Throws unless `s` has exactly `rank` dimensions, none negative.
inline void check_shape(const char* op, const char* what, const Shape& s, size_t rank) {
  if (s.size() != rank)
    throw Error(std::string(op) + ": " + what + " has shape " + shape_str(s) + ", expected rank " +
                std::to_string(rank));
  check_dims(op, what, s);
}

inline void check_equal(const char* op, const char* what, int64_t got, int64_t expected) {
  if (got != expected)
    throw Error(std::string(op) + ": " + what + " is " + std::to_string(got) + ", expected " +
                std::to_string(expected));
}

// The indices t in [lo, hi) of [0, count) for which t * stride + offset lies in [0, limit). Lets the
// convolution loops run without a bounds test per element; `stride` > 0.
struct Range {
  int64_t lo, hi;
};
inline Range valid_range(int64_t count, int64_t stride, int64_t offset, int64_t limit) {
  // smallest t with t*stride + offset >= 0
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  // largest t with t*stride + offset <= limit - 1, plus one
  int64_t last = limit - 1 - offset;
  int64_t hi = last < 0 ? 0 : last / stride + 1;
  if (hi > count) hi = count;
  if (lo > hi) lo = hi;
  return {lo, hi};
}

// Accumulates, for sample n and output channel co, the convolution of x with w (plus bias) into the
// double plane acc [H_out, W_out] (overwritten). Shared by conv2d and conv_pool2d, which keeps the
// pooled oracle free of intermediate float rounding. Shapes already checked by the caller.
void conv2d_plane(const Conv2DParams& p, const float* x, const Shape& x_shape, const float* w,
                  const Shape& w_shape, const float* bias, int64_t n, int64_t co, double* acc,
                  int64_t h_out, int64_t w_out);

// Throws for parameters the reference conv cannot run (stride <= 0, dilation != 1, negative pad).
void check_conv_params(const char* op, int stride_h, int stride_w, const Padding2D& pad,
                       int dilation_h, int dilation_w);

}  // namespace infer::ref::detail
