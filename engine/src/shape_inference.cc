// Shape inference for every op and for whole graphs. This is also where op parameters are validated
// (kernel, stride, dilation > 0; 0 <= padding < dilated kernel; groups divide the channels;
// transposed: output_padding < max(stride, dilation); ...), so the loader,
// the builder and the session all reject the same things with the same messages. All size arithmetic
// is bounded: no tensor may exceed 2^40 elements, and every product is checked before it is formed.
#include "shape_inference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "infer/error.h"

namespace infer::detail {

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 40;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
}

std::string str(const Shape& s) { return shape_str(s); }

// Every dim >= 1 (>= 0 with allow_empty) and the element count <= 2^40, checked without overflowing.
bool bounded(const Shape& s, std::string* why, bool allow_empty = false) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < (allow_empty ? 0 : 1)) {
      *why = "dimension " + std::to_string(d) + " is not >= " + (allow_empty ? "0" : "1");
      return false;
    }
    if (d == 0) n = 0;  // empty: no element count to overflow
    if (n != 0 && d > kMaxElements / n) {
      *why = "more than 2^40 elements";
      return false;
    }
    n *= d;
  }
  return true;
}

int64_t numel(const Shape& s) {  // only for shapes already checked with bounded()
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// The inputs of one node plus the op's names for them, so messages say "input 1 (weight)".
class Inputs {
 public:
  Inputs(const std::string& where, const std::vector<Shape>& shapes, std::vector<const char*> roles)
      : where_(where), shapes_(shapes), roles_(std::move(roles)) {}

  void expect_count(size_t lo, size_t hi) const {
    const size_t n = shapes_.size();
    if (n >= lo && n <= hi) return;
    std::string want = lo == hi ? std::to_string(lo)
                       : hi == SIZE_MAX ? "at least " + std::to_string(lo)
                                        : std::to_string(lo) + " or " + std::to_string(hi);
    fail(where_, "expects " + want + " inputs, got " + std::to_string(n));
  }

  std::string label(size_t i) const {
    std::string s = "input " + std::to_string(i);
    if (i < roles_.size() && roles_[i]) s += std::string(" (") + roles_[i] + ")";
    return s;
  }

  const Shape& with_rank(size_t i, size_t rank, const char* layout) const {
    const Shape& s = shapes_[i];
    if (s.size() != rank)
      fail(where_, label(i) + " has shape " + str(s) + " but must have rank " +
                       std::to_string(rank) + " " + layout);
    return s;
  }

  void expect_vector(size_t i, int64_t n, const char* what) const {
    const Shape& s = shapes_[i];
    if (s.size() != 1 || s[0] != n)
      fail(where_, label(i) + " has shape " + str(s) + " but must be [" + std::to_string(n) +
                       "] (" + what + ")");
  }

  size_t size() const { return shapes_.size(); }
  const Shape& operator[](size_t i) const { return shapes_[i]; }

 private:
  const std::string& where_;
  const std::vector<Shape>& shapes_;
  std::vector<const char*> roles_;
};

// A float as a short decimal ("6", "0.5") for messages.
std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(v));
  return buf;
}

// `field` names the kind; its parameters are `field`_alpha and `field`_beta, or plain "alpha" and
// "beta" for the Activation op's "kind". Both must be finite for every kind (an ignored parameter too:
// a file that carries a NaN is corrupt); Clip's min (alpha) must not exceed its max (beta).
void check_activation(const std::string& where, const std::string& field, const Activation& a) {
  const int k = static_cast<int>(a.kind);
  if (k < 0 || k >= kNumActivationKinds)
    fail(where, "field " + field + " has unknown value " + std::to_string(k));
  const std::string alpha = field == "kind" ? std::string("alpha") : field + "_alpha";
  const std::string beta = field == "kind" ? std::string("beta") : field + "_beta";
  if (!std::isfinite(a.alpha)) fail(where, "field " + alpha + " must be finite");
  if (!std::isfinite(a.beta)) fail(where, "field " + beta + " must be finite");
  if (a.kind == ActivationKind::Clip && !(a.alpha <= a.beta))
    fail(where, "field " + alpha + " (clip min " + fmt_float(a.alpha) + ") must be <= " + beta +
                    " (clip max " + fmt_float(a.beta) + ")");
}

void positive(const std::string& where, const std::string& field, int64_t v) {
  if (v <= 0) fail(where, "field " + field + " must be > 0 (got " + std::to_string(v) + ")");
}

void dilation_one(const std::string& where, const std::string& field, int v) {
  if (v != 1) fail(where, "field " + field + " must be 1 (dilation " + std::to_string(v) +
                              " is not supported)");
}

