// The point in a producer's CUDA stream where a tensor becomes ready. Recorded by the caller
// when it enqueues the tensor; the engine's stream waits on it, so the engine waits for the
// work that produced the tensor, not for the whole device. Events are reused, from a pool per
// device: a wait already queued on one keeps the record it saw when the event is recorded again.
#pragma once

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
  ReadyEvent(Token, int device, cudaEvent_t e) : device_(device), event_(e) {}
  ~ReadyEvent();
  ReadyEvent(const ReadyEvent&) = delete;
  ReadyEvent& operator=(const ReadyEvent&) = delete;

  cudaEvent_t event() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_;
};

}  // namespace hvd::gpu
