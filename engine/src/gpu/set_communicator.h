// How one process set runs GPU collectives on this rank: an NCCL communicator on this rank's
// GPU, or host staging through MPI when NCCL cannot run there (two ranks share a GPU, NCCL is
// missing on some rank, or JUPYTER_HVD_GPU_STAGING=1 asks for it); with NCCL, and when asked
// for, also the host and cross-host communicators of hierarchical allreduce.
#pragma once

#include <memory>
#include <string>

#include "gpu/gpu_runtime.h"
#include "gpu/hierarchical.h"
#include "process_sets.h"
#include "status.h"

namespace hvd::gpu {

struct CommOptions {
  bool force_staging = false;  // JUPYTER_HVD_GPU_STAGING=1
  bool hierarchical = false;   // HOROVOD_HIERARCHICAL_ALLREDUCE=1
  int ranks_per_host = 0;      // JUPYTER_HVD_TEST_RANKS_PER_HOST (see HostHierarchy::create)
  bool batch_copies = true;    // HOROVOD_BATCH_D2D_MEMCOPIES: fusion copies as one cudaMemcpyBatchAsync
};

class SetCommunicator {
 public:
  // Collective over the members of `set`: each calls it for the same response. `local` is this
  // rank's own readiness (a failure anywhere makes every member return an error, none hangs).
  static std::unique_ptr<SetCommunicator> create(const Runtime& rt, const ProcessSet& set, int global_rank,
                                                 int device, const CommOptions& options, const Status& local,
                                                 Status* error);
  SetCommunicator(const Runtime& rt, int device) : rt_(rt), device_(device) {}
  ~SetCommunicator();
  SetCommunicator(const SetCommunicator&) = delete;
  SetCommunicator& operator=(const SetCommunicator&) = delete;

  int device() const { return device_; }
  ncclComm_t comm() const { return comm_; }
  bool staged() const { return comm_ == nullptr; }
  // Null unless hierarchical allreduce was asked for and the set qualifies (HostHierarchy::create).
  HostHierarchy* hierarchy() const { return hierarchy_.get(); }
  const std::string& staged_reason() const { return staged_reason_; }
  // Aborts the NCCL communicator (a peer failed or the engine stops); later ops fail at once.
  void abort();
  bool broken() const { return broken_; }

 private:
  const Runtime& rt_;
  int device_;
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<HostHierarchy> hierarchy_;
  std::string staged_reason_;
  bool broken_ = false;
};

}  // namespace hvd::gpu
