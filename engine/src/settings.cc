#include "settings.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace hvd {
namespace {

using Kind = Setting::Kind;
using Also = void (*)(Config&);  // what else setting the variable changes

[[noreturn]] void refuse(const Setting& s, const std::string& v) {
  throw std::invalid_argument(std::string(s.name) + "='" + v + "': expected " + s.accepts());
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// A row for an integer field of Config (`field(c)` is a reference to it), from `min` to the field's limit.
template <typename Field>
Setting integer(const char* name, Field field, int64_t min, const char* help, Also also = nullptr) {
  using T = std::decay_t<decltype(field(std::declval<Config&>()))>;
  const auto max = static_cast<int64_t>(std::min<uint64_t>(std::numeric_limits<T>::max(), INT64_MAX));
  Setting s{name, Kind::Integer, help, min, max};
  s.read = [s, field, min, max, also](Config& c, const std::string& v) {
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0' || errno == ERANGE || x < min || x > max) refuse(s, v);
    field(c) = static_cast<T>(x);
    if (also) also(c);
  };
  s.show = [field](const Config& c) { return std::to_string(field(c)); };
  return s;
}

// A row for a finite number >= 0.
template <typename Field>
Setting number(const char* name, Field field, const char* help, Also also = nullptr) {
  Setting s{name, Kind::Number, help, 0, 0};
  s.read = [s, field, also](Config& c, const std::string& v) {
    char* end = nullptr;
    errno = 0;
    double x = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(x) || x < 0) refuse(s, v);
    field(c) = x;
    if (also) also(c);
  };
  s.show = [field](const Config& c) { return number_text(field(c)); };
  return s;
}

// A row for a switch. Horovod's own reading: on when the value is "1", or, for a switch that is on by
// default (`unless_0`), unless it is "0"; `inverted` switches set a field that means the opposite.
template <typename Field>
Setting flag(const char* name, Field field, const char* help, bool unless_0 = false, bool inverted = false) {
  Setting s{name, Kind::Flag, help};
  s.read = [field, unless_0, inverted](Config& c, const std::string& v) {
    field(c) = (unless_0 ? v != "0" : v == "1") != inverted;
  };
  s.show = [field, inverted](const Config& c) { return field(c) != inverted ? "1" : "0"; };
  return s;
}

template <typename Field>
Setting text(const char* name, Field field, const char* help) {
  Setting s{name, Kind::Text, help};
  s.read = [field](Config& c, const std::string& v) { field(c) = v; };
  s.show = [field](const Config& c) { return field(c); };
  return s;
}

Setting log_level() {
  Setting s{"HOROVOD_LOG_LEVEL", Kind::Choice, "the least severe engine messages printed on stderr"};
  for (size_t i = 0; i < enum_count<log::Level>(); ++i) s.choices.push_back(EnumNames<log::Level>::names[i]);
  s.read = [](Config& c, const std::string& v) { c.log_level = log::parse_level(v); };
  s.show = [](const Config& c) { return std::string(enum_name(c.log_level)); };
  return s;
}

// A comma-separated list of core ids, one per local rank.
Setting thread_affinity() {
  Setting s{"HOROVOD_THREAD_AFFINITY", Kind::List, "core ids, one per local rank, for each rank's engine thread"};
  s.read = [s](Config& c, const std::string& v) {
    std::vector<int> out;
    for (size_t start = 0; start <= v.size();) {
      size_t comma = v.find(',', start);
      if (comma == std::string::npos) comma = v.size();
      std::string item = v.substr(start, comma - start);
      char* end = nullptr;
      errno = 0;
      long x = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || errno == ERANGE || x < 0 || x > INT32_MAX) refuse(s, v);
      out.push_back(static_cast<int>(x));
      start = comma + 1;
    }
    c.thread_affinity = std::move(out);
  };
  s.show = [](const Config& c) {
    std::string out;
    for (int core : c.thread_affinity) out += (out.empty() ? "" : ",") + std::to_string(core);
    return out;
  };
  return s;
}