// 0 <= padding, and (when below_kernel) padding < kernel on each side.
void check_padding(const std::string& where, const std::string& prefix, const Padding2D& p,
                   int64_t kh, int64_t kw, bool below_kernel) {
  struct Side { const char* name; int value; int64_t kernel; const char* axis; };
  const Side sides[] = {{"top", p.top, kh, "height"}, {"left", p.left, kw, "width"},
                        {"bottom", p.bottom, kh, "height"}, {"right", p.right, kw, "width"}};
  for (const Side& s : sides) {
    const std::string field = prefix + "padding." + s.name;
    if (s.value < 0)
      fail(where, "field " + field + " must be >= 0 (got " + std::to_string(s.value) + ")");
    if (below_kernel && s.value >= s.kernel)
      fail(where, "field " + field + " must be < kernel " + s.axis + " " + std::to_string(s.kernel) +
                      " (got " + std::to_string(s.value) + ")");
  }
}

// floor((in + pads - kernel) / stride) + 1, requiring the kernel to fit in the padded input. With
// ceil_mode: ceil instead of floor, less one when the last window would start at or after in + pad_a,
// i.e. wholly in the end padding (PyTorch's pooling_output_shape; ONNX opset 19 says the same).
int64_t window_out(const std::string& where, const char* axis, int64_t in, int pad_a, int pad_b,
                   int64_t kernel, int stride, bool ceil_mode = false) {
  const int64_t padded = in + pad_a + pad_b;  // in <= 2^40 and pads are int: no overflow
  if (kernel > padded)
    fail(where, std::string("kernel ") + axis + " " + std::to_string(kernel) +
                    " is larger than the padded input " + axis + " " + std::to_string(padded));
  if (!ceil_mode) return (padded - kernel) / stride + 1;
  int64_t out = (padded - kernel + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + pad_a) --out;
  return out;
}

// Shared by conv2d and conv_pool2d: parameter checks, input checks, and the conv output shape.
// Weight [C_out, C_in/groups, KH, KW]; the dilated kernel d*(K-1)+1 must fit in the padded input and
// each padding must be below it. conv_pool2d (grouped=false) accepts groups and dilation 1 only.
Shape conv2d_shape(const std::string& where, const std::string& prefix, const Conv2DParams& p,
                   const Inputs& in, bool grouped) {
  if (p.add_residual) {
    if (!prefix.empty()) fail(where, "field " + prefix + "add_residual is only for conv2d");
    in.expect_count(4, 4);  // x, weight, bias, residual
  } else {
    in.expect_count(2, 3);
  }
  const Shape& x = in.with_rank(0, 4, "[N,C_in,H,W]");
  const Shape& w = in.with_rank(1, 4, "[C_out,C_in/groups,KH,KW]");
  positive(where, prefix + "stride_h", p.stride_h);
  positive(where, prefix + "stride_w", p.stride_w);
  if (grouped) {
    positive(where, prefix + "dilation_h", p.dilation_h);
    positive(where, prefix + "dilation_w", p.dilation_w);
    positive(where, prefix + "groups", p.groups);
  } else {
    dilation_one(where, prefix + "dilation_h", p.dilation_h);
    dilation_one(where, prefix + "dilation_w", p.dilation_w);
    if (p.groups != 1)
      fail(where, "field " + prefix + "groups must be 1 (got " + std::to_string(p.groups) + ")");
  }
  check_activation(where, prefix + "activation", p.activation);
  // w[2], w[3] <= 2^40 and dilation is int: no overflow.
  const int64_t kh = static_cast<int64_t>(p.dilation_h) * (w[2] - 1) + 1;
  const int64_t kw = static_cast<int64_t>(p.dilation_w) * (w[3] - 1) + 1;
  check_padding(where, prefix, p.pad, kh, kw, true);
  const int64_t g = p.groups;
  if (x[1] % g != 0 || w[0] % g != 0)
    fail(where, "field " + prefix + "groups " + std::to_string(g) + " must divide input channels " +
                    std::to_string(x[1]) + " and output channels " + std::to_string(w[0]));
  if (w[1] * g != x[1])
    fail(where, in.label(1) + " has " + std::to_string(w[1]) + " input channels" +
                    (g > 1 ? " per group" : "") + " but input 0 has " + std::to_string(x[1]) +
                    (g > 1 ? " in " + std::to_string(g) + " groups" : std::string()));
  if (in.size() >= 3) in.expect_vector(2, w[0], "C_out");
  const int64_t h = window_out(where, "height", x[2], p.pad.top, p.pad.bottom, kh, p.stride_h);
  const int64_t wd = window_out(where, "width", x[3], p.pad.left, p.pad.right, kw, p.stride_w);
  const Shape out{x[0], w[0], h, wd};
  if (p.add_residual && in[3] != out)
    fail(where, in.label(3) + " (residual) has shape " + str(in[3]) + " but the output is " + str(out));
  return out;
}

