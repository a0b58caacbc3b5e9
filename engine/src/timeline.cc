#include "timeline.h"

#include <algorithm>

namespace hvd {

void EventLog::push(Event e) {
  std::lock_guard<std::mutex> g(mu_);
  e.seq = next_;
  slots_[next_ % slots_.size()] = std::move(e);
  ++next_;
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
