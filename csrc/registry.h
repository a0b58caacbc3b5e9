// The process-wide engine that module.cc owns, as the other binding files reach it.
#pragma once

#include <memory>
#include <vector>

#include "engine.h"

namespace jhvd {

// The handles of one enqueue call (one operation, or a group), which Python waits for as one.
struct HandleGroup {
  std::vector<std::shared_ptr<hvd::Handle>> handles;
};

// The dtype of a code Python passes; throws hvd::InvalidArgument for one out of range (contracts.cc).
hvd::DataType data_type(int code);

// Enqueues a group on the process-wide engine (all or none of it). Throws hvd::InvalidArgument for
// bad requests and std::runtime_error when no engine is running.
HandleGroup enqueue_entries(std::vector<hvd::TensorEntry> group);

}  // namespace jhvd
