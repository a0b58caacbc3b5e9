#include "coordinator.h"

#include <algorithm>
#include <sstream>

#include "fusion_planner.h"

namespace hvd {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

std::vector<int64_t> tail(const std::vector<int64_t>& s) {
  return s.empty() ? s : std::vector<int64_t>(s.begin() + 1, s.end());
}

// The call a request came in, as a group mismatch names it.
std::string group_text(const Request& q) {
  if (q.group_size == 0) return "an empty group";
  if (q.group_size == 1) return "a call of one tensor";
  return "a group of " + std::to_string(q.group_size) + " tensors from '" + q.group_key() + "'";
}

// Whether every member sent its whole input with its request (a member whose settings differ may not have).
bool carried_by_all(const std::vector<Request>& rs) {
  return std::all_of(rs.begin(), rs.end(), [](const Request& q) {
    return !q.data.empty() && static_cast<int64_t>(q.data.size()) == q.num_bytes();
  });
}

}  // namespace

Coordinator::Coordinator(Membership members, int64_t fusion_threshold, int64_t fusion_max_tensor,
                         size_t cache_capacity, int64_t carry_bytes)
    : members_(std::move(members)),
      fusion_threshold_(fusion_threshold),
      fusion_max_tensor_(fusion_max_tensor),
      carry_bytes_(carry_bytes),
      cache_(cache_capacity) {}

const std::vector<int>* Coordinator::members(int32_t id) {
  if (id != last_set_ || !last_members_) {
    last_members_ = members_(id);
    last_set_ = id;
  }
  return last_members_;
}

void Coordinator::add(Request r, int64_t now_us) {
  if (removed_sets_.count(r.spec.process_set)) return;
  if (r.spec.op == OpType::Join) note_join(r.spec.process_set, r.rank);
  TensorKey key = r.key();
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    it = pending_.emplace(std::move(key), Pending{}).first;
    it->second.first_seen_us = now_us;
    const std::vector<int>* ranks = members(r.spec.process_set);
    it->second.requests.reserve(ranks ? ranks->size() : 1);  // one allocation for every member's request
  }
  it->second.requests.push_back(std::move(r));
  check_ready(it->first, it->second);
}

bool Coordinator::add_cached(int32_t rank, int32_t id, std::vector<char> data, int64_t now_us) {
  const Request* sig = cache_.get(id);
  if (!sig) return removed_ids_.count(id) > 0;
  Request r = *sig;
  r.rank = rank;
  r.data = std::move(data);
  add(std::move(r), now_us);
  return true;
}

void Coordinator::note_join(int32_t set, int32_t rank) {
  std::vector<int32_t>& joined = joined_[set];
  if (std::find(joined.begin(), joined.end(), rank) != joined.end()) return;  // twice: the join's check says so
  joined.push_back(rank);
  // The set's tensors that waited only for the members that have joined are ready now, before the join.
  for (auto& [key, p] : pending_)
    if (key.process_set == set) check_ready(key, p);
}

bool Coordinator::joined_cover(const TensorKey& key, const Pending& p, const std::vector<int>& ranks) const {
  if (joined_.empty()) return false;  // the usual case: nobody has joined
  auto j = joined_.find(key.process_set);
  if (j == joined_.end() || p.requests.front().spec.op == OpType::Join) return false;
  // As the plain check counts requests, each joined member that has not submitted `p` counts once more.
  size_t covered = p.requests.size();
  for (int32_t rank : j->second)
    covered += std::none_of(p.requests.begin(), p.requests.end(), [rank](const Request& q) { return q.rank == rank; });
  return covered >= ranks.size();
}

std::string Coordinator::stand_in(Response& r, const std::vector<Request>& rs, const std::vector<int>& ranks) const {
  const OpSpec& x = rs.front().spec;
  const bool other_op = x.op != OpType::Allreduce && x.op != OpType::Barrier;
  // A joined rank adds the op's identity (0 for Sum and Average, as in Horovod), which a prescale factor would change.
  const bool scaled = x.reduce != ReduceOp::Sum && x.reduce != ReduceOp::Average && x.prescale != 1.0;
  if (!other_op && !scaled) {  // every step of the ranks still training: no message to build
    r.stand_in_counts = {x.op == OpType::Barrier ? 0 : rs.front().num_elements()};
    return "";
  }
  std::string who;
  int absent = 0;
  for (int rank : ranks) {
    if (std::any_of(rs.begin(), rs.end(), [rank](const Request& q) { return q.rank == rank; })) continue;
    who += (absent++ ? ", " : "") + std::to_string(rank);
  }
  who = (absent == 1 ? "rank " : "ranks ") + who + (absent == 1 ? " has" : " have") + " joined";
  if (other_op)
    return std::string("not supported while ") + who + "; until every rank has joined, only allreduces and barriers go on";
  return std::string(reduce_name(x.reduce)) + " with a prescale factor cannot go on while " + who;
}

