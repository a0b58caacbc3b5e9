// Response cache: tensors that repeat with the same signature get a small id, so later
// negotiation sends an int instead of a full request (Horovod's response-cache idea).
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "types.h"

namespace hvd {

// Holds at most one id per tensor (process set and name): an id whose tensor comes back with another
// signature is forgotten, so a name whose shape changes every step does not grow the cache. A tensor gets
// an id only when its name comes a second time: names used once (every unnamed op's automatic name, a name
// with the step in it) would otherwise fill the cache for the engine's life, and leave later names, a
// model's gradients among them, without ids.
class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity = 1024) : capacity_(capacity) {}

  // Coordinator: the id for this signature, a new one if needed; -1 for a name seen for the first time
  // (among the last `capacity` new ones), or when full.
  int32_t assign(const Request& signature);
  // Worker: remember the id the coordinator gave for this signature.
  void learn(int32_t id, const Request& signature);
  // Worker: the id to send for this request, or -1 if it must be sent in full.
  int32_t lookup(const Request& request) const;
  // Coordinator: the signature behind an id, or nullptr for an unknown id.
  const Request* get(int32_t id) const;
  // Forgets every entry of process set `set`, once it is removed (set ids are never reused, so its
  // entries would otherwise hold their room for good); returns their ids.
  std::vector<int32_t> drop_set(int32_t set);
  size_t size() const { return by_key_.size(); }

 private:
  void remember(int32_t id, const Request& signature);
  // Whether `key` came before, among the last capacity_ names seen once; notes it if not.
  bool seen_before(const TensorKey& key);

  size_t capacity_;
  std::unordered_map<TensorKey, int32_t, TensorKeyHash> by_key_;
  std::unordered_map<int32_t, Request> by_id_;
  int32_t next_id_ = 0;
  // The last capacity_ names seen without an id, and the order they came in (the same names, oldest first).
  std::unordered_set<TensorKey, TensorKeyHash> seen_;
  std::deque<TensorKey> seen_order_;
};

}  // namespace hvd
