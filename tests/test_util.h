// Helpers shared by the test suites: seeded random data, NaN poisoning (so unwritten outputs fail),
// the relative error ||out - ref|| / ||ref|| that docs/design.md's tolerances are stated in, random
// op shapes shared by the cpu and cuda kernel tests (grouped conv2d and conv_transpose2d among them),
// the kernel variant the session's default heuristic picks for a node, a NodeDesc from parameters and
// input shapes, and a session's pass-log line by pass name.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "infer/kernel.h"
#include "engine/src/shape_inference.h"
#include "infer/error.h"
#include "infer/session.h"

namespace infer::test {

// The variant of `op` on `backend` that the session's heuristic picks for `node`: the applicable one
// with the highest priority (priority_for when set), ties to the registry's order, as
// engine/src/kernel_selection.cc chooses. "" when none applies.
inline std::string default_variant(const std::string& backend, const std::string& op, const NodeDesc& node) {
  const KernelVariant* chosen = nullptr;
  int best = 0;
  for (const KernelVariant* v : KernelRegistry::global().variants(backend, op)) {
    if (!variant_applies(*v, node)) continue;
    const int priority = v->priority_for ? v->priority_for(node) : v->priority;
    if (!chosen || priority > best) chosen = v, best = priority;
  }
  return chosen ? chosen->name : std::string();
}

// Activation i of a fixed list of kActivationCases: every kind once with typical parameters (leaky
// slope 0.1, ReLU6 = Clip(0, 6), HardSigmoid(0.2, 0.5) as ONNX's default, Elu 0.7), then Clip and
// HardSigmoid again with bounds inside the random data's range. The first kBoundedActivationCases
// are defined and finite on any finite input of moderate size; exp (overflows fp16 past 11) and sqrt
// (NaN below 0) come last, for tests that choose their inputs.
constexpr int kActivationCases = 17;
constexpr int kBoundedActivationCases = 15;
inline Activation activation_case(int i) {
  struct Case { ActivationKind kind; float alpha, beta; };
  static const Case cases[kActivationCases] = {
      {ActivationKind::None, 0.01f, 0.f},        {ActivationKind::Relu, 0.01f, 0.f},
      {ActivationKind::LeakyRelu, 0.1f, 0.f},    {ActivationKind::Tanh, 0.01f, 0.f},
      {ActivationKind::Sigmoid, 0.01f, 0.f},     {ActivationKind::Clip, 0.f, 6.f},
      {ActivationKind::HardSigmoid, 0.2f, 0.5f}, {ActivationKind::HardSwish, 0.01f, 0.f},
      {ActivationKind::Silu, 0.01f, 0.f},        {ActivationKind::Elu, 0.7f, 0.f},
      {ActivationKind::Neg, 0.01f, 0.f},         {ActivationKind::Abs, 0.01f, 0.f},
      {ActivationKind::Softplus, 0.01f, 0.f},    {ActivationKind::Clip, -0.3f, 0.45f},
      {ActivationKind::HardSigmoid, 1.f / 6.f, 0.5f},
      {ActivationKind::Exp, 0.01f, 0.f},         {ActivationKind::Sqrt, 0.01f, 0.f}};
  const Case& c = cases[((i % kActivationCases) + kActivationCases) % kActivationCases];
  return Activation{c.kind, c.alpha, c.beta};
}

// A random fused activation (one of the bounded cases above) for the random-case generators.
inline Activation random_activation(std::mt19937_64& rng) {
  return activation_case(int(rng() % kBoundedActivationCases));
}

// A uniform integer in [lo, hi] (inclusive) for the random-shape generators.
inline int uniform(std::mt19937_64& rng, int lo, int hi) {
  return lo + int(rng() % uint64_t(hi - lo + 1));
}

// A random resize: nearest or linear, every coordinate and rounding mode, x [1-3, 1-20, 1-13, 1-13]
// and either an explicit output size (1-29, so up- and downscaling) or scales in [0.3, 3.5] (integer
// factors one time in three); y from floor(in * scale), written out here independently.
struct RandomResize {
  ResizeParams p;
  Shape x, y;
};
inline RandomResize random_resize(std::mt19937_64& rng) {
  RandomResize r;
  ResizeParams& p = r.p;
  p.mode = static_cast<ResizeMode>(rng() % 2);
  p.coord = static_cast<ResizeCoord>(rng() % 4);
  p.nearest = static_cast<ResizeNearest>(rng() % 4);
  const int64_t N = uniform(rng, 1, 3), C = uniform(rng, 1, 20);
  const int64_t H = uniform(rng, 1, 13), W = uniform(rng, 1, 13);
  int64_t HO, WO;
  if (rng() % 2) {
    HO = p.out_h = uniform(rng, 1, 29);
    WO = p.out_w = uniform(rng, 1, 29);
  } else {
    const auto scale = [&](int64_t in, float* s) {
      do {
        *s = rng() % 3 == 0 ? float(uniform(rng, 1, 3)) : 0.3f + float(rng() % 1000) * 0.0032f;
      } while (std::floor(double(in) * *s) < 1);
      return int64_t(std::floor(double(in) * *s));
    };
    HO = scale(H, &p.scale_h);
    WO = scale(W, &p.scale_w);
  }
  r.x = {N, C, H, W};
  r.y = {N, C, HO, WO};
  return r;
}

// A random pool2d (max or average, kernel 1-5, strides 1-3, asymmetric padding < kernel,
// count_include_pad and ceil_mode either way) on x [1-3, 1-20, 1-17, 1-17] and its output shape y
// (ceil_mode: PyTorch's pooling_output_shape, written out here independently of shape inference).
// A random grouped (depthwise: groups == C_in, multiplier 1..3) and often dilated conv2d: kernel 1-5,
// strides 1-3, dilation 1-3, asymmetric padding < the dilated kernel, odd channels per group, batch
// 1..3, bias or not, any fused activation. vector_channels (the CUDA tests) also draws depthwise
// channel counts that are multiples of 4, the NHWC vector path.
struct RandomGroupedConv {
  Conv2DParams p;
  std::vector<Shape> inputs;  // x, weight and (3 draws in 4) bias
  Shape y;
};
inline RandomGroupedConv random_grouped_conv2d_shapes(std::mt19937_64& rng, bool depthwise,
                                                      bool vector_channels) {
  RandomGroupedConv r;
  Conv2DParams& p = r.p;
  const int kh = uniform(rng, 1, 5), kw = rng() % 4 == 0 ? uniform(rng, 1, 5) : kh;
  p.stride_h = uniform(rng, 1, 3);
  p.stride_w = rng() % 4 == 0 ? uniform(rng, 1, 3) : p.stride_h;
  p.dilation_h = rng() % 2 == 0 ? 1 : uniform(rng, 2, 3);
  p.dilation_w = rng() % 4 == 0 ? uniform(rng, 1, 3) : p.dilation_h;
  const int ekh = p.dilation_h * (kh - 1) + 1, ekw = p.dilation_w * (kw - 1) + 1;
  p.pad.top = uniform(rng, 0, ekh - 1);
  p.pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, ekh - 1) : p.pad.top;
  p.pad.left = uniform(rng, 0, ekw - 1);
  p.pad.right = rng() % 3 == 0 ? uniform(rng, 0, ekw - 1) : p.pad.left;
  p.activation = random_activation(rng);
  const int64_t N = uniform(rng, 1, 3);
  int64_t G, CG, COG;
  if (depthwise) {
    G = vector_channels && rng() % 2 ? 4 * uniform(rng, 1, 12) : uniform(rng, 2, 40);
    CG = 1;
    COG = rng() % 3 == 0 ? uniform(rng, 2, 3) : 1;
  } else {
    G = uniform(rng, 2, 5), CG = uniform(rng, 1, 7), COG = uniform(rng, 1, 7);
  }
  p.groups = static_cast<int>(G);
  int64_t H, W;
  do {
    H = uniform(rng, 1, 19), W = uniform(rng, 1, 19);
  } while (H + p.pad.top + p.pad.bottom < ekh || W + p.pad.left + p.pad.right < ekw);
  r.y = {N, G * COG, (H + p.pad.top + p.pad.bottom - ekh) / p.stride_h + 1,
         (W + p.pad.left + p.pad.right - ekw) / p.stride_w + 1};
  r.inputs = {{N, G * CG, H, W}, {G * COG, CG, kh, kw}};
  if (rng() % 4 != 0) r.inputs.push_back({G * COG});
  return r;
}

