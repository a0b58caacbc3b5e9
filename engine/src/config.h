// Engine settings, read from the HOROVOD_* environment variables Horovod users already know; settings.cc
// is the table of the variables, their defaults (the initialisers here) and the values they accept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "log.h"

namespace hvd {

struct AutotuneOptions {
  bool enabled = false;       // HOROVOD_AUTOTUNE=1
  int warmup_samples = 3;     // HOROVOD_AUTOTUNE_WARMUP_SAMPLES: measurements dropped at the start
  int steps_per_sample = 10;  // HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE: training steps in one sample
  int max_samples = 20;       // HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES: settings tried
  double noise = 0.8;         // HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE
  std::string log_path;       // HOROVOD_AUTOTUNE_LOG: a CSV row per setting tried, then the best
  bool fusion_fixed = false;  // HOROVOD_FUSION_THRESHOLD was set: keep it
  bool cycle_fixed = false;   // HOROVOD_CYCLE_TIME was set: keep it
};

struct Config {
  int64_t fusion_threshold = 128 << 20;  // HOROVOD_FUSION_THRESHOLD, bytes; 0 disables fusion
  int64_t fusion_max_tensor = 64 << 10;  // JUPYTER_HVD_FUSION_MAX_TENSOR: larger ones run in place
  double cycle_time_ms = 1.0;           // HOROVOD_CYCLE_TIME: longest wait to batch ready tensors
  size_t cache_capacity = 1024;         // HOROVOD_CACHE_CAPACITY; 0 disables the response cache
  double stall_check_s = 60;            // HOROVOD_STALL_CHECK_TIME_SECONDS
  double stall_shutdown_s = 0;          // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS; 0 never aborts
  bool stall_check = true;              // HOROVOD_STALL_CHECK_DISABLE=1 turns it off
  std::string timeline_path;            // HOROVOD_TIMELINE; "DYNAMIC": none until start_timeline(), as Horovod
  bool timeline_mark_cycles = false;    // HOROVOD_TIMELINE_MARK_CYCLES=1: a mark per cycle that ran collectives
  size_t ring_capacity = 1 << 16;       // JUPYTER_HVD_TIMELINE_RING events kept in memory
  int64_t spin_us = 2000;               // JUPYTER_HVD_SPIN_US: busy-poll this long after work
  bool mpi_yield = true;                // JUPYTER_HVD_MPI_YIELD=0: MPI never yields the core for the engine
  int64_t sync_reduce_bytes = 64 << 10;  // JUPYTER_HVD_SYNC_REDUCE_BYTES: a barrier before larger host allreduces and reducescatters; 0: never
  int32_t carry_bytes = 256;  // JUPYTER_HVD_CARRY_BYTES: host allreduces of at most this many bytes times their set's size carry their inputs; 0: never
  int64_t ring_allreduce_bytes = 1 << 20;  // JUPYTER_HVD_RING_ALLREDUCE_BYTES: larger host allreduces run our ring; 0: never
  bool gpu_staging = false;             // JUPYTER_HVD_GPU_STAGING=1: GPU tensors via host memory and MPI
  bool hierarchical_allreduce = false;  // HOROVOD_HIERARCHICAL_ALLREDUCE=1: GPU allreduce NCCL in, MPI across hosts
  bool gpu_batch_copies = true;         // HOROVOD_BATCH_D2D_MEMCOPIES=0: GPU fusion copies one by one
  AutotuneOptions autotune;             // HOROVOD_AUTOTUNE*: rank 0 tunes fusion_threshold and cycle_time_ms
  log::Level log_level = log::Level::Warning;  // HOROVOD_LOG_LEVEL: trace, debug, info, warning, error, fatal
  bool log_hide_time = false;           // HOROVOD_LOG_HIDE_TIME=1: log lines without the time
  std::vector<int> thread_affinity;     // HOROVOD_THREAD_AFFINITY: a core per local rank for its engine thread
  int test_ranks_per_host = 0;          // JUPYTER_HVD_TEST_RANKS_PER_HOST: tests treat k consecutive ranks as a host
  int64_t test_mpi_max_count = INT32_MAX;  // JUPYTER_HVD_TEST_MPI_MAX_COUNT: tests lower MPI's count limit

  // Each setting of settings() that is set; std::invalid_argument, naming the variable, for a value it does not accept.
  static Config from_env();
};

}  // namespace hvd
