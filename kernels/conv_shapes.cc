// Node validation for conv_transpose2d and conv_pool2d, the segregation phase math and the conv + pool
// fused filter (kernels/conv_shapes.h), shared by the cpu and cuda kernels.
#include "kernels/conv_shapes.h"

#include <algorithm>
#include <string>
#include <variant>

#include "infer/error.h"

namespace infer {
namespace {

// Checks common to both ops: 2 or 3 inputs and 1 output, rank-4 x/weight/y without negative
// dimensions, stride > 0, dilation > 0 (and 1 unless `dilated`).
void check_conv_like(const NodeDesc& node, const std::string& where, int stride_h, int stride_w,
                     int dilation_h, int dilation_w, bool dilated = false) {
  // a 4th input: the slope of a per-channel PRelu epilogue (the fuse_prelu pass)
  const size_t most = fused_activation(node.params).kind == ActivationKind::PRelu ? 4 : 3;
  if (node.input_shapes.size() < 2 || node.input_shapes.size() > most || node.output_shapes.size() != 1)
    throw Error(where + "expected 2 or 3 inputs and 1 output");
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4)
    throw Error(where + "expected rank-4 input, weight and output");
  for (const Shape* s : {&xs, &ws, &ys})
    for (int64_t d : *s)
      if (d < 0) throw Error(where + "negative dimension in " + shape_str(*s));
  if (stride_h <= 0 || stride_w <= 0) throw Error(where + "stride must be > 0");
  if (dilation_h <= 0 || dilation_w <= 0) throw Error(where + "dilation must be > 0");
  if (!dilated && (dilation_h != 1 || dilation_w != 1)) throw Error(where + "dilation must be 1");
}

void check_bias(const NodeDesc& node, const std::string& where, int64_t co) {
  if (node.input_shapes.size() >= 3 &&
      (node.input_shapes[2].size() != 1 || node.input_shapes[2][0] != co))
    throw Error(where + "bias shape " + shape_str(node.input_shapes[2]) + ", expected [" +
                std::to_string(co) + "]");
}

std::string inconsistent(const Shape& xs, const Shape& ws, const Shape& ys) {
  return "inconsistent shapes input " + shape_str(xs) + ", weight " + shape_str(ws) + ", output " +
         shape_str(ys);
}

int64_t conv_out(int64_t in, int64_t pad_a, int64_t pad_b, int64_t k, int64_t s) {
  const int64_t span = in + pad_a + pad_b - k;
  return span < 0 ? 0 : span / s + 1;
}

}  // namespace

ConvTranspose2DDims conv_transpose2d_dims(const NodeDesc& node, const char* backend) {
  const std::string where = std::string(backend) + " conv_transpose2d: ";
  const auto* p = std::get_if<ConvTranspose2DParams>(&node.params);
  if (!p) throw Error(where + "node parameters are for op '" + op_name(op_type(node.params)) + "'");
  check_conv_like(node, where, p->stride_h, p->stride_w, p->dilation_h, p->dilation_w, true);
  if (p->pad.top < 0 || p->pad.left < 0 || p->pad.bottom < 0 || p->pad.right < 0 ||
      p->output_padding_h < 0 || p->output_padding_w < 0)
    throw Error(where + "negative padding or output_padding");
  if (p->groups <= 0) throw Error(where + "groups must be > 0");
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  const int64_t G = p->groups;
  if (ws[1] > (int64_t(1) << 40) / G) throw Error(where + "too many output channels");
  ConvTranspose2DDims d{xs[0], xs[1], xs[2], xs[3], ws[1] * G, ws[2], ws[3], ys[2], ys[3],
                        p->stride_h, p->stride_w, p->pad.top, p->pad.left, p->pad.bottom,
                        p->pad.right, p->activation, p};
  d.G = G;
  d.CIG = d.CI / G;
  d.COG = ws[1];
  d.dh = p->dilation_h;
  d.dw = p->dilation_w;
  if (ws[0] != d.CI || d.CI % G != 0 || ys[0] != d.N || ys[1] != d.CO)
    throw Error(where + inconsistent(xs, ws, ys) + " with " + std::to_string(G) + " groups");
  if (d.H == 0 || d.W == 0 || d.KH == 0 || d.KW == 0) throw Error(where + "empty input or kernel");
  if (d.KH - 1 > (int64_t(1) << 40) / d.dh || d.KW - 1 > (int64_t(1) << 40) / d.dw)
    throw Error(where + "dilated kernel too large");
  const int64_t ekh = d.dh * (d.KH - 1) + 1, ekw = d.dw * (d.KW - 1) + 1;  // dilated extent
  const int64_t ho = (d.H - 1) * d.sh - p->pad.top - p->pad.bottom + ekh + p->output_padding_h;
  const int64_t wo = (d.W - 1) * d.sw - p->pad.left - p->pad.right + ekw + p->output_padding_w;
  if (ho != d.HO || wo != d.WO)
    throw Error(where + "output " + shape_str(ys) + " does not match the parameters (expected " +
                std::to_string(ho) + "x" + std::to_string(wo) + ")");
  check_bias(node, where, d.CO);
  return d;
}

