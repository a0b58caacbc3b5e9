#include "handle.h"

#include <algorithm>
#include <thread>

namespace hvd {
namespace {

// How long a waiter that does not drive the engine polls before it sleeps.
constexpr int64_t kPollUs = 50;

// A busy wait's breather that leaves the core's resources to its sibling hyper-thread: one pause. A step
// that finds nothing already takes longer than a pause, whose own length varies tenfold between CPU
// generations, and every pause more is time before a peer's reply is seen.
void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void Handle::on_complete(Callback cb) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!done_) {
    callback_ = std::move(cb);
    return;
  }
  Status s = status_;
  lk.unlock();
  cb(s);
}

void Handle::complete(Status s) {
  Callback cb;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (done_.load(std::memory_order_relaxed)) return;
    status_ = s;
    done_.store(true, std::memory_order_release);
    cb = std::move(callback_);
  }
  cv_.notify_all();
  if (cb) cb(s);
}

bool Handle::poll() const { return done_.load(std::memory_order_acquire); }

bool Handle::poll_step() const {
  if (poll()) return true;
  if (spin_us_ > 0 && progress_ && progress_->lone()) {
    const Progress::Stepped did = progress_->try_step();
    // That step may have taken operations queued since the last, which the engine thread, woken for them,
    // then found gone and slept on (up to its 20 ms sleep with nothing in flight). Past one in flight
    // no poll runs a step again: like a waiter that stops driving, it hands the engine back.
    if (did != Progress::Stepped::NotRun && !progress_->lone()) hand_back(true);
    if (did == Progress::Stepped::Worked || did == Progress::Stepped::Idle) return poll();
  }
  std::this_thread::yield();
  return poll();
}

void Handle::hand_back(bool drove) const {
  if (progress_ && (wake_deferred_.exchange(false, std::memory_order_relaxed) || drove)) progress_->wake();
}

bool Handle::wait_for(std::chrono::microseconds timeout) const {
  if (poll()) return true;
  // A waiter runs the engine's steps itself, for up to its spin time, whatever else is in flight: the engine
  // thread then sleeps, and the results need no hand-off from it, which on a rank's own core would wait for
  // this thread to give the core up. While another thread holds the step (the engine thread, in a
  // collective), the waiter yields, and past kPollUs of that it sleeps: a waiter that kept yielding would
  // take turns on the core that collective needs.
  const auto spin = std::min(timeout, std::chrono::microseconds(spin_us_));
  const auto poll_only = std::min(spin, std::chrono::microseconds(kPollUs));
  const auto start = std::chrono::steady_clock::now();
  auto shut_out_since = start;  // while the step is another thread's
  bool shut_out = false;
  Progress::Driving driving(progress_.get());  // on while this waiter drives, not turned on per step
  while (!poll()) {
    const auto now = std::chrono::steady_clock::now();
    if (now - start >= spin || (shut_out && now - shut_out_since >= poll_only)) break;
    if (!progress_) {  // the engine thread does the work
      if (now - start >= poll_only) break;
      std::this_thread::yield();
      continue;
    }
    driving.start();
    // After a step that found nothing to do, a pause, not a yield: yielding hands the core to any other
    // runnable thread for a whole time slice, which on a busy host is far longer than a reply takes.
    const Progress::Stepped did = progress_->try_step();
    if (did != Progress::Stepped::NotRun) {
      shut_out = false;
      if (did == Progress::Stepped::Idle) cpu_relax();
      continue;
    }
    if (!shut_out) shut_out_since = now;
    shut_out = true;
    std::this_thread::yield();
  }
  const bool drove = driving.stop();
  if (poll()) return true;
  hand_back(drove);
  const auto spent = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_for(lk, std::max(timeout - spent, std::chrono::microseconds(0)),
                      [this] { return done_.load(std::memory_order_relaxed); });
}

Status Handle::status() const {
  std::lock_guard<std::mutex> g(mu_);
  return status_;
}

}  // namespace hvd
