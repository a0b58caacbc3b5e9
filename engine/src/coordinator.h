// Rank 0's negotiation logic: which named tensors every member of their process set has
// submitted, whether the submissions agree, and in which order (fused) they run. No MPI here.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "response_cache.h"
#include "types.h"

namespace hvd {

struct StallReport {
  TensorKey key;
  std::vector<int> missing_ranks;
  double waited_seconds = 0;
};

class Coordinator {
 public:
  // `members(id)` returns the global ranks of process set `id`, or nullptr while it is unknown.
  using Membership = std::function<const std::vector<int>*(int32_t)>;

  // Responses carry their members' inputs (Response::carried) up to `carry_bytes` in all.
  Coordinator(Membership members, int64_t fusion_threshold, int64_t fusion_max_tensor, size_t cache_capacity,
              int64_t carry_bytes);

  // A request from `r.rank`. Requests for a process set that was removed are dropped: its members
  // failed them when they removed it.
  //
  // A join (OpType::Join, Horovod's hvd.join) marks its rank as joined in its set until every member has
  // joined: the set's other tensors are then ready without the joined members, which stand in for them
  // (Response::stand_in_counts) where they can (host allreduces and barriers), and for any other operation
  // the members that did submit get an error. The join's own response comes once every member has joined,
  // with the rank that joined last as its root_rank.
  void add(Request r, int64_t now_us);
  // A cached request by id from `rank`, with its carried input (Request::data); false when the id is unknown.
  // The id of a removed process set's tensor is known: its request is dropped, as add() drops the set's.
  bool add_cached(int32_t rank, int32_t id, std::vector<char> data, int64_t now_us);
  // Forgets the pending requests of a removed process set, and any that arrive for it later, and its
  // tensors' cache entries.
  void drop_set(int32_t id);
  // Validated, fused responses for every tensor that all members have submitted. An allreduce whose
  // members all carried their inputs (Request::data) comes back carried (Response::carried), unless its
  // fused group is not all carried or carries more than `carry_bytes`.
  std::vector<Response> take_ready();
  // Whether take_ready() has something; first looks again at tensors whose process set was not yet known,
  // since a set registered meanwhile may have made them ready.
  bool has_ready();
  // Whether holding the ready tensors could let later ones fuse with them: each is small enough to fuse
  // and together they are below the fusion threshold. A tensor too big to fuse, or a full fusion buffer,
  // gains nothing from waiting.
  bool worth_holding() const {
    return fusion_threshold_ > 0 && !ready_too_big_ && ready_bytes_ < fusion_threshold_;
  }
  // Tensors pending longer than `after_us`, each reported again every `after_us`.
  std::vector<StallReport> stalled(int64_t now_us, int64_t after_us);
  size_t pending() const { return pending_.size(); }
  int64_t oldest_ready_us() const { return oldest_ready_us_; }
  void set_fusion_threshold(int64_t bytes) { fusion_threshold_ = bytes; }

 private:
  struct Pending {
    std::vector<Request> requests;
    int64_t first_seen_us = 0;
    int64_t last_reported_us = 0;
    bool ready = false;  // in ready_ already
  };
  void check_ready(const TensorKey& key, Pending& p);
  // Whether the joined members of `ranks`' set, with those that submitted `p`, make up all of `ranks`.
  bool joined_cover(const TensorKey& key, const Pending& p, const std::vector<int>& ranks) const;
  void note_join(int32_t set, int32_t rank);
  // Fills in what joined members stand in for (the members of `ranks` without a request in `rs`), or returns
  // why they cannot.
  std::string stand_in(Response& r, const std::vector<Request>& rs, const std::vector<int>& ranks) const;
  // members_(id), looked up again only for another set than the last one's (a set's ranks never change
  // until it is removed, and drop_set forgets it): the lookup takes the process-set table's lock.
  const std::vector<int>* members(int32_t id);
  void recheck_waiting_for_set();
  // A call that failed whole (Response::whole_group): drops the requests of set `set` that each member of `failed`
  // made in the same call, which its member fails itself.
  void drop_calls(int32_t set, const std::vector<Request>& failed);
  std::string validate(const std::vector<Request>& rs, const std::vector<int>& ranks) const;

  Membership members_;
  int32_t last_set_ = -1;
  const std::vector<int>* last_members_ = nullptr;
  int64_t fusion_threshold_;
  int64_t fusion_max_tensor_;
  int64_t carry_bytes_;
  ResponseCache cache_;
  std::unordered_map<TensorKey, Pending, TensorKeyHash> pending_;
  std::vector<TensorKey> ready_;
  std::vector<int64_t> ready_sizes_;  // take_ready()'s bytes of each ready tensor
  std::vector<TensorKey> waiting_for_set_;  // tensors whose process set is not yet known
  std::unordered_map<int32_t, std::vector<int32_t>> joined_;  // each set's joined members, in order of joining
  std::unordered_set<int32_t> removed_sets_;
  std::unordered_set<int32_t> removed_ids_;  // the cache ids of removed sets' tensors
  int64_t oldest_ready_us_ = 0;
  int64_t ready_bytes_ = 0;     // of the ready tensors
  bool ready_too_big_ = false;  // a ready tensor is larger than fusion_max_tensor_
};

}  // namespace hvd
