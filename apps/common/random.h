// Seeded random numbers of the `infer` CLI and the Python package: inputs without --input
// (random_input.h) and the latents of `infer eval`.
// std::mt19937_64 (specified bit for bit by the standard) with our own conversions, not <random>'s
// distributions, so a seed gives the same numbers on every platform and compiler.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace infer::cli {

class SeededRandom {
 public:
  explicit SeededRandom(uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return double(engine_() >> 11) * 0x1.0p-53; }

  // Uniform in [-1, 1): 24 random bits, so every value is exactly a float.
  float uniform_pm1() { return float(double(engine_() >> 40) * 0x1.0p-23 - 1.0); }

  // Standard normal by Box-Muller, both values of each pair used.
  float normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    constexpr double kPi = 3.14159265358979323846;
    const double u1 = 1.0 - uniform01();  // (0, 1]: log is finite
    const double u2 = uniform01();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * kPi * u2;
    spare_ = float(r * std::sin(angle));
    have_spare_ = true;
    return float(r * std::cos(angle));
  }

 private:
  std::mt19937_64 engine_;
  bool have_spare_ = false;
  float spare_ = 0;
};

}  // namespace infer::cli
