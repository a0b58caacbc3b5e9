// Handle: waiting works for its spin time (running the engine's steps when it has a Progress, else polling),
// then sleeps until completion or the timeout.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include "handle.h"

using namespace std::chrono;
using hvd::Handle;
using hvd::Status;

namespace {

// Completes `h` with `s` after `delay` on another thread, while the caller waits.
bool wait_while_completed_after(Handle& h, microseconds delay, microseconds timeout, Status s = Status::Ok()) {
  std::thread t([&] {
    std::this_thread::sleep_for(delay);
    h.complete(s);
  });
  bool done = h.wait_for(timeout);
  t.join();
  return done;
}

// A Progress whose steps must be a waiter's, the `n`-th of which completes `*target`; `*steps` counts them.
std::shared_ptr<hvd::Progress> completing_on_step(int n, Handle** target, int* steps) {
  return std::make_shared<hvd::Progress>([=](bool by_waiter) {
    CHECK(by_waiter);
    if (++*steps == n) (*target)->complete(Status::Ok());
    return hvd::Progress::Stepped::Worked;
  });
}

}  // namespace

TEST_CASE("handle_wait_sees_a_completion_during_its_spin") {
  Handle h(50000);  // a spin longer than the delay: the completion is seen while polling
  CHECK(wait_while_completed_after(h, microseconds(2000), seconds(5)));
  CHECK(h.poll());
  CHECK(h.status().ok());
}

TEST_CASE("handle_wait_sleeps_after_its_spin_and_still_wakes") {
  Handle h(50);
  Status failed = Status::Error(Status::Code::Aborted, "stopped");
  CHECK(wait_while_completed_after(h, microseconds(20000), seconds(5), failed));
  CHECK(h.status().message == "stopped");
}

TEST_CASE("handle_wait_times_out_with_and_without_spin") {
  for (int64_t spin : {0, 50, 100000}) {
    Handle h(spin);
    auto start = steady_clock::now();
    CHECK(!h.wait_for(milliseconds(5)));  // a spin longer than the timeout stops at the timeout
    auto took = steady_clock::now() - start;
    CHECK(took >= milliseconds(5));
    CHECK(took < seconds(2));
    CHECK(!h.poll());
  }
}

TEST_CASE("handle_completes_once") {
  Handle h;
  h.complete(Status::Ok());
  h.complete(Status::Error(Status::Code::Aborted, "late"));
  CHECK(h.wait_for(microseconds(0)));
  CHECK(h.status().ok());
}

TEST_CASE("a_waiter_runs_the_steps_that_complete_its_own_operation") {
  // No engine thread here: only the waiter's own steps can complete the handle.
  Handle* h = nullptr;
  int steps = 0;
  auto progress = completing_on_step(3, &h, &steps);
  Handle handle(seconds(5).count() * 1000000, progress);
  h = &handle;
  CHECK(handle.wait_for(seconds(5)));
  CHECK(steps == 3);
  CHECK_FALSE(progress->driven());  // the waiter stopped driving when it returned
}

TEST_CASE("steps_never_overlap_and_stop_once_detached") {
  std::atomic<int> inside{0}, most{0}, ran{0};
  hvd::Progress progress([&](bool) {
    most = std::max(most.load(), ++inside);
    std::this_thread::sleep_for(microseconds(200));
    --inside;
    ++ran;
    return hvd::Progress::Stepped::Worked;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&progress, t] {
      for (int i = 0; i < 50; ++i) {
        if (t % 2) progress.try_step();
        else progress.step();
      }
    });
  for (auto& t : threads) t.join();
  CHECK(most == 1);
  CHECK(ran > 0);
  const int before = ran;
  progress.detach();
  CHECK(progress.try_step() == hvd::Progress::Stepped::NotRun);
  CHECK_FALSE(progress.step());
  CHECK(ran == before);
}

TEST_CASE("a_waiter_of_one_of_many_operations_runs_the_steps_too") {
  // Several operations in flight: the waiter still runs the steps (the engine thread sleeps meanwhile), and
  // counts as driving, so MPI does not yield the core inside their collectives (mpi_yield.h).
  Handle* h = nullptr;
  int steps = 0;
  auto progress = completing_on_step(3, &h, &steps);
  progress->set_lone(false);
  Handle handle(seconds(5).count() * 1000000, progress);
  h = &handle;
  CHECK(handle.wait_for(seconds(5)));
  CHECK(steps == 3);
  CHECK_FALSE(progress->driven());
}

