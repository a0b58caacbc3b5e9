#include "progress.h"

namespace hvd {

Progress::Stepped Progress::try_step() {
  if (refuses_waiters()) return Stepped::Refused;
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (!lk.owns_lock() || !step_) return Stepped::NotRun;
  const Stepped did = step_(true);
  if (did == Stepped::Refused) refused_.store(true, std::memory_order_relaxed);
  return did;
}

bool Progress::step() {
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  return lk.owns_lock() && step_ && step_(false) == Stepped::Worked;
}

void Progress::detach() {
  {
    std::lock_guard<std::mutex> g(mu_);
    step_ = nullptr;
  }
  std::lock_guard<std::mutex> g(wake_mu_);
  wake_ = nullptr;
}

void Progress::wake() {
  std::lock_guard<std::mutex> g(wake_mu_);
  if (wake_) wake_();
}

}  // namespace hvd
