#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "autotuner.h"
#include "bayesian_optimizer.h"
#include <doctest/doctest.h>

using namespace hvd;

namespace {

// A smooth score over (fusion MB, cycle ms) with one peak at (40, 8).
double hill(double mb, double ms) {
  double a = (mb - 40) / 128, b = (ms - 8) / 25;
  return 100 * std::exp(-(a * a + b * b) / 0.05);
}

// Runs training steps of three 1 MB tensors through the tuner; each step lasts as long as `score`
// (bytes per µs) at the settings in effect says. Returns the settings seen, one per step.
std::vector<TunedParams> train(Autotuner& t, int steps, double (*score)(const TunedParams&)) {
  std::vector<TunedParams> seen;
  int64_t now = 1000;
  const int64_t bytes = 1 << 20;
  for (int s = 0; s < steps; ++s) {
    seen.push_back(t.params());
    double per_tensor_us = bytes / score(t.params());
    for (const char* name : {"a", "b", "c"}) {
      now += static_cast<int64_t>(per_tensor_us);
      t.record({name}, bytes, now);
    }
  }
  return seen;
}

double hill_score(const TunedParams& p) { return hill(p.fusion_threshold / 1048576.0, p.cycle_time_ms) + 1; }

AutotuneOptions small(int warmups, int steps, int settings) {
  AutotuneOptions o;
  o.enabled = true;
  o.warmup_samples = warmups;
  o.steps_per_sample = steps;
  o.max_samples = settings;
  return o;
}

}  // namespace

TEST_CASE("optimizer_starts_in_the_middle_and_rejects_empty_boxes") {
  BayesianOptimizer o({{0, 10}, {2, 4}}, 0.1);
  auto x = o.next();
  REQUIRE(x.size() == 2);
  CHECK(x[0] == 5);
  CHECK(x[1] == 3);
  bool threw = false;
  try {
    BayesianOptimizer bad({{1, 1}}, 0.1);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  CHECK(threw);
}

TEST_CASE("optimizer_climbs_to_the_peak_of_a_smooth_score") {
  BayesianOptimizer o({{0, 128}, {0, 25}}, 0.01);
  for (auto p : std::vector<std::vector<double>>{{128, 1}, {4, 5}, {32, 12.5}, {64, 2}, {16, 0.5}})
    o.add(p, hill(p[0], p[1]));
  double best = 0;
  std::vector<double> at;
  for (int i = 0; i < 15; ++i) {
    auto x = o.next();
    double y = hill(x[0], x[1]);
    o.add(x, y);
    if (y > best) best = y, at = x;
  }
  CHECK(best > 90);  // the peak is 100
  CHECK(std::fabs(at[0] - 40) < 20);
  CHECK(std::fabs(at[1] - 8) < 4);
}

TEST_CASE("autotuner_measures_whole_steps_skips_warmups_and_keeps_the_best") {
  std::string log = "/tmp/jhvd_autotune_test.csv";
  AutotuneOptions o = small(1, 2, 6);
  o.log_path = log;
  Autotuner t(o, {128 << 20, 1.0}, false, true);
  CHECK(t.tuning());
  // One setting takes 3 samples of 2 steps: the first (a warm-up) and the next all at the start.
  auto seen = train(t, 12, hill_score);
  CHECK(seen[11].fusion_threshold == (128 << 20));
  CHECK(t.settings_tried() == 0);
  train(t, 1, hill_score);
  CHECK(t.settings_tried() == 1);
  CHECK(t.params().fusion_threshold == (4 << 20));
  CHECK(t.params().cycle_time_ms == 5);
  train(t, 6 * 6, hill_score);
  CHECK(!t.tuning());
  CHECK(t.settings_tried() == 6);
  // The best of the six settings tried: all tried settings are in the log, then the best again.
  std::ifstream in(log);
  std::string header, line;
  std::getline(in, header);
  CHECK(header == "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,cycle_time_ms,"
                  "tensor_fusion_threshold,score");
  std::vector<std::vector<double>> rows;
  while (std::getline(in, line)) {
    std::vector<double> row;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) row.push_back(std::stod(cell));
    rows.push_back(row);
  }
  CHECK(rows.size() == 7);
  for (const auto& row : rows) CHECK((row[0] == 0 && row[1] == 0 && row[2] == 0 && row[3] == 1));  // fixed
  size_t best = 0;
  for (size_t i = 0; i < 6; ++i)
    if (rows[i][6] > rows[best][6]) best = i;
  CHECK(rows[6][4] == rows[best][4]);
  CHECK(rows[6][5] == rows[best][5]);
  CHECK(rows[6][6] == rows[best][6]);
  CHECK(std::fabs(t.params().fusion_threshold / 1048576.0 - rows[best][5]) < 1e-3);
  CHECK(t.params().cycle_time_ms == rows[best][4]);
  // Settled: more steps change nothing.
  TunedParams settled = t.params();
  train(t, 30, hill_score);
  CHECK(t.params().fusion_threshold == settled.fusion_threshold);
  CHECK(t.params().cycle_time_ms == settled.cycle_time_ms);
  std::remove(log.c_str());
}

TEST_CASE("autotuner_keeps_what_the_user_set") {
  AutotuneOptions o = small(0, 1, 5);
  o.fusion_fixed = true;
  Autotuner t(o, {8 << 20, 1.0}, false, true);
  for (const auto& p : train(t, 40, hill_score)) CHECK(p.fusion_threshold == (8 << 20));
  CHECK(!t.tuning());
  o.cycle_fixed = true;
  Autotuner both(o, {8 << 20, 1.0}, false, true);
  CHECK(!both.tuning());
  train(both, 20, hill_score);
  CHECK(both.settings_tried() == 0);
  CHECK(both.params().cycle_time_ms == 1.0);
}

TEST_CASE("autotuner_off_changes_nothing") {
  AutotuneOptions o;
  Autotuner t(o, {64 << 20, 2.0}, false, true);
  CHECK(!t.tuning());
  for (const auto& p : train(t, 50, hill_score)) CHECK((p.fusion_threshold == (64 << 20) && p.cycle_time_ms == 2.0));
}

TEST_CASE("optimizer_stays_sound_when_a_point_repeats_with_no_noise") {
  BayesianOptimizer o({{0, 128}, {0, 25}}, 0.0);
  bool threw = false;
  try {
    for (int i = 0; i < 30; ++i) o.add({32, 5}, 7.0 + (i % 3) * 1e-9);
    auto x = o.next();
    CHECK(x[0] >= 0);
    CHECK(x[0] <= 128);
    CHECK(x[1] >= 0);
    CHECK(x[1] <= 25);
  } catch (const std::exception&) {
    threw = true;
  }
  CHECK(!threw);
}

TEST_CASE("autotuner_gives_up_when_names_never_repeat") {
  Autotuner t(small(0, 2, 5), {128 << 20, 1.0}, false, true);
  int64_t now = 0;
  for (size_t i = 0; i <= Autotuner::kMaxNamesPerSample + 1 && t.tuning(); ++i)
    t.record({"allreduce.noname." + std::to_string(i)}, 1024, now += 10);
  CHECK(!t.tuning());
  CHECK(t.settings_tried() == 0);
  CHECK(t.params().fusion_threshold == (128 << 20));
  CHECK(t.params().cycle_time_ms == 1.0);
}