std::vector<Shape> conv2d(const std::string& where, const Conv2DParams& p, const Inputs& in) {
  return {conv2d_shape(where, "", p, in, true)};
}

std::vector<Shape> conv_pool2d(const std::string& where, const ConvPool2DParams& p,
                               const Inputs& in) {
  Shape s = conv2d_shape(where, "conv.", p.conv, in, false);
  if (p.pool < 1) fail(where, "field pool must be >= 1 (got " + std::to_string(p.pool) + ")");
  if (s[2] < p.pool || s[3] < p.pool)
    fail(where, "conv output " + std::to_string(s[2]) + "x" + std::to_string(s[3]) +
                    " is smaller than the pool window " + std::to_string(p.pool));
  s[2] /= p.pool;
  s[3] /= p.pool;
  return {s};
}

// (in - 1) * stride - pads + kernel + output_padding, with the product bounded first.
int64_t transposed_out(const std::string& where, const char* axis, int64_t in, int stride,
                       int pad_a, int pad_b, int64_t kernel, int output_padding) {
  if (in - 1 > kMaxElements / stride)
    fail(where, std::string("output ") + axis + " is too large");
  return (in - 1) * stride - pad_a - pad_b + kernel + output_padding;
}

// Weight [C_in, C_out/groups, KH, KW] (ONNX / PyTorch); output channels w[1]*groups; the kernel's
// extent is the dilated d*(K-1)+1. output_padding < max(stride, dilation) as PyTorch requires.
std::vector<Shape> conv_transpose2d(const std::string& where, const ConvTranspose2DParams& p,
                                    const Inputs& in) {
  in.expect_count(2, 3);
  const Shape& x = in.with_rank(0, 4, "[N,C_in,H,W]");
  const Shape& w = in.with_rank(1, 4, "[C_in,C_out/groups,KH,KW]");
  positive(where, "stride_h", p.stride_h);
  positive(where, "stride_w", p.stride_w);
  positive(where, "dilation_h", p.dilation_h);
  positive(where, "dilation_w", p.dilation_w);
  positive(where, "groups", p.groups);
  check_activation(where, "activation", p.activation);
  check_padding(where, "", p.pad, w[2], w[3], false);
  const struct { const char* field; int value; int stride; int dilation; } ops[] = {
      {"output_padding_h", p.output_padding_h, p.stride_h, p.dilation_h},
      {"output_padding_w", p.output_padding_w, p.stride_w, p.dilation_w}};
  for (const auto& o : ops) {
    if (o.value < 0)
      fail(where, std::string("field ") + o.field + " must be >= 0 (got " +
                      std::to_string(o.value) + ")");
    if (o.value >= std::max(o.stride, o.dilation))
      fail(where, std::string("field ") + o.field + " must be < " +
                      (o.dilation > o.stride ? "dilation " + std::to_string(o.dilation)
                                             : "stride " + std::to_string(o.stride)) +
                      " (got " + std::to_string(o.value) + ")");
  }
  const int64_t g = p.groups;
  if (x[1] % g != 0)
    fail(where, "field groups " + std::to_string(g) + " must divide input channels " +
                    std::to_string(x[1]));
  if (w[0] != x[1])
    fail(where, in.label(1) + " has " + std::to_string(w[0]) + " input channels but input 0 has " +
                    std::to_string(x[1]));
  if (w[1] > kMaxElements / g) fail(where, "output channels are too many");
  const int64_t co = w[1] * g;
  if (in.size() == 3) in.expect_vector(2, co, "C_out");
  if (w[2] - 1 > kMaxElements / p.dilation_h || w[3] - 1 > kMaxElements / p.dilation_w)
    fail(where, "the dilated kernel is too large");
  const int64_t kh = static_cast<int64_t>(p.dilation_h) * (w[2] - 1) + 1;  // <= 2^40 + 1
  const int64_t kw = static_cast<int64_t>(p.dilation_w) * (w[3] - 1) + 1;
  const int64_t h = transposed_out(where, "height", x[2], p.stride_h, p.pad.top, p.pad.bottom, kh,
                                   p.output_padding_h);
  const int64_t wd = transposed_out(where, "width", x[3], p.stride_w, p.pad.left, p.pad.right, kw,
                                    p.output_padding_w);
  return {{x[0], co, h, wd}};
}

