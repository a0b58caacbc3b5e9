#include "progress.h"

namespace hvd {

Progress::Stepped Progress::try_step() {
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (!lk.owns_lock() || !step_) return Stepped::NotRun;
  return step_(true);
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
