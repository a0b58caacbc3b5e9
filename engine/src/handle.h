// Completion handle of one enqueued operation: waitable from any thread, with the outputs
// the engine allocates itself (allgather, alltoall, reducescatter).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "memory_advice.h"
#include "progress.h"
#include "status.h"

namespace hvd {

// An engine-allocated host result. Left uninitialised: the collective writes every byte, so zeroing it
// first would be one more pass over the result's memory. A large one is on huge pages (memory_advice.h).
class HostBuffer {
 public:
  // Replaces any earlier contents with `bytes` of fresh, uninitialised memory.
  void allocate(size_t bytes) {
    data_.reset(new char[bytes]);
    size_ = bytes;
    if (bytes >= kHugePagesFrom) advise_huge_pages(data_.get(), bytes);
  }
  char* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
};

class Handle : public std::enable_shared_from_this<Handle> {
 public:
  using Callback = std::function<void(const Status&)>;

  // `spin_us`: how long a waiter keeps working before it sleeps: running the engine's steps itself
  // through `progress` (when given and free), else polling. Waking a sleeping thread costs more than a
  // small collective takes, so this cuts their latency.
  explicit Handle(int64_t spin_us = 0, std::shared_ptr<Progress> progress = nullptr)
      : spin_us_(spin_us), progress_(std::move(progress)) {}

  // Runs once the operation has finished, on the engine thread (or at once if already done).
  void on_complete(Callback cb);
  void complete(Status s);
  bool poll() const;
  // A poll that helps the operation along, for a caller that polls in a loop: when not done, and the
  // operation is the engine's only one and the handle has a spin time, it runs one engine step itself (as a
  // waiter does), so the loop needs no hand-off to the engine thread; otherwise it gives up the core for a
  // moment, so a loop does not keep the engine thread from its core. A step that leaves more than one
  // operation in flight wakes the engine thread, which carries them on. True when done.
  bool poll_step() const;
  // Waits up to `timeout` (working for up to the handle's spin time first); true when done.
  bool wait_for(std::chrono::microseconds timeout) const;
  // The enqueue left the engine thread asleep, as the caller waits at once and runs the lone operation's
  // steps itself: its waiter wakes the engine thread if it stops doing so before the operation is done.
  void defer_wake() { wake_deferred_.store(true, std::memory_order_relaxed); }
  Status status() const;

  // Engine-allocated results; read them only after completion.
  HostBuffer output;
  std::vector<int64_t> output_shape;
  std::vector<int64_t> received_splits;
  // GPU tensors: the engine-allocated device result (freed with its last owner).
  std::shared_ptr<void> device_output;
  size_t device_output_bytes = 0;
  int device = -1;

 private:
  // For a waiter that stops running the steps before the operation is done: wakes the engine thread, which
  // sleeps while a waiter drives (`drove`) or was not woken by the enqueue (deferred; once).
  void hand_back(bool drove) const;

  const int64_t spin_us_;
  const std::shared_ptr<Progress> progress_;
  mutable std::atomic<bool> wake_deferred_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> done_{false};  // set under mu_, so a waiter on cv_ cannot miss it; read without it
  Status status_;
  Callback callback_;
};

}  // namespace hvd