std::vector<Shape> pool2d(const std::string& where, const Pool2DParams& p, const Inputs& in) {
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  const int kind = static_cast<int>(p.kind);
  if (kind < 0 || kind > static_cast<int>(PoolKind::Average))
    fail(where, "field kind has unknown value " + std::to_string(kind));
  positive(where, "kernel_h", p.kernel_h);
  positive(where, "kernel_w", p.kernel_w);
  positive(where, "stride_h", p.stride_h);
  positive(where, "stride_w", p.stride_w);
  check_padding(where, "", p.pad, p.kernel_h, p.kernel_w, true);
  const int64_t h = window_out(where, "height", x[2], p.pad.top, p.pad.bottom, p.kernel_h, p.stride_h,
                               p.ceil_mode);
  const int64_t w = window_out(where, "width", x[3], p.pad.left, p.pad.right, p.kernel_w, p.stride_w,
                               p.ceil_mode);
  return {{x[0], x[1], h, w}};
}

std::vector<Shape> dense(const std::string& where, const DenseParams& p, const Inputs& in) {
  in.expect_count(2, 3);
  check_activation(where, "activation", p.activation);
  const Shape& x = in.with_rank(0, 2, "[N,F_in]");
  const Shape& w = in.with_rank(1, 2, "[F_out,F_in]");
  if (w[1] != x[1])
    fail(where, in.label(1) + " has " + std::to_string(w[1]) + " input features but input 0 has " +
                    std::to_string(x[1]));
  if (in.size() == 3) in.expect_vector(2, w[0], "F_out");
  return {{x[0], w[0]}};
}

std::vector<Shape> batchnorm(const std::string& where, const BatchNormParams& p, const Inputs& in) {
  in.expect_count(5, 5);
  check_activation(where, "activation", p.activation);
  if (!std::isfinite(p.epsilon) || p.epsilon < 0)
    fail(where, "field epsilon must be finite and >= 0 (got " + std::to_string(p.epsilon) + ")");
  const Shape& x = in[0];
  if (x.size() < 2) fail(where, "input 0 has shape " + str(x) + " but must have rank >= 2 [N,C,...]");
  for (size_t i = 1; i < 5; ++i) in.expect_vector(i, x[1], "C");
  return {x};
}

// An axis that keeps the batch: 1 <= axis <= rank - 1.
void check_axis(const std::string& where, int axis, size_t rank) {
  if (rank < 2)
    fail(where, "input 0 has rank " + std::to_string(rank) + " but must have rank >= 2");
  if (axis < 1 || axis > static_cast<int>(rank) - 1)
    fail(where, "field axis must be in [1, " + std::to_string(rank - 1) + "] (got " +
                    std::to_string(axis) + ")");
}

std::vector<Shape> flatten(const std::string& where, const FlattenParams& p, const Inputs& in) {
  in.expect_count(1, 1);
  const Shape& x = in[0];
  check_axis(where, p.axis, x.size());
  Shape out(x.begin(), x.begin() + p.axis);
  int64_t rest = 1;
  for (size_t i = static_cast<size_t>(p.axis); i < x.size(); ++i) rest *= x[i];  // <= numel(x)
  out.push_back(rest);
  return {out};
}

std::vector<Shape> reshape(const std::string& where, const ReshapeParams& p, const Inputs& in) {
  in.expect_count(1, 1);
  const Shape& x = in[0];
  if (x.empty()) fail(where, "input 0 is a scalar but must have a batch dimension");
  const int64_t per_sample = numel(x) / x[0];
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < p.shape.size(); ++i) {
    const int64_t d = p.shape[i];
    const std::string field = "field shape[" + std::to_string(i) + "]";
    if (d == -1) {
      if (unknown >= 0) fail(where, field + " is a second -1 (at most one dimension is inferred)");
      unknown = static_cast<int>(i);
    } else if (d < 1) {
      fail(where, field + " must be > 0 or -1 (got " + std::to_string(d) + ")");
    } else {
      if (d > kMaxElements / known) fail(where, "field shape has more than 2^40 elements");
      known *= d;
    }
  }
  Shape out;
  out.push_back(x[0]);
  out.insert(out.end(), p.shape.begin(), p.shape.end());
  if (unknown >= 0) {
    if (per_sample % known != 0)
      fail(where, "field shape " + str(p.shape) + " cannot hold " + std::to_string(per_sample) +
                      " elements per sample (input 0 is " + str(x) + ")");
    out[static_cast<size_t>(unknown) + 1] = per_sample / known;
  } else if (known != per_sample) {
    fail(where, "field shape " + str(p.shape) + " has " + std::to_string(known) +
                    " elements per sample but input 0 (" + str(x) + ") has " +
                    std::to_string(per_sample));
  }
  return {out};
}

