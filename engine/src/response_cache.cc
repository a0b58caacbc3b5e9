#include "response_cache.h"

namespace hvd {

void ResponseCache::remember(int32_t id, const Request& signature) {
  auto [it, fresh] = by_key_.try_emplace(signature.key(), id);
  if (!fresh) {
    by_id_.erase(it->second);  // the tensor's old signature: no rank will send its id again
    it->second = id;
  }
  Request& kept = by_id_[id] = signature;
  kept.data.clear();  // a carried input belongs to one operation, not to the signature
}

bool ResponseCache::seen_before(const TensorKey& key) {
  if (seen_.count(key)) return true;  // it stays until it is the oldest: an entry given an id is never asked for
  seen_.insert(key);
  seen_order_.push_back(key);
  if (seen_order_.size() > capacity_) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
  return false;
}

int32_t ResponseCache::assign(const Request& signature) {
  const TensorKey key = signature.key();
  auto it = by_key_.find(key);
  if (it != by_key_.end() && by_id_.at(it->second).same_signature(signature)) return it->second;
  if (it == by_key_.end() && (by_key_.size() >= capacity_ || !seen_before(key))) return -1;
  int32_t id = next_id_++;
  remember(id, signature);
  return id;
}

void ResponseCache::learn(int32_t id, const Request& signature) {
  if (id < 0 || by_id_.count(id)) return;  // an id never changes its signature: the coordinator gives a new one
  remember(id, signature);
}

int32_t ResponseCache::lookup(const Request& request) const {
  auto it = by_key_.find(request.key());
  if (it == by_key_.end()) return -1;
  return by_id_.at(it->second).same_signature(request) ? it->second : -1;
}

std::vector<int32_t> ResponseCache::drop_set(int32_t set) {
  std::vector<int32_t> ids;
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    if (it->first.process_set != set) {
      ++it;
      continue;
    }
    ids.push_back(it->second);
    by_id_.erase(it->second);
    it = by_key_.erase(it);
  }
  return ids;
}

const Request* ResponseCache::get(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

}  // namespace hvd
