#include "handle.h"

#include <algorithm>
#include <thread>

namespace hvd {

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
  auto spin = std::min(timeout, std::chrono::microseconds(spin_us_));
  auto start = std::chrono::steady_clock::now();
  while (!poll()) {
    auto spent = std::chrono::steady_clock::now() - start;
    if (spent >= spin) {
      std::unique_lock<std::mutex> lk(mu_);
      return cv_.wait_for(lk, timeout - std::chrono::duration_cast<std::chrono::microseconds>(spent),
                          [this] { return done_.load(std::memory_order_relaxed); });
    }
    std::this_thread::yield();
  }
  return true;
}

Status Handle::status() const {
  std::lock_guard<std::mutex> g(mu_);
  return status_;
}

}  // namespace hvd
