#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "config.h"

using namespace hvd;

// The message from_env() throws with `name`=`value` set, or "" when it accepts it.
static std::string refusal(const char* name, const char* value) {
  setenv(name, value, 1);
  std::string what;
  try {
    Config::from_env();
  } catch (const std::invalid_argument& e) {
    what = e.what();
  }
  unsetenv(name);
  return what;
}

TEST_CASE("config_reads_numbers_and_names_the_variable_of_a_bad_one") {
  setenv("HOROVOD_FUSION_THRESHOLD", "1048576", 1);
  setenv("HOROVOD_CYCLE_TIME", "2.5", 1);
  Config c = Config::from_env();
  CHECK(c.fusion_threshold == 1048576);
  CHECK(c.cycle_time_ms == 2.5);
  CHECK(c.autotune.fusion_fixed);
  unsetenv("HOROVOD_FUSION_THRESHOLD");
  unsetenv("HOROVOD_CYCLE_TIME");
  CHECK(refusal("HOROVOD_FUSION_THRESHOLD", "abc") ==
        "HOROVOD_FUSION_THRESHOLD='abc': expected an integer >= 0");
  CHECK(refusal("HOROVOD_FUSION_THRESHOLD", "64MB") != "");        // trailing text
  CHECK(refusal("HOROVOD_FUSION_THRESHOLD", "-1") != "");          // below the minimum
  CHECK(refusal("HOROVOD_FUSION_THRESHOLD", "99999999999999999999") != "");  // out of range
  CHECK(refusal("HOROVOD_CYCLE_TIME", "soon") == "HOROVOD_CYCLE_TIME='soon': expected a number >= 0");
  CHECK(refusal("HOROVOD_CYCLE_TIME", "nan") != "");
  CHECK(refusal("HOROVOD_CACHE_CAPACITY", "-1") != "");
  CHECK(refusal("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "0") != "");
  CHECK(refusal("HOROVOD_STALL_CHECK_TIME_SECONDS", "30") == "");
}

TEST_CASE("config_sync_reduce_bytes_defaults_to_64_KiB_and_0_turns_it_off") {
  CHECK(Config::from_env().sync_reduce_bytes == 64 << 10);
  setenv("JUPYTER_HVD_SYNC_REDUCE_BYTES", "0", 1);
  CHECK(Config::from_env().sync_reduce_bytes == 0);
  unsetenv("JUPYTER_HVD_SYNC_REDUCE_BYTES");
  CHECK(refusal("JUPYTER_HVD_SYNC_REDUCE_BYTES", "-1") ==
        "JUPYTER_HVD_SYNC_REDUCE_BYTES='-1': expected an integer >= 0");
}

TEST_CASE("config_ring_allreduce_bytes_defaults_to_1_MiB_and_0_turns_it_off") {
  CHECK(Config::from_env().ring_allreduce_bytes == 1 << 20);
  setenv("JUPYTER_HVD_RING_ALLREDUCE_BYTES", "0", 1);
  CHECK(Config::from_env().ring_allreduce_bytes == 0);
  unsetenv("JUPYTER_HVD_RING_ALLREDUCE_BYTES");
  CHECK(refusal("JUPYTER_HVD_RING_ALLREDUCE_BYTES", "16M") != "");
}

TEST_CASE("config_log_level_defaults_to_warning_and_names_a_bad_one") {
  CHECK(Config::from_env().log_level == log::Level::Warning);
  CHECK(!Config::from_env().log_hide_time);
  setenv("HOROVOD_LOG_LEVEL", "debug", 1);
  setenv("HOROVOD_LOG_HIDE_TIME", "1", 1);
  Config c = Config::from_env();
  CHECK(c.log_level == log::Level::Debug);
  CHECK(c.log_hide_time);
  unsetenv("HOROVOD_LOG_LEVEL");
  unsetenv("HOROVOD_LOG_HIDE_TIME");
  CHECK(refusal("HOROVOD_LOG_LEVEL", "loud") ==
        "HOROVOD_LOG_LEVEL='loud': expected one of trace, debug, info, warning, error, fatal");
}

TEST_CASE("config_thread_affinity_is_a_list_of_core_ids") {
  CHECK(Config::from_env().thread_affinity.empty());
  setenv("HOROVOD_THREAD_AFFINITY", "3,0,12", 1);
  CHECK(Config::from_env().thread_affinity == std::vector<int>{3, 0, 12});
  unsetenv("HOROVOD_THREAD_AFFINITY");
  CHECK(refusal("HOROVOD_THREAD_AFFINITY", "0,,1") ==
        "HOROVOD_THREAD_AFFINITY='0,,1': expected a comma-separated list of core ids, one per local rank");
  CHECK(refusal("HOROVOD_THREAD_AFFINITY", "0,-1") != "");
  CHECK(refusal("HOROVOD_THREAD_AFFINITY", "1 2") != "");
  CHECK(refusal("HOROVOD_THREAD_AFFINITY", "7") == "");
}
