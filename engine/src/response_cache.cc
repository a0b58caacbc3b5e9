#include "response_cache.h"

namespace hvd {

int32_t ResponseCache::assign(const Request& signature) {
  auto it = by_name_.find(signature.name);
  if (it != by_name_.end() && by_id_.at(it->second).same_signature(signature)) return it->second;
  if (it == by_name_.end() && by_name_.size() >= capacity_) return -1;
  int32_t id = next_id_++;
  by_id_[id] = signature;
  by_name_[signature.name] = id;
  return id;
}

void ResponseCache::learn(int32_t id, const Request& signature) {
  if (id < 0 || by_id_.count(id)) return;  // an id never changes its signature: the coordinator gives a new one
  by_id_[id] = signature;
  by_name_[signature.name] = id;
}

int32_t ResponseCache::lookup(const Request& request) const {
  auto it = by_name_.find(request.name);
  if (it == by_name_.end()) return -1;
  return by_id_.at(it->second).same_signature(request) ? it->second : -1;
}

const Request* ResponseCache::get(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

}  // namespace hvd
