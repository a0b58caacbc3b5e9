// Hierarchical allreduce (HOROVOD_HIERARCHICAL_ALLREDUCE=1) for a process set that spans hosts
// with the same number of members on each: NCCL reduce-scatter within the host, MPI allreduce of
// each member's shard across hosts (staged through pinned memory), NCCL allgather within the
// host. This file holds the communicators; the steps are GpuCollectives::run_hierarchical, in
// hierarchical.cc, and the arithmetic is host_plan.h.
#pragma once

#include <mpi.h>

#include <memory>

#include "gpu/gpu_runtime.h"
#include "gpu/host_plan.h"
#include "process_sets.h"

namespace hvd::gpu {

class HostHierarchy {
 public:
  // Collective over the members of `set`, each on its own GPU (already the current device).
  // Null when the set is on one host (nothing to gain), when its hosts have different numbers
  // of members, or when the host's NCCL communicator cannot be made (a warning, once): the
  // flat NCCL allreduce serves the set then. `ranks_per_host` > 0 puts that many consecutive
  // global ranks on each host instead of asking MPI which share memory (a testing aid).
  static std::unique_ptr<HostHierarchy> create(const Runtime& rt, const ProcessSet& set, int global_rank,
                                               int ranks_per_host);
  HostHierarchy(const Runtime& rt, HostPlan plan) : rt_(rt), plan_(std::move(plan)) {}
  ~HostHierarchy();
  HostHierarchy(const HostHierarchy&) = delete;
  HostHierarchy& operator=(const HostHierarchy&) = delete;

  const HostPlan& plan() const { return plan_; }
  ncclComm_t local() const { return local_; }  // NCCL among this host's members
  MPI_Comm cross() const { return cross_; }    // MPI among the members with this local rank
  void abort();

 private:
  const Runtime& rt_;
  HostPlan plan_;
  ncclComm_t local_ = nullptr;
  MPI_Comm cross_ = MPI_COMM_NULL;
  bool aborted_ = false;
};

}  // namespace hvd::gpu
