// Open MPI's yield switch is found in the library this build links, when a collective wants it, and a
// thread that shares its core with a busy one sees the contention.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <doctest/doctest.h>
#include "clock.h"
#include "mpi_yield.h"

TEST_CASE("open_mpis_yield_switch_is_found") {
  // The tests link the Open MPI the package uses; without MPI_Init it does not yield yet.
  CHECK(static_cast<bool>(hvd::mpi_yield_switch()));
}

TEST_CASE("a_thread_sharing_its_core_with_a_busy_thread_sees_contention") {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  std::atomic<bool> done{false};
  bool contended = false;
  std::thread sampler([&] {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    hvd::CoreContention c;
    CHECK_FALSE(c.sample(hvd::now_us()));  // the first sample only counts what came before
    const int64_t until = hvd::now_us() + 5000000;
    while (!contended && hvd::now_us() < until) contended = c.sample(hvd::now_us());
    done = true;
  });
  std::thread busy([&] {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    while (!done) {
    }
  });
  sampler.join();
  busy.join();
  CHECK(contended);
}

TEST_CASE("mpi_yields_only_inside_a_collective_of_a_contended_core_that_no_caller_drives_and_not_tiny") {
  const int64_t big = hvd::YieldInside::kMinBytes, tiny = big - 1;
  CHECK(hvd::YieldInside::wanted(true, false, big));
  CHECK_FALSE(hvd::YieldInside::wanted(false, false, big));  // the core is free: polling costs nothing
  CHECK_FALSE(hvd::YieldInside::wanted(true, true, big));    // a caller spins for the result
  CHECK_FALSE(hvd::YieldInside::wanted(true, false, tiny));  // a flag or a metric: its caller may wait unseen
}