void Coordinator::drop_set(int32_t id) {
  removed_sets_.insert(id);
  joined_.erase(id);
  if (id == last_set_) last_members_ = nullptr;
  for (int32_t dropped : cache_.drop_set(id)) removed_ids_.insert(dropped);
  for (auto it = pending_.begin(); it != pending_.end();)
    it = it->first.process_set == id ? pending_.erase(it) : std::next(it);
  auto of_set = [id](const TensorKey& k) { return k.process_set == id; };
  ready_.erase(std::remove_if(ready_.begin(), ready_.end(), of_set), ready_.end());
  waiting_for_set_.erase(std::remove_if(waiting_for_set_.begin(), waiting_for_set_.end(), of_set),
                         waiting_for_set_.end());
}

void Coordinator::check_ready(const TensorKey& key, Pending& p) {
  if (p.ready) return;
  const std::vector<int>* ranks = members(key.process_set);
  if (!ranks) {
    if (std::find(waiting_for_set_.begin(), waiting_for_set_.end(), key) == waiting_for_set_.end())
      waiting_for_set_.push_back(key);
    return;
  }
  if (p.requests.size() < ranks->size() && !joined_cover(key, p, *ranks)) return;
  p.ready = true;
  if (ready_.empty()) oldest_ready_us_ = p.first_seen_us;
  ready_.push_back(key);
  const int64_t bytes = p.requests.front().num_bytes();
  ready_bytes_ += bytes;
  ready_too_big_ |= bytes > fusion_max_tensor_;
}

std::string Coordinator::validate(const std::vector<Request>& rs, const std::vector<int>& ranks) const {
  const Request& a = rs.front();
  const OpSpec& x = a.spec;
  for (size_t i = 0; i < rs.size(); ++i) {
    const Request& b = rs[i];
    if (std::find(ranks.begin(), ranks.end(), b.rank) == ranks.end())
      return "rank " + std::to_string(b.rank) + " submitted it but is not in process set " +
             std::to_string(x.process_set);
    if (i > 0 && rs[i - 1].rank == b.rank) return "rank " + std::to_string(b.rank) + " submitted it twice";
  }
  for (const Request& b : rs)
    if (!b.refusal.empty()) return "rank " + std::to_string(b.rank) + " could not start it: " + b.refusal;
  // Built only on a mismatch: this runs for every tensor every step.
  auto on = [](const std::string& what, int rank) { return what + " on rank " + std::to_string(rank); };
  for (const Request& b : rs)
    if (!b.same_group(a))
      return "mismatched groups: " + on(group_text(a), a.rank) + ", " + on(group_text(b), b.rank);
  auto device = [](const OpSpec& s) { return std::string(s.memory == Memory::Cuda ? "a GPU tensor" : "a host tensor"); };
  for (const Request& b : rs) {
    const OpSpec& y = b.spec;
    if (y.op != x.op)
      return "mismatched operations: " + on(op_name(x.op), a.rank) + ", " + on(op_name(y.op), b.rank);
    if (y.process_set != x.process_set)
      return "mismatched process sets: " + on(std::to_string(x.process_set), a.rank) + ", " +
             on(std::to_string(y.process_set), b.rank);
    if (y.op == OpType::Barrier || y.op == OpType::Join) continue;
    if (y.memory != x.memory) return "mismatched devices: " + on(device(x), a.rank) + ", " + on(device(y), b.rank);
    if (y.dtype != x.dtype)
      return "mismatched data types: " + on(dtype_name(x.dtype), a.rank) + ", " + on(dtype_name(y.dtype), b.rank);
    if ((x.op == OpType::Allreduce || x.op == OpType::Reducescatter) && y.reduce != x.reduce)
      return "mismatched reduce ops: " + on(reduce_name(x.reduce), a.rank) + ", " + on(reduce_name(y.reduce), b.rank);
    if (!y.same_scaling(x))
      return "mismatched prescale/postscale factors (rank " + std::to_string(a.rank) + " vs rank " +
             std::to_string(b.rank) + ")";
    if (x.op == OpType::Broadcast && y.root_rank != x.root_rank)
      return "mismatched root ranks: " + on(std::to_string(x.root_rank), a.rank) + ", " +
             on(std::to_string(y.root_rank), b.rank);
    if (x.op == OpType::Allgather || x.op == OpType::Alltoall) {
      if (a.shape.empty() || b.shape.size() != a.shape.size() || tail(a.shape) != tail(b.shape))
        return "mismatched shapes beyond the first dimension: " + on(shape_str(a.shape), a.rank) + ", " +
               on(shape_str(b.shape), b.rank);
    } else if (b.shape != a.shape) {
      return "mismatched shapes: " + on(shape_str(a.shape), a.rank) + ", " + on(shape_str(b.shape), b.rank);
    }
  }
  return "";
}

void Coordinator::drop_calls(int32_t set, const std::vector<Request>& failed) {
  auto in_failed_call = [&failed](const Request& q) {
    return std::any_of(failed.begin(), failed.end(),
                       [&q](const Request& f) { return f.rank == q.rank && f.group_key() == q.group_key(); });
  };
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto& rs = it->second.requests;
    const size_t before = rs.size();
    if (it->first.process_set == set) rs.erase(std::remove_if(rs.begin(), rs.end(), in_failed_call), rs.end());
    if (rs.size() != before) it->second.ready = false;  // take_ready() puts it back, or skips it once erased
    it = rs.empty() ? pending_.erase(it) : std::next(it);
  }
}

