// The caller's side of Engine: what enqueue checks before an operation reaches the engine thread.
#include "clock.h"
#include "engine.h"

namespace hvd {

void Engine::check(const TensorEntry& e, std::shared_ptr<const ProcessSet>& set) const {
  if (!set || set->id != e.request.spec.process_set) set = sets_.get(e.request.spec.process_set);
  if (!set) throw InvalidArgument("unknown process set id " + std::to_string(e.request.spec.process_set));
  if (set->rank_in_set(topo_.rank) < 0)
    throw InvalidArgument("rank " + std::to_string(topo_.rank) + " is not a member of process set " +
                          std::to_string(set->id));
  if (e.request.spec.op == OpType::Broadcast && set->rank_in_set(e.request.spec.root_rank) < 0)
    throw InvalidArgument("root rank " + std::to_string(e.request.spec.root_rank) +
                          " is not a member of process set " + std::to_string(set->id));
  int claimed = gpu_device_.load();
  if (e.device >= 0 && claimed >= 0 && claimed != e.device)
    throw InvalidArgument("tensor '" + e.request.name + "' is on cuda:" + std::to_string(e.device) + ", but rank " +
                          std::to_string(topo_.rank) + " already runs GPU collectives on cuda:" +
                          std::to_string(claimed) + "; use one GPU per rank (its local rank's)");
}

std::shared_ptr<Handle> Engine::enqueue(TensorEntry entry) {
  std::vector<TensorEntry> one;
  one.push_back(std::move(entry));
  return enqueue(std::move(one))[0];
}

std::vector<std::shared_ptr<Handle>> Engine::enqueue(std::vector<TensorEntry> group, bool caller_waits) {
  int device = -1;
  std::shared_ptr<const ProcessSet> set;
  for (const auto& e : group) {
    check(e, set);
    if (e.device >= 0 && device >= 0 && e.device != device)
      throw InvalidArgument("tensor '" + e.request.name + "' is on cuda:" + std::to_string(e.device) +
                            ", but others of its group are on cuda:" + std::to_string(device) +
                            "; use one GPU per rank (its local rank's)");
    if (e.device >= 0) device = e.device;
  }
  if (device >= 0) {
    int claimed = -1;
    if (!gpu_device_.compare_exchange_strong(claimed, device) && claimed != device)
      for (auto& e : group) check(e, set);  // another thread claimed another device meanwhile: this throws
  }
  return queue(std::move(group), caller_waits);
}

std::vector<std::shared_ptr<Handle>> Engine::refuse(const OpSpec& spec, const std::vector<std::string>& names,
                                                    const std::string& why) {
  std::shared_ptr<const ProcessSet> set = sets_.get(spec.process_set);
  if (!set || set->ranks.size() < 2 || set->rank_in_set(topo_.rank) < 0) return {};  // no member to tell
  std::vector<TensorEntry> group(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    group[i].request.spec = spec;
    group[i].request.name = names[i];
    group[i].request.refusal = why.empty() ? "its call raised an error with no message" : why;  // never empty
  }
  try {
    return queue(std::move(group), false);
  } catch (const InvalidArgument&) {
    return {};  // a name already in flight on this rank: that operation is the one the members are matching
  }
}

std::vector<std::shared_ptr<Handle>> Engine::queue(std::vector<TensorEntry> group, bool caller_waits) {
  std::vector<std::shared_ptr<Handle>> handles;
  handles.reserve(group.size());
  int64_t now = now_us();
  if (group.size() > 1)  // a lone tensor keeps Request's defaults
    for (size_t i = 0; i < group.size(); ++i) {
      group[i].request.group_size = static_cast<int32_t>(group.size());
      if (i > 0) group[i].request.group = group[0].request.name;
    }
  for (auto& e : group) {
    e.request.rank = topo_.rank;
    e.handle = std::make_shared<Handle>(wait_spin_us_, progress_);
    e.enqueue_us = now;
    handles.push_back(e.handle);
  }
  std::unique_lock<std::mutex> lk(mu_);
  if (state_ != State::Running || stop_requested_) {
    Status s = stop_status_.ok() ? Status::Error(Status::Code::Shutdown, "the engine is shut down")
                                 : left_unsubmitted(stop_status_);
    lk.unlock();
    for (auto& h : handles) h->complete(s);
    return handles;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    auto [live, fresh] = live_names_.insert(group[i].request.key());
    if (fresh) continue;
    const TensorKey key = *live;  // a copy: the erasures below may remove it
    bool twice = false;
    for (size_t j = 0; j < i; ++j) {
      twice |= group[j].request.key() == key;
      live_names_.erase(group[j].request.key());
    }
    const std::string where = key.process_set ? " in process set " + std::to_string(key.process_set) : "";
    throw InvalidArgument(twice ? "the name '" + key.name + "' appears twice in one group; names must be unique"
                                : "a tensor named '" + key.name + "' is already in flight" + where + " on rank " +
                                      std::to_string(topo_.rank) +
                                      "; names must be unique until their operation completes");
  }
  // A blocking call's lone operation: its waiter runs the steps (Handle::wait_for), so waking the engine
  // thread (a system call, and a thread that then contends for the step) only slows it down.
  const bool deferred = caller_waits && handles.size() == 1 && wait_spin_us_ > 0 &&
                        !in_flight_.load(std::memory_order_relaxed);  // nothing in flight: lone, too
  if (deferred) handles[0]->defer_wake();
  for (auto& e : group) queue_.push_back(std::move(e));
  lk.unlock();
  if (!deferred) cv_.notify_all();
  return handles;
}

}  // namespace hvd