std::vector<Shape> softmax(const std::string& where, const SoftmaxParams& p, const Inputs& in) {
  in.expect_count(1, 1);
  check_axis(where, p.axis, in[0].size());
  return {in[0]};
}

std::vector<Shape> add(const std::string& where, const AddParams& p, const Inputs& in) {
  in.expect_count(2, 2);
  check_activation(where, "activation", p.activation);
  if (in[0] != in[1])
    fail(where, "input 1 has shape " + str(in[1]) + " but input 0 has " + str(in[0]) +
                    " (add needs equal shapes)");
  return {in[0]};
}

// NumPy / ONNX multidirectional broadcasting. With `constant` (which inputs are constants; the loader,
// the builder and the session know it) also the batch rules of BinaryParams: activations have equal
// rank, and a constant never reaches the batch axis, so dim 0 of the output stays the batch.
std::vector<Shape> binary(const std::string& where, const BinaryParams& p, const Inputs& in,
                          const std::vector<bool>* constant) {
  in.expect_count(2, 2);
  check_activation(where, "activation", p.activation);
  const int k = static_cast<int>(p.kind);
  if (k < 0 || k > static_cast<int>(BinaryKind::Div))
    fail(where, "field kind has unknown value " + std::to_string(k));
  const Shape &a = in[0], &b = in[1];
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t da = d < rank - a.size() ? 1 : a[d - (rank - a.size())];
    const int64_t db = d < rank - b.size() ? 1 : b[d - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(where, "input 1 has shape " + str(b) + " which does not broadcast with input 0's " + str(a) +
                      " (dim " + std::to_string(d) + " of the aligned shapes: " + std::to_string(da) +
                      " vs " + std::to_string(db) + "; each pair must be equal or 1)");
    out[d] = da == 1 ? db : da;
  }
  if (constant && constant->size() == 2) {
    const bool ca = (*constant)[0], cb = (*constant)[1];
    if (ca && cb) fail(where, "both inputs are constants (at least one must be an activation)");
    if (!ca && !cb && a.size() != b.size())
      fail(where, "input 1 has rank " + std::to_string(b.size()) + " but input 0 has rank " +
                      std::to_string(a.size()) + " (activations must have equal rank: dim 0 is the batch)");
    const size_t act_rank = ca ? b.size() : a.size();
    for (size_t i = 0; i < 2; ++i) {
      if (!(*constant)[i]) continue;
      const Shape& c = in[i];
      if (c.size() > act_rank)
        fail(where, "input " + std::to_string(i) + " (constant) has shape " + str(c) + ", of rank above the " +
                        "activation's " + std::to_string(act_rank) + " (a constant may not add dims before the batch)");
      if (c.size() == act_rank && !c.empty() && c[0] != 1)
        fail(where, "input " + std::to_string(i) + " (constant) has shape " + str(c) + " with dim 0 " +
                        std::to_string(c[0]) + " (a constant's dim 0 is the batch axis and must be 1)");
    }
  }
  return {out};
}

std::vector<Shape> concat(const std::string& where, const ConcatParams& p, const Inputs& in) {
  in.expect_count(1, SIZE_MAX);
  const Shape& first = in[0];
  check_axis(where, p.axis, first.size());
  const size_t axis = static_cast<size_t>(p.axis);
  Shape out = first;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& s = in[i];
    bool same = s.size() == first.size();
    for (size_t d = 0; same && d < s.size(); ++d) same = d == axis || s[d] == first[d];
    if (!same)
      fail(where, "input " + std::to_string(i) + " has shape " + str(s) + " but input 0 has " +
                      str(first) + " (concat needs equal dims except axis " +
                      std::to_string(axis) + ")");
    if (s[axis] > kMaxElements - out[axis]) fail(where, "output has more than 2^40 elements");
    out[axis] += s[axis];
  }
  return {out};
}

// One spatial axis of a resize: out if > 0, else floor(in * scale) (scale finite and > 0), >= 1.
int64_t resize_out(const std::string& where, const char* axis, int64_t in, int out, float scale) {
  const std::string o = std::string("out_") + axis, s = std::string("scale_") + axis;
  if (out < 0) fail(where, "field " + o + " must be >= 0 (got " + std::to_string(out) + ")");
  if (!std::isfinite(scale) || scale < 0)
    fail(where, "field " + s + " must be finite and >= 0 (got " + std::to_string(scale) + ")");
  if (out > 0) return out;
  if (scale == 0) fail(where, "needs field " + o + " or " + s + " > 0");
  const double v = std::floor(double(in) * double(scale));
  if (v < 1 || v > double(kMaxElements))
    fail(where, "output " + std::string(axis == std::string("h") ? "height" : "width") + " floor(" +
                    std::to_string(in) + " * " + std::to_string(scale) + ") is not in [1, 2^40]");
  return static_cast<int64_t>(v);
}

