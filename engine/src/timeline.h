// Bounded in-memory log of engine events (the oldest overwritten when full); readers drain by sequence number.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "enum_list.h"

namespace hvd {

// The phases of timeline events, named as Horovod's timeline names them; the monitor widget gets
// this list with its state. WAIT_FOR_DATA: the engine's stream waits for a GPU tensor's producer.
// ABORT and SHUTDOWN: the engine stops, after a failure or at hvd.shutdown() (or the program's end).
#define HVD_PHASES(X)                                                                               \
  X(Negotiate, "NEGOTIATE") X(Queue, "QUEUE") X(MemcpyIn, "MEMCPY_IN_FUSION_BUFFER")                   \
  X(Collective, "COLLECTIVE") X(MemcpyOut, "MEMCPY_OUT_FUSION_BUFFER") X(Cycle, "CYCLE") X(Stall, "STALL") \
  X(Abort, "ABORT") X(WaitForData, "WAIT_FOR_DATA") X(Shutdown, "SHUTDOWN")

enum class Phase : uint8_t { HVD_PHASES(HVD_ENUM_VALUE) };
template <>
struct EnumNames<Phase> {
  static constexpr const char* names[] = {HVD_PHASES(HVD_ENUM_NAME)};
};
inline const char* phase_name(Phase p) { return enum_name(p); }

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

  // Writes the next event into its slot, whose strings keep their memory: a stream of events with names of
  // like length allocates nothing.
  void push(int32_t rank, Phase phase, const std::string& name, const char* op, int64_t start_us, int64_t dur_us,
            int64_t bytes);
  // Events with seq >= `since`, at most `max`; `dropped` counts those overwritten before read.
  std::vector<Event> drain(uint64_t since, size_t max, uint64_t* dropped) const;
  uint64_t next_seq() const;

 private:
  mutable std::mutex mu_;
  std::vector<Event> slots_;
  uint64_t next_ = 0;
};

}  // namespace hvd
