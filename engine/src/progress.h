// Who moves the engine along. The engine thread runs the loop's steps; a thread that waits for a
// result may run them itself for a while (Handle::wait_for), so a small collective needs no hand-off
// to the engine thread and back, each of which waits for a thread to be scheduled. Steps never overlap:
// whoever runs one holds the step lock.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <utility>

namespace hvd {

class Progress {
 public:
  // What a step did: ran and did work, ran and found nothing, or did not run (another thread is running
  // one, or the engine is gone).
  enum class Stepped { Worked, Idle, NotRun };

  // `step(by_waiter)` runs one pass of the engine's loop. `wake` rouses the engine thread from its sleep.
  explicit Progress(std::function<Stepped(bool)> step, std::function<void()> wake = {})
      : step_(std::move(step)), wake_(std::move(wake)) {}

  // A waiter's step: runs one unless another thread is running one or the engine is gone.
  Stepped try_step();
  // The engine thread's step; false when it did no work, or another thread is running one (the engine
  // thread then idles instead of queueing for the lock behind a waiter that does the same work).
  bool step();
  // No step runs, and wake() does nothing, once this returns (the engine is stopping for good).
  void detach();
  // Rouses the engine thread, for a waiter that leaves an operation whose enqueue did not (Handle::defer_wake).
  void wake();

  // A waiter drives the engine while its Driving is on (and until it goes); the engine thread need not spin
  // meanwhile, and MPI does not yield the core inside the collectives that start then (mpi_yield.h).
  class Driving {
   public:
    explicit Driving(Progress* p) : p_(p) {}
    ~Driving() { stop(); }
    Driving(const Driving&) = delete;
    Driving& operator=(const Driving&) = delete;
    void start() {
      if (!on_) p_->drivers_.fetch_add(1, std::memory_order_relaxed);
      on_ = true;
    }
    // Whether it was on.
    bool stop() {
      if (on_) p_->drivers_.fetch_sub(1, std::memory_order_relaxed);
      return std::exchange(on_, false);
    }

   private:
    Progress* p_;
    bool on_ = false;
  };
  bool driven() const { return drivers_.load(std::memory_order_relaxed) > 0; }

  // Whether the engine had at most one operation in flight after its last step. Only a lone operation's
  // poll runs a step (Handle::poll_step): a loop that polls one of many would run steps for all of them
  // between its own work. A waiter runs them whatever is in flight (Handle::wait_for).
  bool lone() const { return lone_.load(std::memory_order_relaxed); }
  void set_lone(bool lone) { lone_.store(lone, std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::function<Stepped(bool)> step_;  // empty once detached
  std::mutex wake_mu_;              // not mu_: a step may hold that for a whole collective
  std::function<void()> wake_;      // empty once detached
  std::atomic<int> drivers_{0};
  std::atomic<bool> lone_{true};
};

}  // namespace hvd
