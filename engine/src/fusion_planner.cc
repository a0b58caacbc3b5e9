#include "fusion_planner.h"

namespace hvd {
namespace {

bool fusable(const Response& a, const Response& b) {
  return a.kind == Response::Kind::Execute && b.kind == Response::Kind::Execute &&
         a.spec.op == OpType::Allreduce && a.spec == b.spec && a.stand_in_counts.empty() == b.stand_in_counts.empty();
}

}  // namespace

std::vector<Response> plan_fusion(std::vector<Response> ready, const std::vector<int64_t>& bytes,
                                  int64_t threshold, int64_t max_tensor) {
  if (ready.size() < 2) return ready;  // nothing to fuse with
  auto small = [&](size_t i) { return bytes[i] <= max_tensor; };
  std::vector<Response> out;
  out.reserve(ready.size());
  std::vector<bool> used(ready.size(), false);
  for (size_t i = 0; i < ready.size(); ++i) {
    if (used[i]) continue;
    used[i] = true;
    Response group = std::move(ready[i]);
    int64_t total = bytes[i];
    if (threshold > 0 && total < threshold && small(i)) {
      for (size_t j = i + 1; j < ready.size(); ++j) {
        if (used[j] || !small(j) || !fusable(group, ready[j]) || total + bytes[j] > threshold) continue;
        used[j] = true;
        total += bytes[j];
        group.names.push_back(std::move(ready[j].names[0]));
        group.cache_ids.push_back(ready[j].cache_ids[0]);
        group.stand_in_counts.insert(group.stand_in_counts.end(), ready[j].stand_in_counts.begin(),
                                     ready[j].stand_in_counts.end());
        // Carried while every tensor of the group is: once emptied, it stays so.
        if (group.carried.empty() || ready[j].carried.empty()) group.carried.clear();
        else group.carried.insert(group.carried.end(), ready[j].carried.begin(), ready[j].carried.end());
      }
    }
    out.push_back(std::move(group));
  }
  return out;
}

}  // namespace hvd
