// Helpers shared by the test suites: seeded random data, NaN poisoning (so unwritten outputs fail),
// and the relative error ||out - ref|| / ||ref|| that DESIGN.md's tolerances are stated in.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace infer::test {

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
