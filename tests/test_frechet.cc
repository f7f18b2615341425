// Tests of the Fréchet distance's numerics (apps/common/frechet.h) on matrices with known answers:
// square roots of diagonal and rotated matrices, the 2x2 closed form tr((S1 S2)^(1/2)) =
// sqrt(tr(S1 S2) + 2 sqrt(det S1 det S2)) for non-commuting S1, S2, isotropic Gaussians
// (d² = |mu1 - mu2|² + n (s1 - s2)²), a singular (rank-1) covariance, and the feature statistics
// (mean, unbiased covariance, independence of batching, large offsets).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "frechet.h"
#include "infer/error.h"

using namespace infer;

namespace {

std::vector<double> diag(const std::vector<double>& d) {
  const size_t n = d.size();
  std::vector<double> m(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) m[i * n + i] = d[i];
  return m;
}

std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b, size_t n) {
  std::vector<double> c(n * n, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < n; ++k)
      for (size_t j = 0; j < n; ++j) c[i * n + j] += a[i * n + k] * b[k * n + j];
  return c;
}

std::vector<double> transpose(const std::vector<double>& a, size_t n) {
  std::vector<double> t(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) t[j * n + i] = a[i * n + j];
  return t;
}

// A random symmetric positive definite n x n matrix G G^T / n + 0.1 I.
std::vector<double> random_spd(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> g(n * n);
  for (double& v : g) v = normal(rng);
  std::vector<double> s = matmul(g, transpose(g, n), n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) s[i * n + j] = s[i * n + j] / double(n) + (i == j ? 0.1 : 0.0);
  return s;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("sqrt_psd: diagonal, rotated and random matrices") {
  CHECK(max_abs_diff(sqrt_psd(diag({4, 9, 0, 2.25}), 4), diag({2, 3, 0, 1.5})) < 1e-14);

  // Q diag(1, 4, 9) Q^T with Q a rotation about the z axis by 30 degrees: root Q diag(1, 2, 3) Q^T.
  const double c = std::cos(M_PI / 6), s = std::sin(M_PI / 6);
  const std::vector<double> q = {c, -s, 0, s, c, 0, 0, 0, 1};
  const std::vector<double> m = matmul(matmul(q, diag({1, 4, 9}), 3), transpose(q, 3), 3);
  const std::vector<double> root = matmul(matmul(q, diag({1, 2, 3}), 3), transpose(q, 3), 3);
  CHECK(max_abs_diff(sqrt_psd(m, 3), root) < 1e-13);

  const std::vector<double> spd = random_spd(40, 1);
  const std::vector<double> r = sqrt_psd(spd, 40);
  CHECK(max_abs_diff(matmul(r, r, 40), spd) < 1e-12);
  CHECK(max_abs_diff(r, transpose(r, 40)) < 1e-13);  // the root is symmetric
}

TEST_CASE("trace_sqrt_product: commuting, non-commuting 2x2 closed form, singular") {
  // Diagonal (commuting): sum of sqrt(a_i b_i).
  CHECK(trace_sqrt_product(diag({1, 4, 9}), diag({4, 1, 1}), 3) == doctest::Approx(2 + 2 + 3).epsilon(1e-14));

  // S1 = [[2,1],[1,2]], S2 = diag(3,1): S1 S2 = [[6,1],[3,2]], tr 8, det S1 det S2 = 9, so
  // tr((S1 S2)^(1/2)) = sqrt(8 + 2 * 3) = sqrt(14). S1 and S2 do not commute.
  const std::vector<double> s1 = {2, 1, 1, 2}, s2 = diag({3, 1});
  CHECK(max_abs_diff(matmul(s1, s2, 2), matmul(s2, s1, 2)) > 1);
  CHECK(trace_sqrt_product(s1, s2, 2) == doctest::Approx(std::sqrt(14.0)).epsilon(1e-14));
  CHECK(trace_sqrt_product(s2, s1, 2) == doctest::Approx(std::sqrt(14.0)).epsilon(1e-14));

  // Rank 1: S1 = v v^T with v = (1, 2, 2), S2 = I: (S1 S2)^(1/2) = v v^T / |v|, trace |v| = 3. S1's two
  // zero eigenvalues come out of LAPACK as +-1e-16; taken at face value their roots (1e-8) would miss
  // these bounds.
  const std::vector<double> vvt = {1, 2, 2, 2, 4, 4, 2, 4, 4};
  CHECK(trace_sqrt_product(vvt, diag({1, 1, 1}), 3) == doctest::Approx(3.0).epsilon(1e-12));
  CHECK(trace_sqrt_product(diag({1, 1, 1}), vvt, 3) == doctest::Approx(3.0).epsilon(1e-12));
  CHECK(trace_sqrt_product(vvt, vvt, 3) == doctest::Approx(9.0).epsilon(1e-12));  // tr(S1) when equal
}

TEST_CASE("frechet_distance: isotropic Gaussians, equal distributions, singular covariance") {
  // N(mu1, s1² I) against N(mu2, s2² I) in n dimensions: |mu1 - mu2|² + n (s1 - s2)².
  const int64_t n = 5;
  const std::vector<double> mu1 = {0, 1, 2, 3, 4}, mu2 = {1, 1, 0, 3, 4};
  const FrechetDistance f = frechet_distance(mu1, diag(std::vector<double>(n, 4.0)), mu2,
                                             diag(std::vector<double>(n, 0.25)), n);
  CHECK(f.mean_term == doctest::Approx(1 + 4).epsilon(1e-14));
  CHECK(f.cov_term == doctest::Approx(n * (2 - 0.5) * (2 - 0.5)).epsilon(1e-13));
  CHECK(f.distance == doctest::Approx(5 + 11.25).epsilon(1e-13));

  // A distribution against itself: 0 (up to rounding, relative to the traces).
  const std::vector<double> s = random_spd(30, 2);
  const std::vector<double> mu(30, 0.5);
  const FrechetDistance same = frechet_distance(mu, s, mu, s, 30);
  double trace = 0;
  for (int i = 0; i < 30; ++i) trace += s[size_t(i * 30 + i)];
  CHECK(same.mean_term == 0);
  CHECK(std::abs(same.cov_term) < 1e-12 * trace);
  CHECK(same.distance >= 0);
  CHECK(same.distance < 1e-12 * trace);

  // Rank-1 against the identity, equal means: tr(v v^T) + 3 - 2 |v| = 9 + 3 - 6.
  const std::vector<double> vvt = {1, 2, 2, 2, 4, 4, 2, 4, 4}, zero(3, 0.0);
  CHECK(frechet_distance(zero, vvt, zero, diag({1, 1, 1}), 3).distance == doctest::Approx(6.0).epsilon(1e-12));

  CHECK_THROWS_AS(frechet_distance(mu1, diag({1, 1}), mu2, diag({1, 1}), 2), Error);  // 5 means for 2
  std::vector<double> bad = diag({1, 1});
  bad[1] = std::nan("");
  CHECK_THROWS_AS(frechet_distance(zero, bad, zero, diag({1, 1}), 2), Error);
}

TEST_CASE("FeatureStats: mean, unbiased covariance, batching and large offsets") {
  // Rows (1,2), (3,0), (5,4): mean (3,2); deviations (-2,0), (0,-2), (2,2); covariance / (3-1).
  const std::vector<float> rows = {1, 2, 3, 0, 5, 4};
  FeatureStats st(2);
  st.add(rows.data(), 3);
  CHECK(st.count() == 3);
  CHECK(st.mean() == std::vector<double>{3, 2});
  CHECK(st.covariance() == std::vector<double>{4, 2, 2, 4});

  // The same rows in other batches give the same bits; a huge common offset loses nothing.
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> data(300 * 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = 1e4f + float(i % 4) + normal(rng);
  FeatureStats whole(4), pieces(4);
  whole.add(data.data(), 300);
  pieces.add(data.data(), 1);
  pieces.add(data.data() + 4, 150);
  pieces.add(data.data() + 151 * 4, 149);
  CHECK(whole.mean() == pieces.mean());
  CHECK(whole.covariance() == pieces.covariance());
  // Two-pass covariance in double as the reference.
  const std::vector<double> m = whole.mean(), c = whole.covariance();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double ref = 0;
      for (int r = 0; r < 300; ++r)
        ref += (double(data[size_t(r * 4 + i)]) - m[size_t(i)]) * (double(data[size_t(r * 4 + j)]) - m[size_t(j)]);
      ref /= 299;
      CHECK(c[size_t(i * 4 + j)] == doctest::Approx(ref).epsilon(1e-9));
    }

  FeatureStats one(2);
  one.add(rows.data(), 1);
  CHECK_THROWS_AS(one.covariance(), Error);  // needs two images
  CHECK_THROWS_AS(FeatureStats(0), Error);
  const std::vector<float> nan_row = {1, std::nanf("")};
  CHECK_THROWS_AS(one.add(nan_row.data(), 1), Error);
  CHECK_THROWS_AS(frechet_distance(FeatureStats(2), FeatureStats(3)), Error);
}