ConvPool2DDims conv_pool2d_dims(const NodeDesc& node, const char* backend) {
  const std::string where = std::string(backend) + " conv_pool2d: ";
  const auto* p = std::get_if<ConvPool2DParams>(&node.params);
  if (!p) throw Error(where + "node parameters are for op '" + op_name(op_type(node.params)) + "'");
  const Conv2DParams& c = p->conv;
  check_conv_like(node, where, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w);
  if (c.pad.top < 0 || c.pad.left < 0 || c.pad.bottom < 0 || c.pad.right < 0)
    throw Error(where + "negative padding");
  if (p->pool <= 0) throw Error(where + "pool must be > 0");
  const Shape &xs = node.input_shapes[0], &ws = node.input_shapes[1], &ys = node.output_shapes[0];
  ConvPool2DDims d{xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], 0, 0, ys[2], ys[3], p->pool,
                   c.stride_h, c.stride_w, c.pad.top, c.pad.left, p};
  if (ws[1] != d.CI || ys[0] != d.N || ys[1] != d.CO) throw Error(where + inconsistent(xs, ws, ys));
  if (d.KH == 0 || d.KW == 0) throw Error(where + "empty kernel");
  d.HC = conv_out(d.H, c.pad.top, c.pad.bottom, d.KH, d.sh);
  d.WC = conv_out(d.W, c.pad.left, c.pad.right, d.KW, d.sw);
  if (d.PH != d.HC / d.P || d.PW != d.WC / d.P)
    throw Error(where + "output " + shape_str(ys) + " does not match the parameters (expected " +
                std::to_string(d.HC / d.P) + "x" + std::to_string(d.WC / d.P) + ")");
  check_bias(node, where, d.CO);
  return d;
}

std::vector<float> conv_pool2d_fused_filter(const ConvPool2DDims& d, const float* w, int64_t& kh, int64_t& kw) {
  kh = (d.P - 1) * d.sh + d.KH;
  kw = (d.P - 1) * d.sw + d.KW;
  const size_t taps = static_cast<size_t>(kh * kw);
  std::vector<double> acc(taps);
  std::vector<float> f(static_cast<size_t>(d.CO * d.CI) * taps);
  const double inv_area = 1.0 / double(d.P * d.P);
  for (int64_t co = 0; co < d.CO; ++co)
    for (int64_t ci = 0; ci < d.CI; ++ci) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const float* wp = w + (co * d.CI + ci) * d.KH * d.KW;
      for (int64_t dy = 0; dy < d.P; ++dy)
        for (int64_t dx = 0; dx < d.P; ++dx)
          for (int64_t ky = 0; ky < d.KH; ++ky)
            for (int64_t kx = 0; kx < d.KW; ++kx)
              acc[static_cast<size_t>((dy * d.sh + ky) * kw + dx * d.sw + kx)] += double(wp[ky * d.KW + kx]);
      float* fp = f.data() + static_cast<size_t>(co * d.CI + ci) * taps;
      for (size_t t = 0; t < taps; ++t) fp[t] = static_cast<float>(acc[t] * inv_area);
    }
  return f;
}

namespace {
// True when the validating dims function accepts the node (it throws Error otherwise).
template <class Dims>
bool accepts(Dims dims, const NodeDesc& node) {
  try {
    dims(node, "");
  } catch (const Error&) {
    return false;
  }
  return true;
}
}  // namespace

bool conv_transpose2d_valid(const NodeDesc& node) { return accepts(conv_transpose2d_dims, node); }

bool conv_transpose2d_plain(const NodeDesc& node) {
  if (!conv_transpose2d_valid(node)) return false;
  const auto& p = std::get<ConvTranspose2DParams>(node.params);
  return p.groups == 1 && p.dilation_h == 1 && p.dilation_w == 1;
}

bool conv_pool2d_valid(const NodeDesc& node) { return accepts(conv_pool2d_dims, node); }

PhaseAxis phase_axis(int64_t r, int64_t s, int64_t pad, int64_t out) {
  const int64_t first = ((r - pad) % s + s) % s;
  const int64_t count = first < out ? (out - 1 - first) / s + 1 : 0;
  return {first, count, (first + pad) / s};
}

void krsc_from_kcrs(const float* kcrs, int64_t K, int64_t C, int64_t R, int64_t S, float* krsc) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s) krsc[((k * R + r) * S + s) * C + c] = kcrs[((k * C + c) * R + r) * S + s];
}

ConvProblem conv_pool2d_conv_problem(const ConvPool2DDims& d, int64_t HO, int64_t WO) {
  return {.N = d.N, .C = d.CI, .H = d.H, .W = d.W, .K = d.CO, .KH = d.KH, .KW = d.KW, .stride_h = d.sh,
          .stride_w = d.sw, .pad_top = d.pt, .pad_left = d.pl, .HO = HO, .WO = WO};
}

