#include "handle.h"

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
    if (done_) return;
    done_ = true;
    status_ = s;
    cb = std::move(callback_);
  }
  cv_.notify_all();
  if (cb) cb(s);
}

bool Handle::poll() const {
  std::lock_guard<std::mutex> g(mu_);
  return done_;
}

bool Handle::wait_for(std::chrono::microseconds timeout) const {
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_for(lk, timeout, [this] { return done_; });
}

Status Handle::status() const {
  std::lock_guard<std::mutex> g(mu_);
  return status_;
}

}  // namespace hvd
