// Bounded in-memory log of engine events (the oldest overwritten when full); readers drain by sequence number.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace hvd {

enum class Phase : uint8_t {
  Negotiate, Queue, MemcpyIn, Collective, MemcpyOut, Cycle, Stall, Abort,
  WaitForData,  // GPU tensors: the engine's stream waits for the producer's stream
};
const char* phase_name(Phase p);

struct Event {
  uint64_t seq = 0;
  int32_t rank = 0;
  Phase phase = Phase::Negotiate;
  std::string name;    // tensor name (first tensor and a count when fused), or a message
  std::string op;      // e.g. "allreduce"; the collective phase is named after it
  int64_t start_us = 0;
  int64_t dur_us = 0;
  int64_t bytes = 0;
};

class EventLog {
 public:
  explicit EventLog(size_t capacity) : slots_(capacity) {}

  void push(Event e);
  // Events with seq >= `since`, at most `max`; `dropped` counts those overwritten before read.
  std::vector<Event> drain(uint64_t since, size_t max, uint64_t* dropped) const;
  uint64_t next_seq() const;

 private:
  mutable std::mutex mu_;
  std::vector<Event> slots_;
  uint64_t next_ = 0;
};

}  // namespace hvd
