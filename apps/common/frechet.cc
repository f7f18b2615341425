// Feature statistics and the Fréchet distance (frechet.h). Symmetric eigendecompositions come from
// LAPACK's dsyevd (declared by lapack.h of liblapacke-dev, resolved in OpenBLAS, which ships LAPACK;
// the macro passes Fortran's hidden string lengths); matrix products are plain loops in double,
// as the matrices are small (features of one layer: tens to a few thousand) and used once per eval.
#include "frechet.h"

#include <lapack.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "infer/error.h"

namespace infer {
namespace {

// Largest feature count accepted: the covariance takes dim² doubles (4096: 128 MiB) and dsyevd
// O(dim³) time.
constexpr int64_t kMaxDim = 4096;

void check_square(const std::vector<double>& s, int64_t n, const char* what) {
  if (n < 1 || n > kMaxDim || s.size() != static_cast<size_t>(n * n))
    throw Error(std::string(what) + ": expected a " + std::to_string(n) + "x" + std::to_string(n) +
                " matrix, got " + std::to_string(s.size()) + " values");
}

// Eigenvalues (ascending) of the symmetric `s`; on return row k of `s` (row-major) is the unit
// eigenvector of eigenvalue k. LAPACK is column-major: a symmetric matrix reads the same either way,
// and its eigenvectors, columns to LAPACK, are our rows.
std::vector<double> eigen_symmetric(std::vector<double>& s, int64_t n) {
  for (double v : s)
    if (!std::isfinite(v)) throw Error("Fréchet distance: a covariance holds NaN or infinity");
  const char jobz = 'V', uplo = 'U';
  const auto ln = static_cast<lapack_int>(n);
  std::vector<double> w(static_cast<size_t>(n));
  lapack_int info = 0, lwork = -1, liwork = -1, iwork_size = 0;
  double work_size = 0;
  LAPACK_dsyevd(&jobz, &uplo, &ln, s.data(), &ln, w.data(), &work_size, &lwork, &iwork_size, &liwork,
                &info);  // workspace query
  if (info == 0) {
    lwork = static_cast<lapack_int>(work_size);
    liwork = iwork_size;
    std::vector<double> work(static_cast<size_t>(std::max<lapack_int>(lwork, 1)));
    std::vector<lapack_int> iwork(static_cast<size_t>(std::max<lapack_int>(liwork, 1)));
    LAPACK_dsyevd(&jobz, &uplo, &ln, s.data(), &ln, w.data(), work.data(), &lwork, iwork.data(), &liwork,
                  &info);
  }
  if (info != 0)
    throw Error("Fréchet distance: the symmetric eigendecomposition (LAPACK dsyevd) failed, info " +
                std::to_string(info));
  return w;
}

// sqrt of each eigenvalue, taking those within rounding error of zero as zero: LAPACK returns the zero
// eigenvalues of a singular matrix as +-(n eps max|l|), and sqrt would turn 1e-16 into an error of
// 1e-8. Negative ones (only rounding, for a PSD matrix) are clipped the same way.
std::vector<double> eigen_roots(const std::vector<double>& w) {
  double largest = 0;
  for (double l : w) largest = std::max(largest, std::abs(l));
  const double noise = double(w.size()) * std::numeric_limits<double>::epsilon() * largest;
  std::vector<double> roots(w.size());
  for (size_t k = 0; k < w.size(); ++k) roots[k] = w[k] > noise ? std::sqrt(w[k]) : 0.0;
  return roots;
}

// a * b for row-major n x n matrices.
std::vector<double> multiply(const std::vector<double>& a, const std::vector<double>& b, int64_t n) {
  std::vector<double> c(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) {
      const double aik = a[static_cast<size_t>(i * n + k)];
      for (int64_t j = 0; j < n; ++j) c[static_cast<size_t>(i * n + j)] += aik * b[static_cast<size_t>(k * n + j)];
    }
  return c;
}

}  // namespace

FeatureStats::FeatureStats(int64_t dim) : dim_(dim) {
  if (dim < 1 || dim > kMaxDim)
    throw Error("features: " + std::to_string(dim) + " values per image; the Fréchet distance takes 1 to " +
                std::to_string(kMaxDim));
  shift_.assign(static_cast<size_t>(dim), 0.0);
  sum_.assign(static_cast<size_t>(dim), 0.0);
  sum_outer_.assign(static_cast<size_t>(dim * dim), 0.0);
}

void FeatureStats::add(const float* rows, int64_t count) {
  const auto d = static_cast<size_t>(dim_);
  std::vector<double> x(d);
  for (int64_t r = 0; r < count; ++r) {
    const float* row = rows + r * dim_;
    if (count_ == 0)
      for (size_t i = 0; i < d; ++i) shift_[i] = row[i];
    for (size_t i = 0; i < d; ++i) {
      if (!std::isfinite(row[i]))
        throw Error("features: image " + std::to_string(count_) + " has a NaN or infinite feature");
      x[i] = double(row[i]) - shift_[i];
      sum_[i] += x[i];
    }
    for (size_t i = 0; i < d; ++i) {
      double* out = &sum_outer_[i * d];
      for (size_t j = i; j < d; ++j) out[j] += x[i] * x[j];
    }
    ++count_;
  }
}

std::vector<double> FeatureStats::mean() const {
  if (count_ < 1) throw Error("features: no image to take a mean of");
  std::vector<double> m(static_cast<size_t>(dim_));
  for (size_t i = 0; i < m.size(); ++i) m[i] = shift_[i] + sum_[i] / double(count_);
  return m;
}

std::vector<double> FeatureStats::covariance() const {
  if (count_ < 2) throw Error("features: a covariance needs at least 2 images, got " + std::to_string(count_));
  const auto d = static_cast<size_t>(dim_);
  const double n = double(count_);
  std::vector<double> c(d * d);
  for (size_t i = 0; i < d; ++i)
    for (size_t j = i; j < d; ++j)
      c[i * d + j] = c[j * d + i] = (sum_outer_[i * d + j] - sum_[i] * sum_[j] / n) / (n - 1);
  return c;
}

std::vector<double> sqrt_psd(const std::vector<double>& s, int64_t n) {
  check_square(s, n, "sqrt_psd");
  std::vector<double> v = s;
  const std::vector<double> roots = eigen_roots(eigen_symmetric(v, n));
  // V diag(sqrt(l)) V^T, summed per eigenvalue: r[i][j] = sum_k sqrt(l_k) e_k[i] e_k[j], where
  // e_k, the k-th eigenvector, is row k of v.
  std::vector<double> r(static_cast<size_t>(n * n), 0.0);
  for (int64_t k = 0; k < n; ++k) {
    const double root = roots[static_cast<size_t>(k)];
    if (root == 0) continue;
    for (int64_t i = 0; i < n; ++i) {
      const double* e = &v[static_cast<size_t>(k * n)];
      const double ei = e[i] * root;
      for (int64_t j = 0; j < n; ++j) r[static_cast<size_t>(i * n + j)] += ei * e[j];
    }
  }
  return r;
}

double trace_sqrt_product(const std::vector<double>& s1, const std::vector<double>& s2, int64_t n) {
  check_square(s1, n, "trace_sqrt_product");
  check_square(s2, n, "trace_sqrt_product");
  const std::vector<double> a = sqrt_psd(s1, n);
  std::vector<double> m = multiply(multiply(a, s2, n), a, n);
  for (int64_t i = 0; i < n; ++i)  // symmetric in exact arithmetic; make it so in floating point
    for (int64_t j = i + 1; j < n; ++j) {
      const double avg = 0.5 * (m[static_cast<size_t>(i * n + j)] + m[static_cast<size_t>(j * n + i)]);
      m[static_cast<size_t>(i * n + j)] = m[static_cast<size_t>(j * n + i)] = avg;
    }
  double trace = 0;
  for (double root : eigen_roots(eigen_symmetric(m, n))) trace += root;
  return trace;
}

FrechetDistance frechet_distance(const std::vector<double>& mu1, const std::vector<double>& s1,
                                 const std::vector<double>& mu2, const std::vector<double>& s2,
                                 int64_t n) {
  if (mu1.size() != static_cast<size_t>(n) || mu2.size() != static_cast<size_t>(n))
    throw Error("Fréchet distance: means of " + std::to_string(mu1.size()) + " and " +
                std::to_string(mu2.size()) + " values for " + std::to_string(n) + " features");
  FrechetDistance f;
  for (int64_t i = 0; i < n; ++i) {
    const double d = mu1[static_cast<size_t>(i)] - mu2[static_cast<size_t>(i)];
    f.mean_term += d * d;
  }
  double traces = 0;
  for (int64_t i = 0; i < n; ++i)
    traces += s1[static_cast<size_t>(i * n + i)] + s2[static_cast<size_t>(i * n + i)];
  f.cov_term = traces - 2 * trace_sqrt_product(s1, s2, n);
  f.distance = std::max(0.0, f.mean_term + f.cov_term);
  return f;
}

FrechetDistance frechet_distance(const FeatureStats& a, const FeatureStats& b) {
  if (a.dim() != b.dim())
    throw Error("Fréchet distance: " + std::to_string(a.dim()) + " features against " +
                std::to_string(b.dim()));
  return frechet_distance(a.mean(), a.covariance(), b.mean(), b.covariance(), a.dim());
}

}  // namespace infer
