// Response cache: tensors that repeat with the same signature get a small id, so later
// negotiation sends an int instead of a full request (Horovod's response-cache idea).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "types.h"

namespace hvd {

// Holds at most one id per tensor (process set and name): an id whose tensor comes back with another
// signature is forgotten, so a name whose shape changes every step does not grow the cache.
class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity = 1024) : capacity_(capacity) {}

  // Coordinator: the id for this signature, a new one if needed; -1 when full.
  int32_t assign(const Request& signature);
  // Worker: remember the id the coordinator gave for this signature.
  void learn(int32_t id, const Request& signature);
  // Worker: the id to send for this request, or -1 if it must be sent in full.
  int32_t lookup(const Request& request) const;
  // Coordinator: the signature behind an id, or nullptr for an unknown id.
  const Request* get(int32_t id) const;
  size_t size() const { return by_key_.size(); }

 private:
  void remember(int32_t id, const Request& signature);

  size_t capacity_;
  std::unordered_map<TensorKey, int32_t, TensorKeyHash> by_key_;
  std::unordered_map<int32_t, Request> by_id_;
  int32_t next_id_ = 0;
};

}  // namespace hvd
