// The process-wide engine that module.cc owns, as the other binding files reach it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine.h"

namespace jhvd {

// The handles of one enqueue call (one operation, or a group), which Python waits for as one.
struct HandleGroup {
  std::vector<std::shared_ptr<hvd::Handle>> handles;
};

// The dtype of a code Python passes; throws hvd::InvalidArgument for one out of range (contracts.cc).
hvd::DataType data_type(int code);

// An OpSpec from the codes Python passes; hvd::InvalidArgument for an op or reduce op out of range.
hvd::OpSpec op_spec(int op, int reduce, int process_set, int root_rank, double prescale, double postscale);

// Rejects, with a TypeError naming `what`, a reduction (allreduce, reducescatter) the dtypes `codes` cannot
// do: Average of bool, scaling bool and, on the GPU (`on_device`), any reduction of int16 or uint16, which
// NCCL lacks, and scaling any dtype but a floating-point one, since NCCL multiplies integers by an integer
// factor. Host tensors of the other dtypes may be scaled, as in Horovod: integers in float64, the result
// cast back (toward zero).
void check_reduce(const std::vector<int>& codes, hvd::ReduceOp op, double prescale, double postscale,
                  const std::string& what, bool on_device);

// Enqueues a group on the process-wide engine (all or none of it). Throws hvd::InvalidArgument for
// bad requests and std::runtime_error when no engine is running.
HandleGroup enqueue_entries(std::vector<hvd::TensorEntry> group, bool caller_waits = false);

// A call that failed this rank's checks: tells the set's other members, so that their operations of `names`
// fail saying `why` instead of waiting (Engine::refuse), and returns once every member has reached them (with
// the GIL released; Ctrl-C raises), so that the caller may use the names again at once. No engine: nothing.
void refuse_entries(const hvd::OpSpec& spec, const std::vector<std::string>& names, const std::string& why);

}  // namespace jhvd