// A random grouped and often dilated conv_transpose2d: groups 1, 2 or C_in (depthwise-transposed,
// 1..3 outputs per group) by t % 3; kernel 1-5, strides 1-4, dilation 1-3 (2 or 3 in two draws of
// three, per axis sometimes different), asymmetric padding < the dilated kernel, output_padding <
// max(stride, dilation), odd channel counts, batch 1..3, H and W 1..11 (the output at least 1x1),
// bias in 3 draws of 4, a bounded fused activation. Weight [C_in, C_out/groups, KH, KW].
struct RandomGroupedTconv {
  ConvTranspose2DParams p;
  std::vector<Shape> inputs;  // x, weight and maybe bias
  Shape y;
};
inline RandomGroupedTconv random_grouped_conv_transpose2d_shapes(std::mt19937_64& rng, int t) {
  for (;;) {
    RandomGroupedTconv r;
    ConvTranspose2DParams& p = r.p;
    const int kh = uniform(rng, 1, 5), kw = rng() % 3 == 0 ? uniform(rng, 1, 5) : kh;
    p.stride_h = uniform(rng, 1, 4);
    p.stride_w = rng() % 3 == 0 ? uniform(rng, 1, 4) : p.stride_h;
    p.dilation_h = rng() % 3 == 0 ? 1 : uniform(rng, 2, 3);
    p.dilation_w = rng() % 4 == 0 ? uniform(rng, 1, 3) : p.dilation_h;
    const int ekh = p.dilation_h * (kh - 1) + 1, ekw = p.dilation_w * (kw - 1) + 1;
    p.pad.top = uniform(rng, 0, ekh - 1);
    p.pad.bottom = rng() % 3 == 0 ? uniform(rng, 0, ekh - 1) : p.pad.top;
    p.pad.left = uniform(rng, 0, ekw - 1);
    p.pad.right = rng() % 3 == 0 ? uniform(rng, 0, ekw - 1) : p.pad.left;
    p.output_padding_h = uniform(rng, 0, std::max(p.stride_h, p.dilation_h) - 1);
    p.output_padding_w = uniform(rng, 0, std::max(p.stride_w, p.dilation_w) - 1);
    p.activation = random_activation(rng);
    int64_t G, CIG, COG;
    switch (t % 3) {
      case 0: G = 1, CIG = uniform(rng, 1, 9), COG = uniform(rng, 1, 9); break;
      case 1: G = 2, CIG = uniform(rng, 1, 7), COG = uniform(rng, 1, 7); break;
      default: G = uniform(rng, 2, 24), CIG = 1, COG = rng() % 3 == 0 ? uniform(rng, 2, 3) : 1; break;
    }
    p.groups = static_cast<int>(G);
    const int64_t N = uniform(rng, 1, 3), H = uniform(rng, 1, 11), W = uniform(rng, 1, 11);
    const int64_t HO = (H - 1) * p.stride_h - p.pad.top - p.pad.bottom + ekh + p.output_padding_h;
    const int64_t WO = (W - 1) * p.stride_w - p.pad.left - p.pad.right + ekw + p.output_padding_w;
    if (HO < 1 || WO < 1) continue;
    r.inputs = {{N, G * CIG, H, W}, {G * CIG, COG, kh, kw}};
    if (rng() % 4 != 0) r.inputs.push_back({G * COG});
    r.y = {N, G * COG, HO, WO};
    return r;
  }
}