TEST_CASE("a_waiter_shut_out_of_the_step_sleeps_instead_of_taking_turns_on_the_core") {
  // Another thread (the engine thread, in a long collective) holds the step: the waiter yields briefly,
  // then sleeps until the operation completes, even with a spin time far longer than the collective. Its
  // CPU time tells which: a waiter that kept yielding would run for most of the 200 ms, on any machine.
  std::atomic<bool> holding{false};
  auto progress = std::make_shared<hvd::Progress>([&](bool by_waiter) {
    CHECK_FALSE(by_waiter);
    holding = true;
    std::this_thread::sleep_for(milliseconds(200));
    return hvd::Progress::Stepped::Worked;
  });
  Handle handle(seconds(5).count() * 1000000, progress);
  std::thread engine([&] {
    progress->step();
    handle.complete(Status::Ok());
  });
  while (!holding) std::this_thread::yield();
  timespec before{}, after{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before);
  CHECK(handle.wait_for(seconds(5)));
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &after);
  engine.join();
  const double cpu_ms = (after.tv_sec - before.tv_sec) * 1e3 + (after.tv_nsec - before.tv_nsec) / 1e6;
  CHECK(cpu_ms < 50);
  CHECK_FALSE(progress->driven());
}

TEST_CASE("a_poll_of_a_lone_operation_runs_one_step_itself_and_otherwise_only_yields") {
  // A loop of polls needs no engine thread for its lone operation, but steps only where waiters may
  // (a spin time) and only for the engine's only operation.
  Handle* h = nullptr;
  int steps = 0;
  auto progress = completing_on_step(3, &h, &steps);
  Handle handle(2000, progress);
  h = &handle;
  CHECK_FALSE(handle.poll_step());
  CHECK_FALSE(handle.poll_step());
  CHECK(handle.poll_step());
  CHECK(steps == 3);
  CHECK(handle.poll_step());
  CHECK(steps == 3);  // done: no more steps
  CHECK_FALSE(progress->driven());

  Handle no_spin(0, progress), of_many(2000, progress);
  CHECK_FALSE(no_spin.poll_step());
  progress->set_lone(false);
  CHECK_FALSE(of_many.poll_step());
  CHECK(steps == 3);
}

TEST_CASE("a_poll_whose_step_leaves_more_than_one_operation_in_flight_wakes_the_engine_thread") {
  // Such a step may have taken operations that the engine thread was woken for and then found gone (it
  // sleeps on), and no poll runs a step past one in flight: the engine thread must carry them on.
  int wakes = 0;
  bool lone_after = true;
  hvd::Progress* p = nullptr;
  auto progress = std::make_shared<hvd::Progress>(
      [&](bool) {
        p->set_lone(lone_after);
        return hvd::Progress::Stepped::Worked;
      },
      [&] { ++wakes; });
  p = progress.get();
  Handle handle(2000, progress);
  CHECK_FALSE(handle.poll_step());  // a lone operation stays the poll's to step
  CHECK(wakes == 0);
  lone_after = false;
  CHECK_FALSE(handle.poll_step());
  CHECK(wakes == 1);
  CHECK_FALSE(handle.poll_step());  // no step past one in flight, so no wake either
  CHECK(wakes == 1);
}

TEST_CASE("a_waiter_that_stops_running_the_steps_before_its_operation_is_done_wakes_the_engine_thread") {
  // The engine thread sleeps while a waiter drives, and a blocking call's enqueue does not wake it
  // (Handle::defer_wake): a waiter that leaves an unfinished operation wakes it, so it takes over at once.
  int wakes = 0, steps = 0;
  Handle* finish_on_second = nullptr;
  auto progress = std::make_shared<hvd::Progress>(
      [&](bool) {
        if (++steps == 2 && finish_on_second) finish_on_second->complete(Status::Ok());
        return hvd::Progress::Stepped::Worked;
      },
      [&] { ++wakes; });

  Handle driven(100000, progress);  // the waiter runs it to the end: nothing to hand over
  driven.defer_wake();
  finish_on_second = &driven;
  CHECK(driven.wait_for(seconds(5)));
  CHECK(wakes == 0);
  finish_on_second = nullptr;

  Handle spun(200, progress);  // its spin ends while it drives: one wake, deferred or not
  spun.defer_wake();
  CHECK_FALSE(spun.wait_for(milliseconds(2)));
  CHECK(wakes == 1);
  CHECK_FALSE(spun.wait_for(milliseconds(2)));  // it drove again
  CHECK(wakes == 2);

  Handle no_spin(0, progress);  // a waiter with no spin time does not drive
  no_spin.defer_wake();  // but the enqueue did not wake the engine thread: the waiter does, once
  CHECK_FALSE(no_spin.wait_for(milliseconds(1)));
  CHECK(wakes == 3);
  CHECK_FALSE(no_spin.wait_for(milliseconds(1)));
  CHECK(wakes == 3);

  Handle woke_by_enqueue(0, progress);  // neither drove nor deferred: the engine thread is at work
  CHECK_FALSE(woke_by_enqueue.wait_for(milliseconds(1)));
  CHECK(wakes == 3);

  progress->detach();  // the engine is gone: a late waiter's wake reaches nothing
  progress->wake();
  CHECK(wakes == 3);
}
