#include "timeline.h"

#include <algorithm>

namespace hvd {

void EventLog::push(int32_t rank, Phase phase, const std::string& name, const char* op, int64_t start_us,
                    int64_t dur_us, int64_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  Event& e = slots_[next_ % slots_.size()];
  e.seq = next_++;
  e.rank = rank;
  e.phase = phase;
  e.name.assign(name);
  e.op.assign(op);
  e.start_us = start_us;
  e.dur_us = dur_us;
  e.bytes = bytes;
}

std::vector<Event> EventLog::drain(uint64_t since, size_t max, uint64_t* dropped) const {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t oldest = next_ > slots_.size() ? next_ - slots_.size() : 0;
  uint64_t from = std::max(since, oldest);
  if (dropped) *dropped = from - std::min(since, from);
  std::vector<Event> out;
  for (uint64_t s = from; s < next_ && out.size() < max; ++s) out.push_back(slots_[s % slots_.size()]);
  return out;
}

uint64_t EventLog::next_seq() const {
  std::lock_guard<std::mutex> g(mu_);
  return next_;
}

}  // namespace hvd
