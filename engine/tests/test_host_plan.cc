// Hierarchical allreduce planning: host and cross groups, the homogeneity check, padding and
// shards. Pure arithmetic; the CUDA, NCCL and MPI steps it drives need GPUs on several hosts.
#include <doctest/doctest.h>
#include "gpu/host_plan.h"

using namespace hvd::gpu;

using V = std::vector<int>;

TEST_CASE("host_plan_one_host_is_not_hierarchical") {
  HostPlan p = plan_hosts({7, 7, 7, 7}, 2);
  CHECK(!p.multi_host);
  CHECK(p.homogeneous);
  CHECK(!p.hierarchical());
  CHECK(p.local_rank == 2);
  CHECK(p.local_size() == 4);
  CHECK(p.cross_size() == 1);
  CHECK(p.cross_rank == 0);
  CHECK(!plan_hosts({5}, 0).hierarchical());
}

TEST_CASE("host_plan_contiguous_hosts") {
  // Two hosts of two: set positions 0,1 on host "10", 2,3 on host "20".
  HostPlan p = plan_hosts({10, 10, 20, 20}, 3);
  CHECK(p.hierarchical());
  CHECK(p.host_sizes == V{2, 2});
  CHECK(p.host == 1);
  CHECK(p.local_members == V{2, 3});
  CHECK(p.local_rank == 1);
  CHECK(p.cross_members == V{1, 3});
  CHECK(p.cross_rank == 1);
  HostPlan q = plan_hosts({10, 10, 20, 20}, 0);
  CHECK(q.local_members == V{0, 1});
  CHECK(q.local_rank == 0);
  CHECK(q.cross_members == V{0, 2});
  CHECK(q.cross_rank == 0);
}

TEST_CASE("host_plan_interleaved_hosts_group_by_host_in_set_order") {
  // Round-robin placement: hosts A B A B.
  HostPlan p = plan_hosts({1, 2, 1, 2}, 2);
  CHECK(p.hierarchical());
  CHECK(p.host == 0);
  CHECK(p.local_members == V{0, 2});
  CHECK(p.local_rank == 1);
  CHECK(p.cross_members == V{2, 3});
  CHECK(p.cross_rank == 0);
  // The cross rank follows set order, not host order: host B's second member (3) comes after A's (2).
  HostPlan q = plan_hosts({1, 2, 2, 1}, 3);
  CHECK(q.local_members == V{0, 3});
  CHECK(q.local_rank == 1);
  CHECK(q.cross_members == V{2, 3});
  CHECK(q.cross_rank == 1);
}

TEST_CASE("host_plan_uneven_hosts_are_not_homogeneous") {
  HostPlan p = plan_hosts({0, 0, 0, 3}, 3);
  CHECK(p.multi_host);
  CHECK(!p.homogeneous);
  CHECK(!p.hierarchical());
  CHECK(p.host_sizes == V{3, 1});
}

TEST_CASE("host_plan_one_rank_per_host") {
  HostPlan p = plan_hosts({4, 5, 6}, 1);
  CHECK(p.hierarchical());
  CHECK(p.local_members == V{1});
  CHECK(p.local_rank == 0);
  CHECK(p.cross_members == V{0, 1, 2});
  CHECK(p.cross_rank == 1);
}

TEST_CASE("host_plan_groups_for_testing") {
  CHECK(grouped_hosts({0, 1, 2, 3}, 2) == V{0, 0, 1, 1});
  CHECK(grouped_hosts({0, 1, 2}, 1) == V{0, 1, 2});
  CHECK(grouped_hosts({0, 1, 2}, 0) == V{0, 0, 0});
  CHECK(!plan_hosts(grouped_hosts({0, 1, 2}, 2), 0).homogeneous);
  // A set of the even ranks of a job with two ranks per host: one member on each host.
  HostPlan even = plan_hosts(grouped_hosts({0, 2}, 2), 1);
  CHECK(even.hierarchical());
  CHECK(even.local_size() == 1);
  CHECK(even.cross_size() == 2);
  CHECK(even.cross_rank == 1);
}

TEST_CASE("shard_plan_pads_to_a_multiple_of_the_local_size") {
  ShardPlan s = plan_shards(10, 4, 3);
  CHECK(s.padded == 12);
  CHECK(s.shard == 3);
  CHECK(s.offset == 9);
  ShardPlan even = plan_shards(12, 4, 1);
  CHECK(even.padded == 12);
  CHECK(even.shard == 3);
  CHECK(even.offset == 3);
  ShardPlan one = plan_shards(7, 1, 0);
  CHECK(one.padded == 7);
  CHECK(one.shard == 7);
  CHECK(one.offset == 0);
  ShardPlan tiny = plan_shards(1, 4, 2);
  CHECK(tiny.padded == 4);
  CHECK(tiny.shard == 1);
  CHECK(tiny.offset == 2);
  ShardPlan none = plan_shards(0, 4, 2);
  CHECK(none.padded == 0);
  CHECK(none.shard == 0);
  ShardPlan big = plan_shards((int64_t{1} << 33) + 1, 8, 7);
  CHECK(big.shard == (int64_t{1} << 30) + 1);
  CHECK(big.padded == 8 * big.shard);
  CHECK(big.offset == 7 * big.shard);
}