std::vector<Shape> resize(const std::string& where, const ResizeParams& p, const Inputs& in) {
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  const auto in_range = [&](const char* field, int v, int hi) {
    if (v < 0 || v > hi) fail(where, std::string("field ") + field + " has unknown value " + std::to_string(v));
  };
  in_range("mode", static_cast<int>(p.mode), static_cast<int>(ResizeMode::Linear));
  in_range("coord", static_cast<int>(p.coord), static_cast<int>(ResizeCoord::PytorchHalfPixel));
  in_range("nearest", static_cast<int>(p.nearest), static_cast<int>(ResizeNearest::Ceil));
  Shape y{x[0], x[1], resize_out(where, "h", x[2], p.out_h, p.scale_h),
          resize_out(where, "w", x[3], p.out_w, p.scale_w)};
  std::string why;
  if (!bounded(y, &why, true)) fail(where, "output " + str(y) + ": " + why);
  return {y};
}

std::vector<Shape> depth_to_space(const std::string& where, const DepthToSpaceParams& p, const Inputs& in) {
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  if (p.block < 1 || p.block > 4096)
    fail(where, "field block must be in [1, 4096] (got " + std::to_string(p.block) + ")");
  const int mode = static_cast<int>(p.mode);
  if (mode < 0 || mode > static_cast<int>(DepthToSpaceMode::CRD))
    fail(where, "field mode has unknown value " + std::to_string(mode));
  const int64_t bb = int64_t(p.block) * p.block;
  if (x[1] % bb != 0)
    fail(where, "input 0 has " + std::to_string(x[1]) + " channels, not a multiple of block^2 = " +
                    std::to_string(bb));
  Shape y{x[0], x[1] / bb, x[2] * p.block, x[3] * p.block};  // same element count as x: bounded
  return {y};
}

std::vector<Shape> pad2d(const std::string& where, const Pad2DParams& p, const Inputs& in) {
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  const int mode = static_cast<int>(p.mode);
  if (mode < 0 || mode > static_cast<int>(PadMode::Edge))
    fail(where, "field mode has unknown value " + std::to_string(mode));
  if (!std::isfinite(p.value)) fail(where, "field value must be finite");
  check_padding(where, "", p.pad, 0, 0, false);
  if (p.mode == PadMode::Reflect) {  // a mirror never repeats the border: pad <= size - 1
    const struct { const char* name; int value; int64_t size; const char* axis; } sides[] = {
        {"top", p.pad.top, x[2], "height"}, {"left", p.pad.left, x[3], "width"},
        {"bottom", p.pad.bottom, x[2], "height"}, {"right", p.pad.right, x[3], "width"}};
    for (const auto& s : sides)
      if (s.value > 0 && s.value >= s.size)
        fail(where, std::string("field padding.") + s.name + " " + std::to_string(s.value) +
                        " must be < input " + s.axis + " " + std::to_string(s.size) +
                        " in reflect mode");
  }
  if ((p.mode == PadMode::Edge) && (x[2] == 0 || x[3] == 0) &&
      (p.pad.top || p.pad.left || p.pad.bottom || p.pad.right))
    fail(where, "edge padding needs a non-empty input plane (got " + str(x) + ")");
  const int64_t h = x[2] + p.pad.top + p.pad.bottom;  // x <= 2^40 and pads are int: no overflow
  const int64_t w = x[3] + p.pad.left + p.pad.right;
  return {{x[0], x[1], h, w}};
}

std::vector<Shape> instance_norm(const std::string& where, const InstanceNormParams& p,
                                 const Inputs& in) {
  in.expect_count(3, 3);
  check_activation(where, "activation", p.activation);
  if (!std::isfinite(p.epsilon) || p.epsilon < 0)
    fail(where, "field epsilon must be finite and >= 0 (got " + std::to_string(p.epsilon) + ")");
  const Shape& x = in[0];
  if (x.size() < 3) fail(where, "input 0 has shape " + str(x) + " but must have rank >= 3 [N,C,...]");
  for (size_t i = 1; i < 3; ++i) in.expect_vector(i, x[1], "C");
  return {x};
}

std::vector<Shape> channel_shuffle(const std::string& where, const ChannelShuffleParams& p,
                                   const Inputs& in) {
  in.expect_count(1, 1);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  positive(where, "groups", p.groups);
  if (x[1] % p.groups != 0)
    fail(where, "field groups " + std::to_string(p.groups) + " does not divide the " +
                    std::to_string(x[1]) + " channels of input 0");
  return {x};
}

