#include "gpu/host_plan.h"

#include <algorithm>
#include <map>

namespace hvd::gpu {

HostPlan plan_hosts(const std::vector<int>& host_of, int me) {
  HostPlan p;
  std::map<int, int> index;  // host id -> host index, numbered by first member
  std::vector<int> host_index(host_of.size()), local_rank_of(host_of.size());
  for (size_t i = 0; i < host_of.size(); ++i) {
    auto it = index.emplace(host_of[i], static_cast<int>(p.host_sizes.size())).first;
    if (it->second == static_cast<int>(p.host_sizes.size())) p.host_sizes.push_back(0);
    host_index[i] = it->second;
    local_rank_of[i] = p.host_sizes[it->second]++;
  }
  p.multi_host = p.host_sizes.size() > 1;
  p.homogeneous = !p.host_sizes.empty() &&
                  std::all_of(p.host_sizes.begin(), p.host_sizes.end(), [&](int n) { return n == p.host_sizes[0]; });
  if (me < 0 || me >= static_cast<int>(host_of.size())) return p;
  p.host = host_index[me];
  p.local_rank = local_rank_of[me];
  for (size_t i = 0; i < host_of.size(); ++i) {
    const int m = static_cast<int>(i);
    if (host_index[i] == p.host) p.local_members.push_back(m);
    if (local_rank_of[i] == p.local_rank) {
      if (m == me) p.cross_rank = static_cast<int>(p.cross_members.size());
      p.cross_members.push_back(m);
    }
  }
  return p;
}

std::vector<int> grouped_hosts(const std::vector<int>& ranks, int ranks_per_host) {
  std::vector<int> h;
  for (int r : ranks) h.push_back(ranks_per_host > 0 ? r / ranks_per_host : 0);
  return h;
}

ShardPlan plan_shards(int64_t count, int local_size, int local_rank) {
  ShardPlan s;
  if (local_size < 1) return s;
  s.shard = (count + local_size - 1) / local_size;
  s.padded = s.shard * local_size;
  s.offset = static_cast<int64_t>(local_rank) * s.shard;
  return s;
}

}  // namespace hvd::gpu
