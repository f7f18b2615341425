// Helpers shared by the test suites: seeded random data, NaN poisoning (so unwritten outputs fail),
// the relative error ||out - ref|| / ||ref|| that DESIGN.md's tolerances are stated in, random
// op shapes shared by the cpu and cuda kernel tests, and the kernel variant the session's default
// heuristic picks for a node.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/src/kernel_api.h"

namespace infer::test {

// The variant of `op` on `backend` that the session's heuristic picks for `node`: the applicable one
// with the highest priority (priority_for when set), ties to the registry's order, as
// engine/src/session.cc chooses. "" when none applies.
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

// A random fused activation (every kind, leaky slope 0.1) for the random-case generators.
inline Activation random_activation(std::mt19937_64& rng) {
  Activation a;
  a.kind = static_cast<ActivationKind>(rng() % 5);
  a.alpha = 0.1f;
  return a;
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

}  // namespace infer::test
