// HOROVOD_AUTOTUNE, on rank 0: measure the engine's throughput (bytes through collectives per
// microsecond of wall time) under one setting of the fusion threshold and the cycle time after
// another, chosen by Bayesian optimisation, and keep the best. Only rank 0 uses these two settings
// (it plans fusion and times the cycles), so nothing has to reach the other ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bayesian_optimizer.h"
#include "config.h"
#include "output_file.h"

namespace hvd {

struct TunedParams {
  int64_t fusion_threshold = 0;  // bytes
  double cycle_time_ms = 0;
  std::string describe() const;  // "fusion threshold 4.00 MB, cycle time 5.00 ms"
};

class Autotuner {
 public:
  static constexpr double kMaxFusionMb = 128;  // the search box
  static constexpr double kMaxCycleMs = 25;
  static constexpr int kSamplesPerSetting = 3;  // a setting's score is the median of this many samples
  static constexpr size_t kMaxNamesPerSample = 10000;  // more distinct names and no step: names never repeat

  // `hierarchical_allreduce` and `cache_enabled` are not tuned: the log has them in Horovod's columns.
  Autotuner(const AutotuneOptions& options, TunedParams initial, bool hierarchical_allreduce, bool cache_enabled);

  // One response run by the engine: its tensors' names and bytes, finished at `now_us`. A sample
  // spans `steps_per_sample` steps, a step ending when a name comes round again. True when the
  // settings changed.
  bool record(const std::vector<std::string>& names, int64_t bytes, int64_t now_us);
  const TunedParams& params() const { return current_; }
  bool tuning() const { return tuning_; }
  int settings_tried() const { return tried_; }

 private:
  void finish_setting(double score);
  void settle();  // stop measuring and keep the best setting seen (the starting one if none was)
  std::vector<double> point(const TunedParams& p) const;
  TunedParams params_at(const std::vector<double>& x) const;
  void log(const TunedParams& p, double score);

  AutotuneOptions options_;
  bool hierarchical_;
  bool cache_enabled_;
  bool tuning_;
  TunedParams current_, best_;
  double best_score_ = -1;
  int warmups_left_;
  int tried_ = 0;
  size_t next_design_ = 0;
  std::optional<BayesianOptimizer> optimizer_;  // while tuning
  OutputFile log_;  // HOROVOD_AUTOTUNE_LOG, when given and writable

  int64_t window_start_us_ = -1, last_end_us_ = 0, window_bytes_ = 0;
  std::unordered_map<std::string, int> seen_;  // names in the current sample, and how often
  std::vector<double> samples_;                // scores of the current setting
};

}  // namespace hvd