void Coordinator::recheck_waiting_for_set() {
  auto waiting = std::move(waiting_for_set_);
  waiting_for_set_.clear();
  for (const auto& k : waiting) {
    auto it = pending_.find(k);
    if (it != pending_.end()) check_ready(k, it->second);
  }
}

bool Coordinator::has_ready() {
  // A member may submit a tensor before rank 0 has registered its set; nothing else would look at it again.
  if (!waiting_for_set_.empty()) recheck_waiting_for_set();
  return !ready_.empty();
}

std::vector<Response> Coordinator::take_ready() {
  recheck_waiting_for_set();  // tensors that waited for their process set may be ready now

  std::vector<Response> singles;
  std::vector<int64_t>& bytes = ready_sizes_;  // keeps its memory from one round to the next
  singles.reserve(ready_.size());
  bytes.clear();
  for (const auto& key : ready_) {
    auto node = pending_.extract(key);
    const std::vector<int>* ranks = members(key.process_set);
    if (node.empty() || !ranks) continue;  // dropped with its process set, or with a call that failed whole
    if (!node.mapped().ready) {            // lost some requests to such a call: no longer every member's
      pending_.insert(std::move(node));
      continue;
    }
    auto& rs = node.mapped().requests;
    const int32_t last = rs.back().rank;  // in the order they came: for a join, the rank that joined last
    std::sort(rs.begin(), rs.end(), [](const Request& x, const Request& y) { return x.rank < y.rank; });
    const Request& a = rs.front();
    Response r;
    r.spec = a.spec;
    r.names.push_back(std::move(node.key().name));  // the extracted entry's: no copy
    std::string err = validate(rs, *ranks);
    if (err.empty() && rs.size() < ranks->size()) err = stand_in(r, rs, *ranks);
    if (a.spec.op == OpType::Join) {
      r.spec.root_rank = last;
      joined_.erase(key.process_set);
    }
    if (!err.empty()) {
      const bool refused = std::any_of(rs.begin(), rs.end(), [](const Request& q) { return !q.refusal.empty(); });
      r.kind = refused ? Response::Kind::Refused : Response::Kind::Error;
      // Named by a call with tensors: an empty group's (Request::group_size) is a barrier of none.
      auto by = std::find_if(rs.begin(), rs.end(), [](const Request& q) { return q.group_size > 0; });
      const OpType op = (by == rs.end() ? a : *by).spec.op;
      r.error = op_name(op) + std::string(" of tensor ") + describe_key(key) + ": " + err;
      r.cache_ids = {-1};
      r.whole_group = std::any_of(rs.begin(), rs.end(), [&a](const Request& q) { return !q.same_group(a); });
      if (r.whole_group) drop_calls(key.process_set, rs);
    } else {
      // An id stands for one signature on every rank, so members whose requests differ (allgather and
      // alltoall first dimensions) get none: a worker's id would bring rank 0's shape back as its own.
      const bool alike = std::all_of(rs.begin(), rs.end(), [&a](const Request& q) { return q.same_signature(a); });
      r.cache_ids = {alike ? cache_.assign(a) : -1};
      // Every member learns the others' first dimensions here, not from a collective of its own.
      if (a.spec.op == OpType::Allgather)
        for (const Request& q : rs) r.rows.push_back(q.shape[0]);
      if (a.spec.op == OpType::Allreduce && rs.size() == ranks->size() && carried_by_all(rs)) {
        r.carried.reserve(rs.size() * rs.front().data.size());
        for (const Request& q : rs) r.carried.insert(r.carried.end(), q.data.begin(), q.data.end());
      }
    }
    singles.push_back(std::move(r));
    bytes.push_back(a.num_bytes());
  }
  ready_.clear();
  ready_bytes_ = 0;
  ready_too_big_ = false;
  std::vector<Response> out = plan_fusion(std::move(singles), bytes, fusion_threshold_, fusion_max_tensor_);
  for (Response& r : out)  // what rank 0 sends every member, once per member: a fused group may be too much
    if (static_cast<int64_t>(r.carried.size()) > carry_bytes_) r.carried = {};
  return out;
}

std::vector<StallReport> Coordinator::stalled(int64_t now_us, int64_t after_us) {
  std::vector<StallReport> out;
  for (auto& [key, p] : pending_) {
    if (now_us - p.first_seen_us < after_us || now_us - p.last_reported_us < after_us) continue;
    if (p.requests.front().spec.op == OpType::Join) continue;  // a joined rank waits for the others by design
    p.last_reported_us = now_us;
    StallReport s;
    s.key = key;
    s.waited_seconds = (now_us - p.first_seen_us) / 1e6;
    if (const std::vector<int>* ranks = members(p.requests.front().spec.process_set)) {
      for (int r : *ranks) {
        bool seen = std::any_of(p.requests.begin(), p.requests.end(),
                                [r](const Request& q) { return q.rank == r; });
        if (!seen) s.missing_ranks.push_back(r);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace hvd