// [N,C,H,W] data -> [N,H,W,C] and back (the NHWC kernels' tests feed and read channels-last buffers).
inline std::vector<float> to_nhwc(const std::vector<float>& x, const Shape& s) {
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < HW; ++p) y[size_t((n * HW + p) * C + c)] = x[size_t((n * C + c) * HW + p)];
  return y;
}
inline std::vector<float> to_nchw(const std::vector<float>& x, const Shape& s) {
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < HW; ++p) y[size_t((n * C + c) * HW + p)] = x[size_t((n * HW + p) * C + c)];
  return y;
}

struct RandomPool2D {
  Pool2DParams p;
  Shape x, y;
};
inline RandomPool2D random_pool2d(std::mt19937_64& rng) {
  RandomPool2D r;
  Pool2DParams& p = r.p;
  p.kind = rng() % 2 ? PoolKind::Max : PoolKind::Average;
  p.kernel_h = uniform(rng, 1, 5);
  p.kernel_w = rng() % 3 == 0 ? uniform(rng, 1, 5) : p.kernel_h;
  p.stride_h = uniform(rng, 1, 3);
  p.stride_w = rng() % 3 == 0 ? uniform(rng, 1, 3) : p.stride_h;
  p.pad.top = uniform(rng, 0, p.kernel_h - 1);
  p.pad.bottom = uniform(rng, 0, p.kernel_h - 1);
  p.pad.left = uniform(rng, 0, p.kernel_w - 1);
  p.pad.right = uniform(rng, 0, p.kernel_w - 1);
  p.count_include_pad = rng() % 2;
  p.ceil_mode = rng() % 2;
  const int64_t N = uniform(rng, 1, 3), C = uniform(rng, 1, 20);
  int64_t H, W;
  do {
    H = uniform(rng, 1, 17), W = uniform(rng, 1, 17);
  } while (H + p.pad.top + p.pad.bottom < p.kernel_h || W + p.pad.left + p.pad.right < p.kernel_w);
  const auto out = [&](int64_t in, int pad_a, int pad_b, int k, int s) {
    if (!p.ceil_mode) return (in + pad_a + pad_b - k) / s + 1;
    int64_t o = (in + pad_a + pad_b - k + s - 1) / s + 1;
    return (o - 1) * s >= in + pad_a ? o - 1 : o;
  };
  const int64_t HO = out(H, p.pad.top, p.pad.bottom, p.kernel_h, p.stride_h);
  const int64_t WO = out(W, p.pad.left, p.pad.right, p.kernel_w, p.stride_w);
  r.x = {N, C, H, W};
  r.y = {N, C, HO, WO};
  return r;
}

