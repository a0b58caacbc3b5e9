// Handle: waiting polls for its spin time, then sleeps until completion or the timeout.
#include <chrono>
#include <thread>

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
