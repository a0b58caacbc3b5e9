#include "bayesian_optimizer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace hvd {
namespace {

constexpr double kLength = 0.25;      // kernel length scale, in the unit box
constexpr double kExploration = 0.01;  // expected improvement's margin, in standardised score units
constexpr int kCandidates = 2601;      // points of the grid searched for the best expected improvement
constexpr double kMinNoise = 1e-3;     // keeps the kernel matrix well conditioned when points repeat

double kernel(const std::vector<double>& a, const std::vector<double>& b) {
  double d2 = 0;
  for (size_t i = 0; i < a.size(); ++i) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  return std::exp(-d2 / (2 * kLength * kLength));
}

// Lower-triangular L with L L^T = a (a symmetric positive definite, n x n, row-major).
std::vector<double> cholesky(const std::vector<double>& a, size_t n) {
  std::vector<double> l(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      double s = a[i * n + j];
      for (size_t k = 0; k < j; ++k) s -= l[i * n + k] * l[j * n + k];
      if (i == j) {
        if (s <= 0) throw std::runtime_error("autotune: kernel matrix is not positive definite");
        l[i * n + i] = std::sqrt(s);
      } else {
        l[i * n + j] = s / l[j * n + j];
      }
    }
  }
  return l;
}

// Solves L y = b (forward) or L^T y = b (backward) for lower-triangular L.
std::vector<double> solve(const std::vector<double>& l, size_t n, std::vector<double> b, bool transposed) {
  if (!transposed) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < i; ++k) b[i] -= l[i * n + k] * b[k];
      b[i] /= l[i * n + i];
    }
  } else {
    for (size_t i = n; i-- > 0;) {
      for (size_t k = i + 1; k < n; ++k) b[i] -= l[k * n + i] * b[k];
      b[i] /= l[i * n + i];
    }
  }
  return b;
}

}  // namespace

BayesianOptimizer::BayesianOptimizer(std::vector<std::pair<double, double>> bounds, double noise)
    : bounds_(std::move(bounds)), noise_(std::max(noise, kMinNoise)) {
  if (bounds_.empty()) throw std::invalid_argument("autotune: nothing to optimise");
  for (const auto& b : bounds_)
    if (!(b.first < b.second)) throw std::invalid_argument("autotune: each range needs low < high");
}

std::vector<double> BayesianOptimizer::to_unit(const std::vector<double>& x) const {
  std::vector<double> u(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    u[i] = std::clamp((x[i] - bounds_[i].first) / (bounds_[i].second - bounds_[i].first), 0.0, 1.0);
  return u;
}

void BayesianOptimizer::add(const std::vector<double>& x, double score) {
  if (x.size() != bounds_.size()) throw std::invalid_argument("autotune: sample has the wrong dimension");
  xs_.push_back(to_unit(x));
  ys_.push_back(score);
}

std::vector<double> BayesianOptimizer::next() const {
  const size_t d = bounds_.size(), n = xs_.size();
  std::vector<double> best_u(d, 0.5), u(d), ks(n);
  if (n == 0) return to_box(best_u);
  // Scores standardised, so the kernel's unit variance and the noise are on their scale.
  double mean = std::accumulate(ys_.begin(), ys_.end(), 0.0) / n, var = 0;
  for (double y : ys_) var += (y - mean) * (y - mean);
  double sd = n > 1 && var > 0 ? std::sqrt(var / n) : 1.0;
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = (ys_[i] - mean) / sd;
  double best = *std::max_element(y.begin(), y.end());

  std::vector<double> k(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) k[i * n + j] = kernel(xs_[i], xs_[j]) + (i == j ? noise_ : 0.0);
  std::vector<double> l = cholesky(k, n);
  std::vector<double> alpha = solve(l, n, solve(l, n, y, false), true);

  // A grid over the unit box, the same number of points along each axis.
  const int per_axis = std::max(2, static_cast<int>(std::pow(kCandidates, 1.0 / d)));
  size_t total = 1;
  for (size_t i = 0; i < d; ++i) total *= per_axis;
  double best_ei = -1;
  for (size_t c = 0; c < total; ++c) {
    for (size_t i = 0, rest = c; i < d; ++i, rest /= per_axis) u[i] = double(rest % per_axis) / (per_axis - 1);
    for (size_t i = 0; i < n; ++i) ks[i] = kernel(u, xs_[i]);
    double mu = std::inner_product(ks.begin(), ks.end(), alpha.begin(), 0.0);
    std::vector<double> v = solve(l, n, ks, false);
    double sigma = std::sqrt(std::max(1.0 - std::inner_product(v.begin(), v.end(), v.begin(), 0.0), 1e-12));
    double z = (mu - best - kExploration) / sigma;
    double ei = (mu - best - kExploration) * 0.5 * std::erfc(-z / std::sqrt(2.0)) +
                sigma * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    if (ei > best_ei) {
      best_ei = ei;
      best_u = u;
    }
  }
  return to_box(best_u);
}

std::vector<double> BayesianOptimizer::to_box(const std::vector<double>& u) const {
  std::vector<double> x(u.size());
  for (size_t i = 0; i < u.size(); ++i) x[i] = bounds_[i].first + u[i] * (bounds_[i].second - bounds_[i].first);
  return x;
}

}  // namespace hvd
