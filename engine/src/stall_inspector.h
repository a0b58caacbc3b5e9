// Rank 0's stall check (HOROVOD_STALL_CHECK_*): the tensors some ranks submitted long ago and others
// have not, each described with the ranks still missing, and whether its wait has passed the time
// after which the job aborts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"
#include "coordinator.h"

namespace hvd {

struct StallFinding {
  std::string text;       // the tensor, how long it has waited, and the ranks that have not submitted it
  bool shutdown = false;  // past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS: the job aborts
};

class StallInspector {
 public:
  explicit StallInspector(const Config& config);
  bool enabled() const { return enabled_; }
  // The stalls found at `now_us` among the coordinator's pending tensors (each reported once per check
  // time; nothing when the check is off).
  std::vector<StallFinding> inspect(Coordinator& coordinator, int64_t now_us) const;

 private:
  bool enabled_;
  int64_t check_us_;
  double shutdown_s_;
};

}  // namespace hvd
