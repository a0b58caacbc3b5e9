// The point in a producer's CUDA stream where a tensor becomes ready. Recorded by the caller
// when it enqueues the tensor; the engine's stream waits on it, so the engine waits for the
// work that produced the tensor, not for the whole device. Events are reused, from a pool per
// device: a wait already queued on one keeps the record it saw when the event is recorded again.
// Records are numbered in the order they were made, so that of several tensors from one stream
// the engine need only look at the newest: once it has passed, so have those before it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpu/gpu_runtime.h"

namespace hvd::gpu {

class ReadyEvent {
  struct Token {};  // only record() constructs one

 public:
  // Records an event on `stream` of `device` (the caller's current device is restored);
  // null with `error` set when CUDA refuses.
  static std::shared_ptr<ReadyEvent> record(const Runtime& rt, int device, cudaStream_t stream, std::string* error);
  ReadyEvent(Token, int device, cudaStream_t stream, cudaEvent_t e, uint64_t order)
      : device_(device), stream_(stream), event_(e), order_(order) {}
  ~ReadyEvent();
  ReadyEvent(const ReadyEvent&) = delete;
  ReadyEvent& operator=(const ReadyEvent&) = delete;

  cudaEvent_t event() const { return event_; }
  // Whether `other` was recorded on this one's stream (never so for the per-thread default stream,
  // which is another stream in each thread), and whether after it.
  bool same_stream(const ReadyEvent& other) const;
  bool after(const ReadyEvent& other) const { return order_ > other.order_; }

 private:
  int device_;
  cudaStream_t stream_;
  cudaEvent_t event_;
  uint64_t order_;
};

}  // namespace hvd::gpu