inline std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline void poison(std::vector<float>& v) {
  for (auto& x : v) x = std::numeric_limits<float>::quiet_NaN();
}

// ||a - b|| / ||b||; NaN anywhere in a gives NaN (so `CHECK(rel_error(..) <= tol)` fails).
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

inline bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// A random binary node (every kind, a random fused activation) on a random broadcast pair: y has
// rank min_rank..max_rank (odd sizes); b is the same shape, a scalar [1], per-channel [1,C,1,..] or
// [C,1,..], a squeeze-excitation gate [N,C,1,..], or each dim kept or 1 with leading ones dropped;
// sometimes a broadcasts too, and sometimes the broadcast operand comes first (Sub, Div are not
// symmetric). y is the broadcast of a and b. `b_first`: the operands were swapped.
struct RandomBinary {
  BinaryParams p;
  Shape a, b, y;
  bool b_first = false;
};
inline RandomBinary random_binary(std::mt19937_64& rng, int t, int min_rank = 1, int max_rank = 5) {
  RandomBinary r;
  r.p.kind = static_cast<BinaryKind>(t % 4);
  r.p.activation = random_activation(rng);
  Shape full;
  const int rank = uniform(rng, min_rank, max_rank);
  for (int d = 0; d < rank; ++d) full.push_back(uniform(rng, 1, d == 0 ? 3 : 13));
  auto pick = [&](int pattern) {
    Shape s = full;
    const size_t n = s.size();
    switch (pattern) {
      case 0: return s;
      case 1: return Shape{1};
      case 2:
        for (size_t d = 0; d < n; ++d)
          if (d != 1) s[d] = 1;
        return s;
      case 3:
        if (n >= 2) {
          Shape q(s.begin() + 1, s.end());
          for (size_t d = 1; d < q.size(); ++d) q[d] = 1;
          return q;
        }
        return s;
      case 4:
        for (size_t d = 2; d < n; ++d) s[d] = 1;
        return s;
      default:
        for (size_t d = 0; d < n; ++d)
          if (rng() % 2) s[d] = 1;
        while (s.size() > 1 && rng() % 3 == 0) s.erase(s.begin());
        return s;
    }
  };
  r.a = t % 7 == 6 ? pick(5) : full;
  r.b = pick(uniform(rng, 0, 5));
  if (t % 4 == 3) std::swap(r.a, r.b), r.b_first = true;
  const size_t n = std::max(r.a.size(), r.b.size());
  r.y.assign(n, 1);
  for (size_t d = 0; d < n; ++d) {
    const int64_t da = d + r.a.size() >= n ? r.a[d + r.a.size() - n] : 1;
    const int64_t db = d + r.b.size() >= n ? r.b[d + r.b.size() - n] : 1;
    r.y[d] = std::max(da, db);
  }
  return r;
}

