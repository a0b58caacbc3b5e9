// Open MPI's yield switch is found in the library this build links, and a thread that shares its core with
// a busy one sees the contention.
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
