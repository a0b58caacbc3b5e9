#include "handle.h"

#include <algorithm>
#include <optional>
#include <thread>

namespace hvd {
namespace {

// A short busy wait that leaves the core's resources to its sibling hyper-thread.
void cpu_relax() {
  for (int i = 0; i < 32; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
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

bool Handle::wait_for(std::chrono::microseconds timeout) const {
  if (poll()) return true;
  const auto spin = std::min(timeout, std::chrono::microseconds(spin_us_));
  const auto start = std::chrono::steady_clock::now();
  if (spin.count() > 0) {
    std::optional<Progress::Driving> driving;
    if (progress_) driving.emplace(*progress_);
    while (!poll()) {
      if (std::chrono::steady_clock::now() - start >= spin) break;
      // After a step that found nothing to do, a pause, not a yield: yielding hands the core to any other
      // runnable thread for a whole time slice, which on a busy host is far longer than a reply takes. But
      // when another thread holds the step (the engine thread, in a collective), yield: it may need this core.
      const Progress::Stepped did = progress_ ? progress_->try_step() : Progress::Stepped::Idle;
      if (did == Progress::Stepped::Idle) cpu_relax();
      else if (did == Progress::Stepped::NotRun) std::this_thread::yield();
    }
    if (poll()) return true;
  }
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
