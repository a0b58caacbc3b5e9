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

}  // namespace

Coordinator::Coordinator(Membership members, int64_t fusion_threshold, int64_t fusion_max_tensor,
                         size_t cache_capacity)
    : members_(std::move(members)),
      fusion_threshold_(fusion_threshold),
      fusion_max_tensor_(fusion_max_tensor),
      cache_(cache_capacity) {}

void Coordinator::add(Request r, int64_t now_us) {
  auto it = pending_.find(r.name);
  if (it == pending_.end()) {
    it = pending_.emplace(r.name, Pending{}).first;
    it->second.first_seen_us = now_us;
  }
  it->second.requests.push_back(std::move(r));
  check_ready(it->first, it->second);
}

bool Coordinator::add_cached(int32_t rank, int32_t id, int64_t now_us) {
  const Request* sig = cache_.get(id);
  if (!sig) return false;
  Request r = *sig;
  r.rank = rank;
  add(std::move(r), now_us);
  return true;
}

void Coordinator::check_ready(const std::string& name, const Pending& p) {
  const std::vector<int>* ranks = members_(p.requests.front().spec.process_set);
  if (!ranks) {
    if (std::find(waiting_for_set_.begin(), waiting_for_set_.end(), name) == waiting_for_set_.end())
      waiting_for_set_.push_back(name);
    return;
  }
  if (p.requests.size() < ranks->size()) return;
  if (ready_.empty()) oldest_ready_us_ = p.first_seen_us;
  ready_.push_back(name);
  const int64_t bytes = p.requests.front().num_bytes();
  ready_bytes_ += bytes;
  ready_too_big_ |= bytes > fusion_max_tensor_;
}

std::string Coordinator::validate(const std::vector<Request>& rs) const {
  const Request& a = rs.front();
  const OpSpec& x = a.spec;
  const std::vector<int>* ranks = members_(x.process_set);
  for (const Request& b : rs) {
    if (std::find(ranks->begin(), ranks->end(), b.rank) == ranks->end())
      return "rank " + std::to_string(b.rank) + " submitted it but is not in process set " +
             std::to_string(x.process_set);
  }
  // Built only on a mismatch: this runs for every tensor every step.
  auto on = [](const std::string& what, int rank) { return what + " on rank " + std::to_string(rank); };
  auto device = [](const OpSpec& s) { return std::string(s.memory == Memory::Cuda ? "a GPU tensor" : "a host tensor"); };
  for (const Request& b : rs) {
    const OpSpec& y = b.spec;
    if (y.op != x.op)
      return "mismatched operations: " + on(op_name(x.op), a.rank) + ", " + on(op_name(y.op), b.rank);
    if (y.process_set != x.process_set)
      return "mismatched process sets: " + on(std::to_string(x.process_set), a.rank) + ", " +
             on(std::to_string(y.process_set), b.rank);
    if (y.op == OpType::Barrier) continue;
    if (y.memory != x.memory) return "mismatched devices: " + on(device(x), a.rank) + ", " + on(device(y), b.rank);
    if (y.dtype != x.dtype)
      return "mismatched data types: " + on(dtype_name(x.dtype), a.rank) + ", " + on(dtype_name(y.dtype), b.rank);
    if ((x.op == OpType::Allreduce || x.op == OpType::Reducescatter) && y.reduce != x.reduce)
      return "mismatched reduce ops: " + on(reduce_name(x.reduce), a.rank) + ", " + on(reduce_name(y.reduce), b.rank);
    if (y.prescale != x.prescale || y.postscale != x.postscale)
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

void Coordinator::recheck_waiting_for_set() {
  auto waiting = std::move(waiting_for_set_);
  waiting_for_set_.clear();
  for (const auto& n : waiting) check_ready(n, pending_.at(n));
}

bool Coordinator::has_ready() {
  // A member may submit a tensor before rank 0 has registered its set; nothing else would look at it again.
  if (!waiting_for_set_.empty()) recheck_waiting_for_set();
  return !ready_.empty();
}

std::vector<Response> Coordinator::take_ready() {
  recheck_waiting_for_set();  // names that waited for their process set may be ready now

  std::vector<Response> singles;
  std::vector<int64_t> bytes;
  for (const auto& name : ready_) {
    auto node = pending_.extract(name);
    auto& rs = node.mapped().requests;
    std::sort(rs.begin(), rs.end(), [](const Request& x, const Request& y) { return x.rank < y.rank; });
    const Request& a = rs.front();
    Response r;
    r.spec = a.spec;
    r.names = {name};
    std::string err = validate(rs);
    if (!err.empty()) {
      r.kind = Response::Kind::Error;
      r.error = op_name(a.spec.op) + std::string(" of tensor '") + name + "': " + err;
      r.cache_ids = {-1};
    } else {
      // An id stands for one signature on every rank, so members whose requests differ (allgather and
      // alltoall first dimensions) get none: a worker's id would bring rank 0's shape back as its own.
      const bool alike = std::all_of(rs.begin(), rs.end(), [&a](const Request& q) { return q.same_signature(a); });
      r.cache_ids = {alike ? cache_.assign(a) : -1};
      // Every member learns the others' first dimensions here, not from a collective of its own.
      if (a.spec.op == OpType::Allgather)
        for (const Request& q : rs) r.rows.push_back(q.shape[0]);
    }
    singles.push_back(std::move(r));
    bytes.push_back(a.num_bytes());
  }
  ready_.clear();
  ready_bytes_ = 0;
  ready_too_big_ = false;
  return plan_fusion(singles, bytes, fusion_threshold_, fusion_max_tensor_);
}

std::vector<StallReport> Coordinator::stalled(int64_t now_us, int64_t after_us) {
  std::vector<StallReport> out;
  for (auto& [name, p] : pending_) {
    if (now_us - p.first_seen_us < after_us || now_us - p.last_reported_us < after_us) continue;
    p.last_reported_us = now_us;
    StallReport s;
    s.name = name;
    s.waited_seconds = (now_us - p.first_seen_us) / 1e6;
    if (const std::vector<int>* ranks = members_(p.requests.front().spec.process_set)) {
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