ConvProblem conv_pool2d_fused_problem(const ConvPool2DDims& d) {
  ConvProblem g = conv_pool2d_conv_problem(d, d.PH, d.PW);
  g.KH = (d.P - 1) * d.sh + d.KH;
  g.KW = (d.P - 1) * d.sw + d.KW;
  g.stride_h = d.P * d.sh;
  g.stride_w = d.P * d.sw;
  return g;
}

ConvProblem conv_pool2d_sum_problem(const ConvPool2DDims& d) {
  ConvProblem g = conv_pool2d_conv_problem(d, d.PH, d.PW);
  g.stride_h = d.P * d.sh;
  g.stride_w = d.P * d.sw;
  g.box = d.P;
  g.box_stride_h = d.sh;
  g.box_stride_w = d.sw;
  return g;
}

ConvProblem conv_transpose2d_flipped_problem(const ConvTranspose2DDims& d, int64_t kh, int64_t kw,
                                             int64_t pad_top, int64_t pad_left, int64_t ho, int64_t wo) {
  return {.N = d.N, .C = d.CI, .H = d.H, .W = d.W, .K = d.CO, .KH = kh, .KW = kw, .pad_top = pad_top,
          .pad_left = pad_left, .HO = ho, .WO = wo};
}

// ---- infer/kernel.h: the convolution problem --------------------------------------------------------

ConvProblem conv2d_problem(const Conv2DParams& p, const Shape& x_shape, const Shape& w_shape,
                           const Shape& y_shape) {
  if (x_shape.size() != 4 || w_shape.size() != 4 || y_shape.size() != 4)
    throw Error("conv2d: expected rank-4 input, weight and output (got " + shape_str(x_shape) + ", " +
                shape_str(w_shape) + ", " + shape_str(y_shape) + ")");
  if (p.stride_h <= 0 || p.stride_w <= 0 || p.dilation_h <= 0 || p.dilation_w <= 0 || p.groups <= 0)
    throw Error("conv2d: stride, dilation and groups must be > 0");
  if (w_shape[1] * p.groups != x_shape[1] || y_shape[1] != w_shape[0] ||
      w_shape[0] % p.groups != 0 || y_shape[0] != x_shape[0])
    throw Error("conv2d: inconsistent shapes input " + shape_str(x_shape) + ", weight " +
                shape_str(w_shape) + ", output " + shape_str(y_shape));
  return {.N = x_shape[0], .C = w_shape[1], .H = x_shape[2], .W = x_shape[3], .K = w_shape[0],
          .groups = p.groups, .KH = w_shape[2], .KW = w_shape[3], .stride_h = p.stride_h,
          .stride_w = p.stride_w, .pad_top = p.pad.top, .pad_left = p.pad.left, .HO = y_shape[2],
          .WO = y_shape[3], .dilation_h = p.dilation_h, .dilation_w = p.dilation_w};
}

ConvProblem conv2d_problem(const NodeDesc& node) {
  if (node.input_shapes.size() < 2 || node.output_shapes.empty())
    throw Error("conv2d: expected an input, a weight and an output");
  return conv2d_problem(std::get<Conv2DParams>(node.params), node.input_shapes[0], node.input_shapes[1],
                        node.output_shapes[0]);
}

bool im2col_is_identity(const ConvProblem& g) {
  return g.KH == 1 && g.KW == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
         g.pad_left == 0 && g.HO == g.H && g.WO == g.W && g.box <= 1;
}

// The conventional method's input: x upsampled by the stride and padded by (dilated kernel - 1 - pad)
// on each side, HO + (KH-1)*dh + 1 - 1 rows (a valid stride-1 convolution of it yields HO rows).
uint64_t conv_transpose2d_upsampled_bytes(const ConvTranspose2DParams& p, const Shape& x_shape,
                                          const Shape& w_shape) {
  if (x_shape.size() != 4 || w_shape.size() != 4)
    throw Error("conv_transpose2d_upsampled_bytes: expected rank-4 input and weight shapes");
  if (p.stride_h <= 0 || p.stride_w <= 0 || p.dilation_h <= 0 || p.dilation_w <= 0)
    throw Error("conv_transpose2d_upsampled_bytes: stride and dilation must be > 0");
  const int64_t ekh = int64_t(p.dilation_h) * (w_shape[2] - 1) + 1;
  const int64_t ekw = int64_t(p.dilation_w) * (w_shape[3] - 1) + 1;
  if (p.pad.top >= ekh || p.pad.bottom >= ekh || p.pad.left >= ekw || p.pad.right >= ekw)
    throw Error("conv_transpose2d_upsampled_bytes: padding must be smaller than the (dilated) kernel");
  const int64_t ho = (x_shape[2] - 1) * p.stride_h - p.pad.top - p.pad.bottom + ekh + p.output_padding_h;
  const int64_t wo = (x_shape[3] - 1) * p.stride_w - p.pad.left - p.pad.right + ekw + p.output_padding_w;
  return static_cast<uint64_t>(x_shape[1] * (ho + ekh - 1) * (wo + ekw - 1)) * sizeof(float);
}

}  // namespace infer
