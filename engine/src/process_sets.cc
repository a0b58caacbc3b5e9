#include "process_sets.h"

#include <algorithm>

namespace hvd {

int ProcessSet::rank_in_set(int global_rank) const {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), global_rank);
  return (it != ranks.end() && *it == global_rank) ? static_cast<int>(it - ranks.begin()) : -1;
}

void ProcessSetTable::add(std::shared_ptr<const ProcessSet> ps) {
  std::lock_guard<std::mutex> g(mu_);
  sets_[ps->id] = std::move(ps);
}

std::shared_ptr<const ProcessSet> ProcessSetTable::remove(int32_t id) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = sets_.find(id);
  if (it == sets_.end()) return nullptr;
  auto ps = it->second;
  sets_.erase(it);
  return ps;
}

std::shared_ptr<const ProcessSet> ProcessSetTable::get(int32_t id) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : it->second;
}

bool ProcessSetTable::any_without(int rank) const {
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& [id, ps] : sets_)
    if (ps->rank_in_set(rank) < 0) return true;
  return false;
}

std::vector<std::shared_ptr<const ProcessSet>> ProcessSetTable::take_all() {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::shared_ptr<const ProcessSet>> all;
  for (auto& [id, ps] : sets_) all.push_back(std::move(ps));
  sets_.clear();
  return all;
}

}  // namespace hvd
