#include "config.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace hvd {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

Config Config::from_env() {
  Config c;
  if (auto v = env("HOROVOD_FUSION_THRESHOLD")) {
    c.fusion_threshold = std::stoll(v);
    c.autotune.fusion_fixed = true;
  }
  if (auto v = env("JUPYTER_HVD_FUSION_MAX_TENSOR")) c.fusion_max_tensor = std::stoll(v);
  if (auto v = env("HOROVOD_CYCLE_TIME")) {
    c.cycle_time_ms = std::stod(v);
    c.autotune.cycle_fixed = true;
  }
  if (auto v = env("HOROVOD_CACHE_CAPACITY")) c.cache_capacity = std::stoul(v);
  if (auto v = env("HOROVOD_STALL_CHECK_TIME_SECONDS")) c.stall_check_s = std::stod(v);
  if (auto v = env("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS")) c.stall_shutdown_s = std::stod(v);
  if (auto v = env("HOROVOD_STALL_CHECK_DISABLE")) c.stall_check = std::string(v) == "0";
  if (auto v = env("HOROVOD_TIMELINE")) c.timeline_path = v;
  if (auto v = env("HOROVOD_TIMELINE_MARK_CYCLES")) c.timeline_mark_cycles = std::string(v) == "1";
  if (auto v = env("JUPYTER_HVD_TIMELINE_RING")) c.ring_capacity = std::stoul(v);
  if (auto v = env("JUPYTER_HVD_SPIN_US")) c.spin_us = std::stoll(v);
  if (auto v = env("JUPYTER_HVD_GPU_STAGING")) c.gpu_staging = std::string(v) == "1";
  if (auto v = env("HOROVOD_HIERARCHICAL_ALLREDUCE")) c.hierarchical_allreduce = std::string(v) == "1";
  if (auto v = env("JUPYTER_HVD_GPU_BATCH_COPIES")) c.gpu_batch_copies = std::string(v) != "0";
  if (auto v = env("JUPYTER_HVD_TEST_RANKS_PER_HOST")) c.test_ranks_per_host = std::stoi(v);
  if (auto v = env("HOROVOD_AUTOTUNE")) c.autotune.enabled = std::string(v) == "1";
  if (auto v = env("HOROVOD_AUTOTUNE_LOG")) c.autotune.log_path = v;
  if (auto v = env("HOROVOD_AUTOTUNE_WARMUP_SAMPLES")) c.autotune.warmup_samples = std::stoi(v);
  if (auto v = env("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE")) c.autotune.steps_per_sample = std::max(std::stoi(v), 1);
  if (auto v = env("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES")) c.autotune.max_samples = std::max(std::stoi(v), 1);
  if (auto v = env("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE")) c.autotune.noise = std::stod(v);
  if (c.ring_capacity == 0) c.ring_capacity = 1;
  return c;
}

}  // namespace hvd