// Divisors away from 0 (|v| >= 0.5), so that Div cases compare well-conditioned values.
inline void keep_from_zero(std::vector<float>& v) {
  for (float& x : v) x = x < 0 ? x - 0.5f : x + 0.5f;
}

// The shape rule's one-line error for a node with these input shapes (where: "m.fb: node 1 '<name>'"),
// or "" when the rule accepts them.
inline std::string shape_error(const OpParams& p, const std::vector<Shape>& in, const std::string& name = "n") {
  try {
    detail::infer_node_shapes(p, in, "m.fb: node 1 '" + name + "'");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A node of `params` on inputs of these shapes (NCHW, no constants), its output shape from the op's
// shape rule (empty tensors allowed).
inline NodeDesc shaped_node(OpParams params, std::vector<Shape> inputs) {
  NodeDesc node;
  node.params = std::move(params);
  node.input_shapes = std::move(inputs);
  node.output_shapes = detail::infer_node_shapes(node.params, node.input_shapes, "test", nullptr, true);
  node.constants.assign(node.input_shapes.size(), nullptr);
  return node;
}

// The line pass `name` logged in a session ("name: ..."), or "" when it logged none.
inline std::string pass_line(const Session& s, const std::string& name) {
  for (const std::string& l : s.passes())
    if (l.rfind(name + ":", 0) == 0) return l;
  return "";
}

// Runs the cpu variant `name` of node's op on host inputs (activations and constants in node order),
// its output and workspace poisoned with NaN first; returns the output.
inline std::vector<float> run_cpu_variant(const std::string& name, const NodeDesc& node,
                                          const std::vector<std::vector<float>>& inputs) {
  const std::string op = op_name(op_type(node.params));
  const KernelVariant* v = KernelRegistry::global().find("cpu", op, name);
  if (!v) throw Error("no variant cpu/" + op + "/" + name);
  std::vector<float> out(static_cast<size_t>(shape_numel(node.output_shapes.at(0))));
  poison(out);
  std::vector<float> workspace(v->workspace_bytes ? v->workspace_bytes(node) / sizeof(float) + 1 : 0);
  poison(workspace);
  KernelCall call{node, {}, {out.data()}, workspace.empty() ? nullptr : workspace.data()};
  for (const auto& in : inputs) call.inputs.push_back(in.data());
  v->run(call);
  return out;
}

}  // namespace infer::test
