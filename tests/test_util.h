// Helpers shared by the test suites: seeded random data, NaN poisoning (so unwritten outputs fail),
// the relative error ||out - ref|| / ||ref|| that DESIGN.md's tolerances are stated in, and the
// kernel variant the session's default heuristic picks for a node.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_api.h"

namespace infer::test {

// The variant of `op` on `backend` that the session's heuristic picks for `node`: the applicable one
// with the highest priority (priority_for when set), ties to the registry's order, as
// engine/src/session.cc chooses. "" when none applies.
inline std::string default_variant(const std::string& backend, const std::string& op, const NodeDesc& node) {
  const KernelVariant* chosen = nullptr;
  int best = 0;
  for (const KernelVariant* v : KernelRegistry::global().variants(backend, op)) {
    if (v->applicable && !v->applicable(node)) continue;
    const int priority = v->priority_for ? v->priority_for(node) : v->priority;
    if (!chosen || priority > best) chosen = v, best = priority;
  }
  return chosen ? chosen->name : std::string();
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