std::vector<Setting> make_settings() {
  // Each field as a reference, for Config and const Config alike.
#define HVD_FIELD(f) [](auto& c) -> auto& { return c.f; }
  return {
      integer("HOROVOD_FUSION_THRESHOLD", HVD_FIELD(fusion_threshold), 0,
              "bytes of small tensors fused into one collective (0 disables fusion)",
              [](Config& c) { c.autotune.fusion_fixed = true; }),
      integer("JUPYTER_HVD_FUSION_MAX_TENSOR", HVD_FIELD(fusion_max_tensor), 0,
              "tensors larger than this many bytes are reduced in place on their own"),
      number("HOROVOD_CYCLE_TIME", HVD_FIELD(cycle_time_ms),
             "ms the coordinator may hold ready tensors while more keep arriving, to fuse them",
             [](Config& c) { c.autotune.cycle_fixed = true; }),
      integer("HOROVOD_CACHE_CAPACITY", HVD_FIELD(cache_capacity), 0, "response-cache entries (0 disables the cache)"),
      number("HOROVOD_STALL_CHECK_TIME_SECONDS", HVD_FIELD(stall_check_s),
             "seconds before a warning about tensors some ranks have not submitted"),
      number("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", HVD_FIELD(stall_shutdown_s),
             "seconds a tensor may stall before the job is aborted (0: never)"),
      flag("HOROVOD_STALL_CHECK_DISABLE", HVD_FIELD(stall_check), "1 turns stall checks off", true, true),
      text("HOROVOD_TIMELINE", HVD_FIELD(timeline_path),
           "write a Chrome-trace timeline of all ranks to this file (DYNAMIC: none until hvd.start_timeline())"),
      flag("HOROVOD_TIMELINE_MARK_CYCLES", HVD_FIELD(timeline_mark_cycles),
           "1: a timeline mark for each engine cycle that ran collectives"),
      flag("HOROVOD_AUTOTUNE", HVD_FIELD(autotune.enabled),
           "1: rank 0 tunes the fusion threshold and cycle time not set while the job trains"),
      text("HOROVOD_AUTOTUNE_LOG", HVD_FIELD(autotune.log_path), "CSV of every setting autotuning tried and its score"),
      integer("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", HVD_FIELD(autotune.warmup_samples), 0,
              "autotuning samples discarded at the start"),
      integer("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", HVD_FIELD(autotune.steps_per_sample), 1,
              "training steps in one autotuning sample"),
      integer("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", HVD_FIELD(autotune.max_samples), 1,
              "settings autotuning tries before keeping the best"),
      number("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", HVD_FIELD(autotune.noise),
             "how little autotuning trusts one measurement"),
      log_level(),
      flag("HOROVOD_LOG_HIDE_TIME", HVD_FIELD(log_hide_time), "1 leaves the time out of engine messages"),
      thread_affinity(),
      integer("JUPYTER_HVD_TIMELINE_RING", HVD_FIELD(ring_capacity), 1, "engine events kept in memory per rank"),
      flag("JUPYTER_HVD_GPU_STAGING", HVD_FIELD(gpu_staging),
           "1 sends GPU tensors through host memory and MPI even where NCCL could run"),
      flag("HOROVOD_BATCH_D2D_MEMCOPIES", HVD_FIELD(gpu_batch_copies),
           "0 copies GPU tensors into and out of the fusion buffer one at a time", true),
      flag("HOROVOD_HIERARCHICAL_ALLREDUCE", HVD_FIELD(hierarchical_allreduce),
           "1: GPU allreduce as NCCL within each host and MPI between hosts"),
      integer("JUPYTER_HVD_TEST_RANKS_PER_HOST", HVD_FIELD(test_ranks_per_host), 0,
              "tests only: hierarchical GPU allreduce treats each k consecutive ranks as one host (0: the real hosts)"),
      integer("JUPYTER_HVD_TEST_MPI_MAX_COUNT", HVD_FIELD(test_mpi_max_count), 16,
              "tests only: the largest count the engine passes to one MPI call (at most 2^31 - 1)",
              [](Config& c) { c.test_mpi_max_count = std::min<int64_t>(c.test_mpi_max_count, INT32_MAX); }),
      integer("JUPYTER_HVD_SYNC_REDUCE_BYTES", HVD_FIELD(sync_reduce_bytes), 0,
              "host allreduces and reducescatters of at least this many bytes start with a barrier (0: never)"),
      integer("JUPYTER_HVD_CARRY_BYTES", HVD_FIELD(carry_bytes), 0,
              "host allreduces queued with nothing else in flight whose size times their process set's size is at "
              "most this many bytes travel with their requests to rank 0 and back, and run with no collective "
              "(0: never)"),
      integer("JUPYTER_HVD_RING_ALLREDUCE_BYTES", HVD_FIELD(ring_allreduce_bytes), 0,
              "host allreduces of at least this many bytes run as a ring (0: never)"),
      integer("JUPYTER_HVD_SPIN_US", HVD_FIELD(spin_us), 0,
              "microseconds the engine thread keeps polling after work before it sleeps"),
      flag("JUPYTER_HVD_MPI_YIELD", HVD_FIELD(mpi_yield),
           "0 keeps Open MPI from yielding the core while collectives no caller drives wait for a peer", true),
  };
#undef HVD_FIELD
}

}  // namespace

std::string Setting::accepts() const {
  switch (kind) {
    case Kind::Integer:
      return max < INT64_MAX ? "an integer from " + std::to_string(min) + " to " + std::to_string(max)
                             : "an integer >= " + std::to_string(min);
    case Kind::Number: return "a number >= " + std::to_string(min);
    case Kind::Flag: return "1 or 0";
    case Kind::Text: return "any text";
    case Kind::List: return "a comma-separated list of core ids, one per local rank";
    case Kind::Choice: {
      std::string out = "one of ";
      for (size_t i = 0; i < choices.size(); ++i) out += (i ? ", " : "") + choices[i];
      return out;
    }
  }
  return "";
}

const std::vector<Setting>& settings() {
  static const std::vector<Setting> all = make_settings();
  return all;
}

}  // namespace hvd
