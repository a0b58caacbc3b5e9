// One operation a caller enqueued: its request, its buffers and its handle.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "handle.h"
#include "types.h"

namespace hvd {
namespace gpu {
class ReadyEvent;
}

struct TensorEntry {
  Request request;
  const void* input = nullptr;  // caller-owned; must stay alive until the handle completes
  void* output = nullptr;       // caller-owned, or null when the engine allocates it (handle)
  std::vector<int64_t> splits;  // alltoall: rows sent to each member; empty means equal
  std::shared_ptr<Handle> handle;
  int device = -1;                          // CUDA device of input/output; -1 in host memory
  std::shared_ptr<gpu::ReadyEvent> ready;   // GPU: input is ready once this event has passed
  // What a rank that has joined puts in (Engine::stand_in): in host memory even for a GPU response, whose
  // data phase moves it to `device` first.
  bool stand_in = false;
  int64_t enqueue_us = 0;
};

}  // namespace hvd
