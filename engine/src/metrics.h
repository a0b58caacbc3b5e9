// Per-rank counters the engine thread updates and any thread reads.
#pragma once

#include <atomic>
#include <cstdint>

#include "types.h"

namespace hvd {

struct Metrics {
  static constexpr int kOps = static_cast<int>(enum_count<OpType>());
  std::atomic<int64_t> ops[kOps]{};         // completed tensors per OpType
  std::atomic<int64_t> bytes[kOps]{};       // payload bytes per OpType
  std::atomic<int64_t> negotiate_us{0};     // enqueue to response, summed over tensors
  std::atomic<int64_t> memcpy_in_us{0};
  std::atomic<int64_t> collective_us{0};
  std::atomic<int64_t> memcpy_out_us{0};
  std::atomic<int64_t> responses{0};        // collectives run (a fused group counts once)
  std::atomic<int64_t> fused_tensors{0};    // tensors that shared a response with others
  std::atomic<int64_t> cached_requests{0};  // requests sent as cache ids
  std::atomic<int64_t> full_requests{0};
  std::atomic<int64_t> carried_allreduces{0};  // responses run with no collective (Response::carried)
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> stalls{0};
  // The fusion threshold and cycle time in effect (rank 0's count; HOROVOD_AUTOTUNE changes them
  // there), whether rank 0's autotuner is still measuring, and how many settings it has measured.
  std::atomic<int64_t> fusion_threshold{0};
  std::atomic<int64_t> cycle_time_us{0};
  std::atomic<int64_t> autotune_settings{0};
  std::atomic<bool> autotuning{false};

  void count(OpType op, int64_t nbytes) {
    ops[static_cast<int>(op)] += 1;
    bytes[static_cast<int>(op)] += nbytes;
  }
};

}  // namespace hvd
