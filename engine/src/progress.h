// Who moves the engine along. The engine thread runs the loop's steps; a thread that waits for a
// result may run them itself for a while (Handle::wait_for), so a small collective needs no hand-off
// to the engine thread and back, each of which waits for a thread to be scheduled. Steps never overlap:
// whoever runs one holds the step lock.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>

namespace hvd {

class Progress {
 public:
  // `step(by_waiter)` runs one pass of the engine's loop and returns whether it did any work; it may
  // refuse a waiter (GPU work stays on the engine thread).
  explicit Progress(std::function<bool(bool)> step) : step_(std::move(step)) {}

  // What a waiter's step did: ran and did work, ran and found nothing, or did not run (another thread is
  // running one, or the engine is gone or refused the waiter).
  enum class Stepped { Worked, Idle, NotRun };
  // A waiter's step: runs one unless another thread is running one or the engine is gone.
  Stepped try_step();
  // The engine thread's step; false when it did no work, or another thread is running one (the engine
  // thread then idles instead of queueing for the lock behind a waiter that does the same work).
  bool step();
  // No step runs once this returns (the engine is stopping for good).
  void detach();

  // Holds a count of this Progress up while it lives (after running `first`, if set).
  class Mark {
   public:
    Mark(std::atomic<int>& count, const std::function<void()>& first) : count_(count) {
      if (first) first();
      count_.fetch_add(1, std::memory_order_relaxed);
    }
    ~Mark() { count_.fetch_sub(1, std::memory_order_relaxed); }
    Mark(const Mark&) = delete;
    Mark& operator=(const Mark&) = delete;

   private:
    std::atomic<int>& count_;
  };

  // A waiter drives the engine while it holds a Driving; the engine thread need not spin meanwhile.
  class Driving : public Mark {
   public:
    explicit Driving(Progress& p) : Mark(p.drivers_, nullptr) {}
  };
  bool driven() const { return drivers_.load(std::memory_order_relaxed) > 0; }

  // A caller blocks in a wait for a result while it holds a Waiting (whether or not it drives); each
  // Waiting calls the wait hook first, if one is set.
  class Waiting : public Mark {
   public:
    explicit Waiting(Progress& p) : Mark(p.waiters_, p.wait_hook_) {}
  };
  bool waited() const { return waiters_.load(std::memory_order_relaxed) > 0; }
  // Set before any handle exists; it must not refer to the engine (handles may outlive it).
  void set_wait_hook(std::function<void()> hook) { wait_hook_ = std::move(hook); }

  // Whether the engine had at most one operation in flight after its last step. Only a lone operation's
  // waiter drives: with many in flight the engine thread is busy with them anyway, and a second busy thread
  // per rank takes a core the ranks' collectives need (see benchmarks/allreduce_bench.py's ResNet-50 step).
  bool lone() const { return lone_.load(std::memory_order_relaxed); }
  void set_lone(bool lone) { lone_.store(lone, std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::function<bool(bool)> step_;  // empty once detached
  std::function<void()> wait_hook_;
  std::atomic<int> drivers_{0};
  std::atomic<int> waiters_{0};
  std::atomic<bool> lone_{true};
};

}  // namespace hvd
