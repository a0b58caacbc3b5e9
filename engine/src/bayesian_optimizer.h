// Bayesian optimisation of a noisy score over a box, for the autotuner: a Gaussian process with a
// squared-exponential kernel models the score, and the next point to try maximises the expected
// improvement over the best score seen. Sized for tens of samples in a few dimensions.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace hvd {

class BayesianOptimizer {
 public:
  // `bounds`: the [low, high] range of each variable; `noise`: added to the kernel's diagonal, in
  // units of the scores' variance (higher trusts single measurements less; at least 0.001).
  BayesianOptimizer(std::vector<std::pair<double, double>> bounds, double noise);

  void add(const std::vector<double>& x, double score);
  // The point of highest expected improvement (the middle of the box before any sample).
  std::vector<double> next() const;
  size_t samples() const { return xs_.size(); }

 private:
  std::vector<double> to_unit(const std::vector<double>& x) const;
  std::vector<double> to_box(const std::vector<double>& u) const;

  std::vector<std::pair<double, double>> bounds_;
  double noise_;
  std::vector<std::vector<double>> xs_;  // in the unit box
  std::vector<double> ys_;
};

}  // namespace hvd