std::vector<Shape> slice(const std::string& where, const SliceParams& p, const Inputs& in) {
  in.expect_count(1, 1);
  const Shape& x = in[0];
  check_axis(where, p.axis, x.size());
  const int64_t dim = x[static_cast<size_t>(p.axis)];
  if (p.start < 0 || p.start >= p.end || p.end > dim)
    fail(where, "fields start " + std::to_string(p.start) + ", end " + std::to_string(p.end) +
                    " must satisfy 0 <= start < end <= " + std::to_string(dim) + " (axis " +
                    std::to_string(p.axis) + " of input 0)");
  Shape out = x;
  out[static_cast<size_t>(p.axis)] = p.end - p.start;
  return {out};
}

// x [N,C,H,W], w1 [C_r,C,1,1], b1 [C_r], w2 [C,C_r,1,1], b2 [C] -> x's shape.
std::vector<Shape> squeeze_excite(const std::string& where, const SqueezeExciteParams& p, const Inputs& in) {
  in.expect_count(5, 5);
  check_activation(where, "hidden_activation", p.hidden_activation);
  check_activation(where, "gate_activation", p.gate_activation);
  check_activation(where, "activation", p.activation);
  const Shape& x = in.with_rank(0, 4, "[N,C,H,W]");
  const Shape& w1 = in.with_rank(1, 4, "[C_r,C,1,1]");
  const Shape& w2 = in.with_rank(3, 4, "[C,C_r,1,1]");
  const int64_t cr = w1[0];
  if (w1[1] != x[1] || w1[2] != 1 || w1[3] != 1 || cr < 1)
    fail(where, in.label(1) + " has shape " + str(w1) + " but must be [C_r," + std::to_string(x[1]) + ",1,1]");
  if (w2[0] != x[1] || w2[1] != cr || w2[2] != 1 || w2[3] != 1)
    fail(where, in.label(3) + " has shape " + str(w2) + " but must be [" + std::to_string(x[1]) + "," +
                    std::to_string(cr) + ",1,1]");
  in.expect_vector(2, cr, "C_r");
  in.expect_vector(4, x[1], "C");
  return {x};
}

std::vector<Shape> dispatch(const OpParams& params, const Inputs& in, const std::string& where,
                            const std::vector<bool>* constant) {
  switch (op_type(params)) {
    case OpType::Conv2D: return conv2d(where, std::get<Conv2DParams>(params), in);
    case OpType::ConvTranspose2D:
      return conv_transpose2d(where, std::get<ConvTranspose2DParams>(params), in);
    case OpType::Pool2D: return pool2d(where, std::get<Pool2DParams>(params), in);
    case OpType::Dense: return dense(where, std::get<DenseParams>(params), in);
    case OpType::BatchNorm: return batchnorm(where, std::get<BatchNormParams>(params), in);
    case OpType::Activation: {
      in.expect_count(1, 1);
      check_activation(where, "kind", std::get<ActivationParams>(params).activation);
      return {in[0]};
    }
    case OpType::Flatten: return flatten(where, std::get<FlattenParams>(params), in);
    case OpType::Reshape: return reshape(where, std::get<ReshapeParams>(params), in);
    case OpType::Softmax: return softmax(where, std::get<SoftmaxParams>(params), in);
    case OpType::Add: return add(where, std::get<AddParams>(params), in);
    case OpType::Concat: return concat(where, std::get<ConcatParams>(params), in);
    case OpType::ConvPool2D: return conv_pool2d(where, std::get<ConvPool2DParams>(params), in);
    case OpType::Binary: return binary(where, std::get<BinaryParams>(params), in, constant);
    case OpType::Pad2D: return pad2d(where, std::get<Pad2DParams>(params), in);
    case OpType::InstanceNorm:
      return instance_norm(where, std::get<InstanceNormParams>(params), in);
    case OpType::ChannelShuffle:
      return channel_shuffle(where, std::get<ChannelShuffleParams>(params), in);
    case OpType::Slice: return slice(where, std::get<SliceParams>(params), in);
    case OpType::Resize: return resize(where, std::get<ResizeParams>(params), in);
    case OpType::DepthToSpace: return depth_to_space(where, std::get<DepthToSpaceParams>(params), in);
    case OpType::Layout: {
      in.expect_count(1, 1);
      if (in[0].size() != 4) fail(where, "layout conversion needs a 4-D input, got " + str(in[0]));
      return {in[0]};
    }
    case OpType::SqueezeExcite:
      return squeeze_excite(where, std::get<SqueezeExciteParams>(params), in);
  }
  fail(where, "unknown op");
}

