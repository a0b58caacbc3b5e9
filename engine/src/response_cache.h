// Response cache: names that repeat with the same signature get a small id, so later
// negotiation sends an int instead of a full request (Horovod's response-cache idea).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "types.h"

namespace hvd {

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
  size_t size() const { return by_name_.size(); }

 private:
  size_t capacity_;
  std::unordered_map<std::string, int32_t> by_name_;
  std::unordered_map<int32_t, Request> by_id_;
  int32_t next_id_ = 0;
};

}  // namespace hvd
