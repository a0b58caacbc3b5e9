// The data phase: runs one negotiated response on the member ranks' buffers over MPI.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "process_sets.h"
#include "reduction.h"
#include "status.h"
#include "tensor_entry.h"
#include "timeline.h"

namespace hvd {

// What a collective needs from the engine; `record` adds a timeline span for the response.
struct CollectiveContext {
  const ProcessSet& set;
  int global_rank;
  const Reductions& reductions;
  std::vector<char>& fusion_buffer;
  std::vector<char>& ring_buffer;  // the ring collectives' blocks in flight
  std::function<void(Phase, int64_t start_us)> record;
  int64_t sync_reduce_bytes = 0;  // allreduces and reducescatters of at least this many bytes start with a barrier; 0: none
  int64_t ring_allreduce_bytes = 0;  // allreduces of at least this many bytes run around a ring; 0: none
  // The largest count one MPI call takes (an int's range; tests lower it to reach the paths past it). Larger
  // buffers go in pieces of a 16th of it, and v-collectives whose counts or offsets pass it in other calls.
  int64_t max_count = INT32_MAX;
  int64_t piece() const { return std::max<int64_t>(1, max_count / 16); }
};

// An MPI return code as a Status naming the call.
Status mpi_status(int rc, const char* what);

Status run_allreduce(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es);
Status run_allgather(CollectiveContext& c, const Response& r, TensorEntry& e);
Status run_broadcast(CollectiveContext& c, const Response& r, TensorEntry& e);
Status run_alltoall(CollectiveContext& c, const Response& r, TensorEntry& e);
Status run_reducescatter(CollectiveContext& c, const Response& r, TensorEntry& e);
Status run_barrier(CollectiveContext& c);

}  // namespace hvd
