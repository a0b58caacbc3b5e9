// The arithmetic of hierarchical allreduce, apart from CUDA and MPI so that it can be tested
// anywhere: which members of a process set form this rank's host group and its cross-host
// group, whether the set qualifies (more than one host, the same number of members on each),
// and how a fused buffer is padded and cut into one shard per member of a host.
#pragma once

#include <cstdint>
#include <vector>

namespace hvd::gpu {

struct HostPlan {
  bool multi_host = false;   // the members span more than one host
  bool homogeneous = false;  // every host has the same number of members
  std::vector<int> host_sizes;  // members per host, hosts in the order of their first member
  int host = -1;             // this member's host: an index into host_sizes
  // This member's host group (local) and the members with its local rank on the other hosts
  // (cross): positions in the set, ascending; local_rank / cross_rank are this member's place.
  std::vector<int> local_members, cross_members;
  int local_rank = -1, cross_rank = -1;

  int local_size() const { return static_cast<int>(local_members.size()); }
  int cross_size() const { return static_cast<int>(cross_members.size()); }
  // NCCL within the host and MPI across hosts pays off, and is well defined, only then.
  bool hierarchical() const { return multi_host && homogeneous; }
};

// `host_of[i]` is an id that members i and j share exactly when they are on one host (set order);
// `me` is this member's position in the set.
HostPlan plan_hosts(const std::vector<int>& host_of, int me);

// Host ids for the members (global ranks, in set order) of a job whose hosts hold
// `ranks_per_host` consecutive ranks each: a testing aid that lets one machine stand in for several.
std::vector<int> grouped_hosts(const std::vector<int>& ranks, int ranks_per_host);

struct ShardPlan {
  int64_t padded = 0;  // elements of the fused buffer: count rounded up to a multiple of local_size
  int64_t shard = 0;   // elements each member of a host reduces across hosts: padded / local_size
  int64_t offset = 0;  // where this member's shard starts: local_rank * shard
};

ShardPlan plan_shards(int64_t count, int local_size, int local_rank);

}  // namespace hvd::gpu
