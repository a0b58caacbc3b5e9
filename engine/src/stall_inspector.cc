#include "stall_inspector.h"

#include <sstream>

namespace hvd {

StallInspector::StallInspector(const Config& config)
    : enabled_(config.stall_check),
      check_us_(static_cast<int64_t>(config.stall_check_s * 1e6)),
      shutdown_s_(config.stall_shutdown_s) {}

std::vector<StallFinding> StallInspector::inspect(Coordinator& coordinator, int64_t now_us) const {
  std::vector<StallFinding> out;
  if (!enabled_) return out;
  for (const auto& st : coordinator.stalled(now_us, check_us_)) {
    std::ostringstream o;
    o << "tensor " << describe_key(st.key) << " has waited " << static_cast<int>(st.waited_seconds)
      << " s; ranks that have not submitted it: ";
    for (size_t i = 0; i < st.missing_ranks.size(); ++i) o << (i ? ", " : "") << st.missing_ranks[i];
    out.push_back({o.str(), shutdown_s_ > 0 && st.waited_seconds >= shutdown_s_});
  }
  return out;
}

}  // namespace hvd
