// The data phase of the engine: runs one negotiated response on this rank's tensors. MpiDataPlane
// runs it over MPI (host tensors) and NCCL (GPU tensors); the engine's C++ tests put an in-process
// one behind engines whose control messages go through an in-process transport.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "process_sets.h"
#include "status.h"
#include "tensor_entry.h"
#include "timeline.h"

namespace hvd {

class DataPlane {
 public:
  // A timeline span of the response being run, with its own op label (e.g. "nccl_allreduce") and end.
  using Span = std::function<void(Phase, const char* op, int64_t start_us, int64_t end_us)>;

  virtual ~DataPlane() = default;
  // Runs `r` over the members of `set` on this rank's `entries` (engine thread); every member runs the
  // same responses in the same order.
  virtual Status run(const Response& r, std::vector<TensorEntry*>& entries, const ProcessSet& set,
                     const Span& span) = 0;
  // Drops what the data plane keeps for a removed process set (any thread; none of its ops in flight).
  virtual void release_set(int32_t id) = 0;
};

}  // namespace hvd
