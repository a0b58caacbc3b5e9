#include "autotuner.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "log.h"

namespace hvd {
namespace {

constexpr double kMb = 1024.0 * 1024.0;

// HOROVOD_AUTOTUNE_LOG's columns, Horovod's: this engine has no torus allreduce (always 0)
constexpr const char* kLogHeader =
    "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,cycle_time_ms,"
    "tensor_fusion_threshold,score";

// Settings tried first, after the starting one: spread over the box.
const std::vector<TunedParams> kDesign = {{4 << 20, 5}, {32 << 20, 12.5}, {64 << 20, 2}, {16 << 20, 0.5}};

std::vector<std::pair<double, double>> box(const AutotuneOptions& o) {
  std::vector<std::pair<double, double>> b;
  if (!o.fusion_fixed) b.emplace_back(0.0, Autotuner::kMaxFusionMb);
  if (!o.cycle_fixed) b.emplace_back(0.0, Autotuner::kMaxCycleMs);
  return b;
}

}  // namespace

Autotuner::Autotuner(const AutotuneOptions& options, TunedParams initial, bool hierarchical_allreduce,
                     bool cache_enabled)
    : options_(options),
      hierarchical_(hierarchical_allreduce),
      cache_enabled_(cache_enabled),
      tuning_(options.enabled && !(options.fusion_fixed && options.cycle_fixed)),
      current_(initial),
      best_(initial),
      warmups_left_(std::max(options.warmup_samples, 0)) {
  if (tuning_) optimizer_.emplace(box(options), options.noise);
  if (options_.enabled && !tuning_)
    log::warning("autotune: HOROVOD_FUSION_THRESHOLD and HOROVOD_CYCLE_TIME are both set, so there is nothing "
                 "to tune");
  if (tuning_ && !options_.log_path.empty()) {
    try {
      log_ = create_output_file(options_.log_path, "autotune log");
      std::fprintf(log_.get(), "%s\n", kLogHeader);
      std::fflush(log_.get());
    } catch (const std::runtime_error& e) {
      log::warning(std::string("autotune: ") + e.what());
    }
  }
}

std::string TunedParams::describe() const {
  char text[96];
  std::snprintf(text, sizeof text, "fusion threshold %.2f MB, cycle time %.2f ms", fusion_threshold / kMb,
                cycle_time_ms);
  return text;
}

std::vector<double> Autotuner::point(const TunedParams& p) const {
  std::vector<double> x;
  if (!options_.fusion_fixed) x.push_back(p.fusion_threshold / kMb);
  if (!options_.cycle_fixed) x.push_back(p.cycle_time_ms);
  return x;
}

TunedParams Autotuner::params_at(const std::vector<double>& x) const {
  TunedParams p = current_;
  size_t i = 0;
  if (!options_.fusion_fixed) p.fusion_threshold = static_cast<int64_t>(x[i++] * kMb);
  if (!options_.cycle_fixed) p.cycle_time_ms = x[i];
  return p;
}

void Autotuner::log(const TunedParams& p, double score) {
  if (!log_) return;
  std::fprintf(log_.get(), "%d,0,0,%d,%g,%g,%g\n", int(hierarchical_), int(cache_enabled_), p.cycle_time_ms,
               p.fusion_threshold / kMb, score);
  std::fflush(log_.get());
}

bool Autotuner::record(const std::vector<std::string>& names, int64_t bytes, int64_t now_us) {
  if (!tuning_) return false;
  const TunedParams before = current_;
  if (window_start_us_ < 0) {  // the first response only starts the clock
    window_start_us_ = last_end_us_ = now_us;
    return false;
  }
  bool step_over = std::any_of(names.begin(), names.end(), [this](const std::string& n) {
    auto it = seen_.find(n);
    return it != seen_.end() && it->second >= options_.steps_per_sample;
  });
  if (step_over) {  // the sample ended with the last response
    int64_t elapsed = std::max<int64_t>(last_end_us_ - window_start_us_, 1);
    samples_.push_back(static_cast<double>(window_bytes_) / elapsed);
    window_start_us_ = last_end_us_;
    window_bytes_ = 0;
    seen_.clear();
    if (static_cast<int>(samples_.size()) == kSamplesPerSetting) {
      std::nth_element(samples_.begin(), samples_.begin() + kSamplesPerSetting / 2, samples_.end());
      double median = samples_[kSamplesPerSetting / 2];
      samples_.clear();
      finish_setting(median);
    }
  }
  window_bytes_ += bytes;
  for (const auto& n : names) ++seen_[n];
  last_end_us_ = now_us;
  if (seen_.size() > kMaxNamesPerSample) {  // unnamed ops get a new name each call: no step ever ends
    log::warning("autotune: stopped, since no tensor name came round again in " + std::to_string(seen_.size()) +
                 " names; a training step ends when a name repeats, so give the tensors names "
                 "(DistributedTrainer does)");
    seen_.clear();
    settle();
  }
  return before.fusion_threshold != current_.fusion_threshold || before.cycle_time_ms != current_.cycle_time_ms;
}

void Autotuner::settle() {
  tuning_ = false;
  current_ = best_;
  optimizer_.reset();
}

void Autotuner::finish_setting(double score) {
  if (warmups_left_ > 0) {
    --warmups_left_;
    return;
  }
  log(current_, score);
  optimizer_->add(point(current_), score);
  if (score > best_score_) {
    best_score_ = score;
    best_ = current_;
  }
  if (++tried_ >= options_.max_samples) {
    settle();
    log(best_, best_score_);
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.0f", best_score_ * 1e6 / kMb);
    log::write(log::Level::Info, "autotune: settled on " + best_.describe() + ", the best of " +
                                     std::to_string(tried_) + " settings (" + rate + " MB/s through collectives)");
    return;
  }
  if (next_design_ < kDesign.size()) {  // only the parts the user left free
    current_ = params_at(point(kDesign[next_design_++]));
    return;
  }
  try {
    current_ = params_at(optimizer_->next());
  } catch (const std::exception& e) {  // tuning is an optimisation: never let it stop the engine
    log::warning(std::string("autotune: stopped early (") + e.what() + "); keeping the best setting so far");
    settle();
  }
}

}  // namespace hvd