std::vector<const char*> input_roles(OpType op) {
  switch (op) {
    case OpType::Conv2D:
    case OpType::ConvTranspose2D:
    case OpType::ConvPool2D:
    case OpType::Dense: return {nullptr, "weight", "bias"};
    case OpType::BatchNorm: return {nullptr, "scale", "bias", "mean", "var"};
    case OpType::InstanceNorm: return {nullptr, "scale", "bias"};
    case OpType::SqueezeExcite: return {nullptr, "w1", "b1", "w2", "b2"};
    default: return {};
  }
}

bool same_declared(const Shape& declared, const Shape& computed) {
  if (declared.size() != computed.size()) return false;
  for (size_t i = 0; i < declared.size(); ++i)
    if (declared[i] != computed[i] && !(i == 0 && declared[i] == -1)) return false;
  return true;
}

}  // namespace

std::vector<Shape> infer_node_shapes(const OpParams& params, const std::vector<Shape>& input_shapes,
                                     const std::string& where, const std::vector<bool>* constant,
                                     bool allow_empty) {
  Inputs in(where, input_shapes, input_roles(op_type(params)));
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    std::string why;
    if (!bounded(input_shapes[i], &why, allow_empty))
      fail(where, in.label(i) + " has shape " + str(input_shapes[i]) + ": " + why);
  }
  std::vector<Shape> out = dispatch(params, in, where, constant);
  for (const Shape& s : out) {
    std::string why;
    if (!bounded(s, &why, allow_empty)) fail(where, "output shape " + str(s) + ": " + why);
  }
  return out;
}

bool is_parameter_input(OpType op, size_t i) {
  switch (op) {
    case OpType::Conv2D:
    case OpType::ConvTranspose2D:
    case OpType::ConvPool2D:
    case OpType::Dense:
    case OpType::BatchNorm:
    case OpType::InstanceNorm:
    case OpType::SqueezeExcite: return i >= 1;
    default: return false;
  }
}

std::vector<Shape> infer_shapes(const Graph& graph, int64_t batch) {
  if (batch < 1 || batch > kMaxElements)
    fail(graph.origin, "batch must be in [1, 2^40] (got " + std::to_string(batch) + ")");
  const size_t n = graph.values.size();
  std::vector<Shape> shapes(n);
  std::vector<char> known(n, 0);
  auto with_batch = [batch](Shape s) {
    if (!s.empty() && s[0] == -1) s[0] = batch;
    return s;
  };
  for (size_t i = 0; i < n; ++i) {
    shapes[i] = with_batch(graph.values[i].shape);
    known[i] = graph.values[i].is_constant();
  }
  for (int id : graph.inputs) {
    if (id < 0 || static_cast<size_t>(id) >= n)
      fail(graph.origin, "model input " + std::to_string(id) + " is out of range");
    known[static_cast<size_t>(id)] = 1;
  }

  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const Node& node = graph.nodes[k];
    // The loader names unnamed nodes "node k"; don't say that twice.
    const std::string label = "node " + std::to_string(k);
    const std::string where = graph.origin + ": " + label +
                              (node.name == label ? "" : " '" + node.name + "'") + " (" +
                              op_name(node.op()) + ")";
    std::vector<Shape> in;
    std::vector<bool> constant;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int id = node.inputs[i];
      if (id < 0 || static_cast<size_t>(id) >= n)
        fail(where, "input " + std::to_string(i) + " is tensor " + std::to_string(id) +
                        ", out of range");
      if (!known[static_cast<size_t>(id)])
        fail(where, "input " + std::to_string(i) + " '" + graph.values[static_cast<size_t>(id)].name +
                        "' has no value yet (not a model input, constant or earlier node's output)");
      in.push_back(shapes[static_cast<size_t>(id)]);
      constant.push_back(graph.values[static_cast<size_t>(id)].is_constant());
    }
    std::vector<Shape> out = infer_node_shapes(node.params, in, where, &constant);
    if (out.size() != node.outputs.size())
      fail(where, "has " + std::to_string(node.outputs.size()) + " outputs but " +
                      op_name(node.op()) + " produces " + std::to_string(out.size()));
    for (size_t o = 0; o < out.size(); ++o) {
      const int id = node.outputs[o];
      if (id < 0 || static_cast<size_t>(id) >= n)
        fail(where, "output " + std::to_string(o) + " is tensor " + std::to_string(id) +
                        ", out of range");
      const Value& v = graph.values[static_cast<size_t>(id)];
      if (!same_declared(v.shape, out[o]))
        fail(where, "output " + std::to_string(o) + " '" + v.name + "' is declared " +
                        str(v.shape) + " but the op computes " + str(out[o]));
      shapes[static_cast<size_t>(id)] = out[o];
      known[static_cast<size_t>(id)] = 1;
    }
  }
  return shapes;
}

}  // namespace infer::detail
