// Feature statistics and the Fréchet distance between the Gaussians they describe (the formula of
// FID, Heusel et al. 2017): d² = |mu1 - mu2|² + tr(S1) + tr(S2) - 2 tr((S1 S2)^(1/2)). Everything is in
// double. The matrix square root only ever meets symmetric matrices (LAPACK's dsyevd), never the
// non-symmetric product S1 S2; eigenvalues within rounding error of zero (|l| <= n eps max|l|,
// negative ones included) count as zero.
#pragma once

#include <cstdint>
#include <vector>

namespace infer {

// Mean and covariance of rows of `dim` features, accumulated batch by batch. Sums are taken of x - k,
// with k the first row seen, so that features with a large common offset lose no precision in
// E[xx^T] - E[x]E[x]^T. Deterministic: the same rows in the same order give the same bits.
class FeatureStats {
 public:
  explicit FeatureStats(int64_t dim);
  void add(const float* rows, int64_t count);  // `count` rows of dim() floats
  int64_t dim() const { return dim_; }
  int64_t count() const { return count_; }
  std::vector<double> mean() const;
  // Unbiased (divides by count - 1); row-major dim x dim. Needs count() >= 2.
  std::vector<double> covariance() const;

 private:
  int64_t dim_, count_ = 0;
  std::vector<double> shift_, sum_, sum_outer_;  // sum_outer_: upper triangle used, mirrored on read
};

// Square root of a symmetric positive semi-definite n x n matrix (row-major): V diag(sqrt(l)) V^T from
// the eigendecomposition S = V diag(l) V^T, eigenvalues at rounding level taken as 0. Only the upper
// triangle of `s` is read.
std::vector<double> sqrt_psd(const std::vector<double>& s, int64_t n);

// tr((S1 S2)^(1/2)) for symmetric PSD S1, S2: S1 S2 is similar to A S2 A with A = S1^(1/2)
// (A^-1 (A A S2) A), which is symmetric PSD, so the trace is the sum of the square roots of A S2 A's
// eigenvalues (rounding-level ones taken as 0). Works for singular S1 or S2 (where A^-1 does not
// exist the identity holds by continuity), unlike scipy's sqrtm of the product, which needs an offset
// there.
double trace_sqrt_product(const std::vector<double>& s1, const std::vector<double>& s2, int64_t n);

struct FrechetDistance {
  double distance = 0;    // d², the number FID reports (clipped at 0: rounding may leave -1e-12)
  double mean_term = 0;   // |mu1 - mu2|²
  double cov_term = 0;    // tr(S1) + tr(S2) - 2 tr((S1 S2)^(1/2))
};

FrechetDistance frechet_distance(const std::vector<double>& mu1, const std::vector<double>& s1,
                                 const std::vector<double>& mu2, const std::vector<double>& s2,
                                 int64_t n);
FrechetDistance frechet_distance(const FeatureStats& a, const FeatureStats& b);

}  // namespace infer
