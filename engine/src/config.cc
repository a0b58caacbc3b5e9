#include "config.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace hvd {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

[[noreturn]] void bad(const char* name, const char* v, const std::string& want) {
  throw std::invalid_argument(std::string(name) + "='" + v + "': expected " + want);
}

// The whole value as an integer of at least `min`; a clear error naming the variable otherwise.
int64_t integer(const char* name, const char* v, int64_t min) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || errno == ERANGE || x < min)
    bad(name, v, "an integer >= " + std::to_string(min));
  return x;
}

// The whole value as a finite number of at least 0.
double number(const char* name, const char* v) {
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || errno == ERANGE || !std::isfinite(x) || x < 0) bad(name, v, "a number >= 0");
  return x;
}

// A comma-separated list of integers of at least 0.
std::vector<int> integers(const char* name, const char* v) {
  std::vector<int> out;
  std::string all(v), item;
  for (size_t start = 0; start <= all.size();) {
    size_t comma = all.find(',', start);
    if (comma == std::string::npos) comma = all.size();
    item = all.substr(start, comma - start);
    char* end = nullptr;
    errno = 0;
    long x = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || x < 0 || x > INT32_MAX)
      bad(name, v, "a comma-separated list of core ids, one per local rank");
    out.push_back(static_cast<int>(x));
    start = comma + 1;
  }
  return out;
}

}  // namespace

Config Config::from_env() {
  Config c;
  if (auto v = env("HOROVOD_FUSION_THRESHOLD")) {
    c.fusion_threshold = integer("HOROVOD_FUSION_THRESHOLD", v, 0);
    c.autotune.fusion_fixed = true;
  }
  if (auto v = env("JUPYTER_HVD_FUSION_MAX_TENSOR")) c.fusion_max_tensor = integer("JUPYTER_HVD_FUSION_MAX_TENSOR", v, 0);
  if (auto v = env("HOROVOD_CYCLE_TIME")) {
    c.cycle_time_ms = number("HOROVOD_CYCLE_TIME", v);
    c.autotune.cycle_fixed = true;
  }
  if (auto v = env("HOROVOD_CACHE_CAPACITY")) c.cache_capacity = integer("HOROVOD_CACHE_CAPACITY", v, 0);
  if (auto v = env("HOROVOD_STALL_CHECK_TIME_SECONDS")) c.stall_check_s = number("HOROVOD_STALL_CHECK_TIME_SECONDS", v);
  if (auto v = env("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS")) c.stall_shutdown_s = number("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", v);
  if (auto v = env("HOROVOD_STALL_CHECK_DISABLE")) c.stall_check = std::string(v) == "0";
  if (auto v = env("HOROVOD_TIMELINE")) c.timeline_path = v;
  if (auto v = env("HOROVOD_TIMELINE_MARK_CYCLES")) c.timeline_mark_cycles = std::string(v) == "1";
  if (auto v = env("JUPYTER_HVD_TIMELINE_RING")) c.ring_capacity = integer("JUPYTER_HVD_TIMELINE_RING", v, 1);
  if (auto v = env("JUPYTER_HVD_SPIN_US")) c.spin_us = integer("JUPYTER_HVD_SPIN_US", v, 0);
  if (auto v = env("JUPYTER_HVD_SYNC_REDUCE_BYTES"))
    c.sync_reduce_bytes = integer("JUPYTER_HVD_SYNC_REDUCE_BYTES", v, 0);
  if (auto v = env("JUPYTER_HVD_RING_ALLREDUCE_BYTES"))
    c.ring_allreduce_bytes = integer("JUPYTER_HVD_RING_ALLREDUCE_BYTES", v, 0);
  if (auto v = env("JUPYTER_HVD_GPU_STAGING")) c.gpu_staging = std::string(v) == "1";
  if (auto v = env("HOROVOD_HIERARCHICAL_ALLREDUCE")) c.hierarchical_allreduce = std::string(v) == "1";
  if (auto v = env("HOROVOD_BATCH_D2D_MEMCOPIES")) c.gpu_batch_copies = std::string(v) != "0";
  if (auto v = env("HOROVOD_LOG_LEVEL")) c.log_level = log::parse_level(v);
  if (auto v = env("HOROVOD_LOG_HIDE_TIME")) c.log_hide_time = std::string(v) == "1";
  if (auto v = env("HOROVOD_THREAD_AFFINITY")) c.thread_affinity = integers("HOROVOD_THREAD_AFFINITY", v);
  if (auto v = env("JUPYTER_HVD_TEST_RANKS_PER_HOST")) c.test_ranks_per_host = integer("JUPYTER_HVD_TEST_RANKS_PER_HOST", v, 0);
  if (auto v = env("JUPYTER_HVD_TEST_MPI_MAX_COUNT"))
    c.test_mpi_max_count = std::min<int64_t>(INT32_MAX, integer("JUPYTER_HVD_TEST_MPI_MAX_COUNT", v, 16));
  if (auto v = env("HOROVOD_AUTOTUNE")) c.autotune.enabled = std::string(v) == "1";
  if (auto v = env("HOROVOD_AUTOTUNE_LOG")) c.autotune.log_path = v;
  if (auto v = env("HOROVOD_AUTOTUNE_WARMUP_SAMPLES")) c.autotune.warmup_samples = integer("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", v, 0);
  if (auto v = env("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE")) c.autotune.steps_per_sample = integer("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", v, 1);
  if (auto v = env("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES")) c.autotune.max_samples = integer("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", v, 1);
  if (auto v = env("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE")) c.autotune.noise = number("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", v);
  return c;
}

}  // namespace hvd
