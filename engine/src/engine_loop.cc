// The engine's loop: its steps (run by the engine thread, or by a thread waiting for a result: see
// progress.h), the engine thread's poll/backoff between them, message dispatch, rank 0's negotiation
// rounds, and running each negotiated response on this rank's tensors.
#include <algorithm>
#include <cstring>
#include <thread>

#include "clock.h"
#include "engine.h"
#include "log.h"
#include "log_format.h"
#include "reduction.h"
#include "wire.h"

namespace hvd {
namespace {

constexpr int64_t kPeriodUs = 100000;  // stall checks and timeline forwarding
// How long the engine thread sleeps between polls when it does not spin: short after work, doubling to a
// cap (a reply that comes soon is seen soon; a long wait wakes the thread seldom), and a longer cap once
// idle for a while.
constexpr int64_t kFirstPollUs = 20, kIdlePollUs = 100, kLongIdlePollUs = 1000, kLongIdleUs = 50000;
// How long the engine thread spins after work where its core is contended and nothing is in flight: long
// enough to see at once an operation that follows another directly (a loop of small ones), short enough
// to leave the core to the rank's compute between bursts of gradients.
constexpr int64_t kContendedSpinUs = 200;
// How long it sleeps once nothing is in flight: each wake takes a core from the rank's compute (training
// a small CNN at 2 ranks on 2 cores, waking each 1 ms slowed forward and backward by 1-2 ms a step), and
// an enqueue wakes it at once. Rank 0 polls each kLongIdlePollUs while a process set leaves it out: that
// set's requests reach the coordinator only when it polls.
constexpr int64_t kQuietPollUs = 20000;

}  // namespace

void Engine::loop() {
  int64_t next_poll_us = kFirstPollUs;
  while (state_ != State::Stopped) {
    if (progress_->step()) next_poll_us = kFirstPollUs;
    else idle(next_poll_us);
  }
  progress_->detach();  // waiters' handles may outlive the engine
  if (mpi_yield_) mpi_yield_(false);  // MPI as it was, for whatever runs on it next
  try {
    forward_timeline();  // this rank's last events: into the file on rank 0
  } catch (const std::exception& e) {
    log::write(log::Level::Error, std::string("timeline: the last events were lost: ") + e.what());
  }
  // Give in-flight notices a moment to leave before the buffers go.
  for (int i = 0; i < 1000 && !transport_->idle(); ++i) {
    transport_->reap();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

Progress::Stepped Engine::step(bool by_waiter) {
  if (state_ == State::Stopped) return Progress::Stepped::NotRun;
  try {
    if (!by_waiter) contended_ = contention_.sample(now_us());
    const bool worked = work();
    if (worked) last_work_us_.store(now_us(), std::memory_order_relaxed);
    progress_->set_lone(table_.size() <= 1 && exec_queue_.empty());
    in_flight_.store(!table_.empty() || !exec_queue_.empty() || (coordinator_ && coordinator_->pending() > 0) ||
                         state_ == State::Draining,
                     std::memory_order_relaxed);
    return worked ? Progress::Stepped::Worked : Progress::Stepped::Idle;
  } catch (const std::exception& e) {
    on_engine_error(e.what());
  } catch (...) {
    on_engine_error("unknown error");
  }
  return Progress::Stepped::Worked;
}

// Whether MPI may yield the core inside this collective (mpi_yield.h).
void Engine::update_mpi_yield(int64_t bytes) {
  mpi_yield_(YieldInside::wanted(contended_, progress_->driven(), bytes));
}

// Between steps that found nothing to do: within the spin time of the last work, and while no waiter
// moves the engine along itself, it only yields, so the next operation or reply is seen at once; after
// that it sleeps. While something is in flight (an operation of this rank's, a request rank 0
// coordinates, a stop being agreed) it sleeps longer the longer it has been idle, up to 1 ms: a reply that
// comes soon is seen soon. Once nothing is, no reply is due and an enqueue wakes it at once: it sleeps
// 20 ms at a time, and where its core is contended it spins only briefly first. Each wake takes a core
// from the rank's compute, whether or not this thread sees its own core contended: a thread that wakes
// briefly is seldom preempted, so an idle engine that polled each 1 ms on a core it saw free woke 900
// times a second (3% of a core) beside training that filled every core.
void Engine::idle(int64_t& next_poll_us) {
  const int64_t now = now_us(), since_work = now - last_work_us_.load(std::memory_order_relaxed);
  const bool quiet = !in_flight_.load(std::memory_order_relaxed);
  const int64_t spin_us = quiet && contended_ ? std::min(config_.spin_us, kContendedSpinUs) : config_.spin_us;
  if (since_work < spin_us && !progress_->driven()) {
    std::this_thread::yield();
    return;
  }
  const int64_t cap = !quiet ? (since_work < kLongIdleUs ? kIdlePollUs : kLongIdlePollUs)
                             : coordinator_ && sets_.any_without(0) ? kLongIdlePollUs : kQuietPollUs;
  const int64_t poll_us = quiet ? cap : std::min(next_poll_us, cap);  // quiet: no reply to look out for
  next_poll_us = std::min(2 * poll_us, cap);
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::microseconds(poll_us), [this] {
    return woken_ || !queue_.empty() || !sets_to_remove_.empty() || (stop_requested_ && state_ == State::Running);
  });
  woken_ = false;
}

bool Engine::work() {
  bool worked = false;
  std::vector<TensorEntry> fresh;
  std::vector<int32_t> removals;
  bool stop_now = false;
  Status requested;
  uint64_t removals_asked = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    fresh.swap(queue_);
    removals.swap(sets_to_remove_);
    removals_asked = sets_remove_asked_;
    stop_now = stop_requested_ && state_ == State::Running;
    requested = stop_status_;
  }
  if (!fresh.empty()) {
    submit(std::move(fresh));
    worked = true;
  }
  bool got_requests = false;
  while (auto m = transport_->poll()) {
    got_requests |= m->tag == kRequests;
    dispatch(*m);
    worked = true;
    if (act_now(m->tag)) break;  // what else came is taken in the next step
  }
  // Once stopped (a peer's notice), the table belongs to remove_process_set's callers, which remove
  // the sets handed over here themselves: the rest of the step must not touch it.
  if (state_ == State::Stopped) return true;
  if (state_ == State::Running && coordinator_) coordinate(got_requests);
  if (!exec_queue_.empty() && mark_cycles_) {
    int64_t at = now_us();
    record(Phase::Cycle, "cycle", "cycle", at, 0, at);
  }
  // Both lists keep their memory: a step of one response allocates none. Cleared first: what an error
  // left of the last step's responses is not run again.
  running_.clear();
  running_.swap(exec_queue_);
  for (const Response& r : running_) execute(r);
  worked |= !running_.empty();
  if (!removals.empty()) {  // after this cycle's responses: they may still be of the sets removed
    remove_sets(removals);
    {
      std::lock_guard<std::mutex> g(mu_);
      sets_removed_ = removals_asked;
    }
    cv_.notify_all();
    worked = true;
  }
  if (stop_now && state_ == State::Running) begin_stop(requested);  // unless a peer's notice stopped it
  int64_t now = now_us();
  if (state_ == State::Draining && (final_received_ || now > drain_deadline_us_)) finish_stop();
  if (state_ == State::Stopped) return true;
  if (now - last_periodic_us_ > kPeriodUs) periodic(now);
  transport_->reap();
  return worked;
}

void Engine::submit(std::vector<TensorEntry> fresh) {
  if (state_ != State::Running) {
    for (auto& e : fresh) fail(e, left_unsubmitted(stop_status()));
    return;
  }
  RequestBatch batch;
  int64_t now = now_us();
  const bool trace = log::enabled(log::Level::Trace);
  // Inputs are carried only while this rank has nothing else in flight, up to the limit in all: a lone small
  // op (a metric, a flag) waits on latency, and carrying saves it the collective's round; many small ones
  // in flight fuse into one collective anyway, and their carried inputs would only lengthen the messages.
  int64_t carry_budget = table_.empty() ? config_.carry_bytes : 0;
  std::shared_ptr<const ProcessSet> set;  // the last one looked up: a batch is mostly of one set
  for (auto& e : fresh) {
    const Request& q = e.request;
    if (!set || set->id != q.spec.process_set) set = sets_.get(q.spec.process_set);
    if (!set) {  // removed after this operation was checked
      fail(e, Status::Error(Status::Code::Invalid, "process set " + std::to_string(q.spec.process_set) +
                                                       " was removed while this operation was pending"));
      continue;
    }
    if (trace)
      log::write(log::Level::Trace, std::string("enqueued ") + op_name(q.spec.op) + " '" + q.name + "' " +
                                        describe(q) + " in process set " + std::to_string(q.spec.process_set));
    std::vector<char> data = carried_input(e, *set, carry_budget);
    if (coordinator_) {
      Request mine = q;
      mine.data = std::move(data);
      coordinator_->add(std::move(mine), now);
    } else {
      int32_t id = q.refusal.empty() ? cache_.lookup(q) : -1;
      if (id >= 0) {
        batch.cached.push_back({id, static_cast<uint32_t>(batch.requests.size()), std::move(data)});
        metrics_.cached_requests += 1;
      } else {
        batch.requests.push_back(q);
        batch.requests.back().data = std::move(data);
        metrics_.full_requests += 1;
      }
    }
    TensorKey key = q.key();
    table_.emplace(std::move(key), std::move(e));
  }
  if (!coordinator_ && (!batch.requests.empty() || !batch.cached.empty()))
    transport_->send(0, kRequests, encode_batch(batch));
}

// A small host allreduce's input, to carry with its request (Config::carry_bytes) if what it adds to the
// response, its size times the set's, fits in `budget` (which it then takes from): rank 0 sends every
// member's input back with the response, and each member reduces them itself, so the allreduce needs no
// collective after the negotiation's round trip. Empty for any other operation.
std::vector<char> Engine::carried_input(const TensorEntry& e, const ProcessSet& set, int64_t& budget) const {
  const Request& q = e.request;
  if (q.spec.op != OpType::Allreduce || q.spec.memory != Memory::Host || !e.input) return {};
  const int64_t bytes = q.num_bytes(), cost = bytes * static_cast<int64_t>(set.ranks.size());
  if (bytes <= 0 || cost > budget) return {};
  budget -= cost;
  const char* p = static_cast<const char*>(e.input);
  return std::vector<char>(p, p + bytes);
}

void Engine::dispatch(Message& m) {
  switch (m.tag) {
    case kRequests: {
      if (!coordinator_ || state_ != State::Running) return;
      RequestBatch b = decode_batch(m.bytes.data(), m.bytes.size());
      if (log::enabled(log::Level::Trace))
        log::write(log::Level::Trace, "rank " + std::to_string(m.source) + " submitted " +
                                          std::to_string(b.requests.size()) + " new and " +
                                          std::to_string(b.cached.size()) + " cached requests");
      int64_t now = now_us();
      size_t full = 0;  // the full requests added so far: both kinds go in the order the rank submitted them
      auto add_full = [&](size_t until) {
        for (; full < until; ++full) {
          Request& q = b.requests[full];
          q.rank = m.source;  // a request speaks for the rank that sent it
          coordinator_->add(std::move(q), now);
        }
      };
      for (auto& c : b.cached) {
        add_full(c.after);
        if (!coordinator_->add_cached(m.source, c.id, std::move(c.data), now))
          throw std::runtime_error("rank " + std::to_string(m.source) + " sent an unknown response-cache id " +
                                   std::to_string(c.id));
      }
      add_full(b.requests.size());
      return;
    }
    case kResponses: {
      for (auto& r : decode_responses(m.bytes.data(), m.bytes.size())) exec_queue_.push_back(std::move(r));
      return;
    }
    case kAbort:
    case kShutdown: {
      StopNotice n = decode_stop(m.bytes.data(), m.bytes.size());
      if (n.final) final_received_ = true;
      if (state_ == State::Running) begin_stop(n.status);
      return;
    }
    case kTimeline: {
      std::vector<Event> events = decode_events(m.bytes.data(), m.bytes.size());
      std::lock_guard<std::mutex> g(timeline_mu_);
      if (writer_) writer_->add_forwarded(std::move(events));
      return;
    }
    default:
      throw WireError("engine message with unknown tag " + std::to_string(m.tag) + " from rank " +
                      std::to_string(m.source));
  }
}

// Whether the step stops taking messages to act on the one just taken: each probe that finds nothing costs
// a tenth of a small collective's time. A worker runs a response at once; rank 0 distributes at once what
// became ready while its caller waits for a lone operation of its own (see coordinate()).
bool Engine::act_now(int tag) {
  if (!coordinator_) return tag == kResponses;
  return tag == kRequests && progress_->driven() && coordinator_->has_ready();
}

void Engine::coordinate(bool got_requests) {
  if (!coordinator_->has_ready()) return;
  // Hold ready tensors while more requests keep arriving, at most one cycle time, to fuse them, unless
  // waiting cannot add to their fusion: their tensors are too big, or rank 0's own caller waits for its
  // lone operation (a waiter drives), so rank 0 submits nothing that could join them until they have run.
  int64_t waited = now_us() - coordinator_->oldest_ready_us();
  if (got_requests && !progress_->driven() && waited < cycle_time_us_ && coordinator_->worth_holding()) return;
  distribute(coordinator_->take_ready());
}

void Engine::distribute(std::vector<Response> responses) {
  // Each rank gets the responses of its process sets, in order; ranks with the same list (all of them,
  // when every set is the global one) share one encoding, which the last of them takes.
  auto& per_rank = per_rank_;  // the lists keep their memory from one round to the next
  per_rank.resize(topo_.size);
  for (auto& list : per_rank) list.clear();
  for (size_t i = 0; i < responses.size(); ++i) {
    auto set = sets_.get(responses[i].spec.process_set);
    if (!set) continue;  // removed: its members failed their part when they removed it
    for (int k : set->ranks) per_rank[k].push_back(i);
  }
  std::vector<char> bytes;  // kept only while the next rank's list is the same
  for (int k = 1; k < topo_.size; ++k) {
    if (per_rank[k].empty()) continue;
    if (bytes.empty()) bytes = encode_responses(responses, per_rank[k]);
    if (k + 1 < topo_.size && per_rank[k + 1] == per_rank[k]) transport_->send(k, kResponses, bytes);
    else transport_->send(k, kResponses, std::move(bytes));  // leaves it empty: the next list encodes anew
  }
  for (size_t i : per_rank[0]) exec_queue_.push_back(std::move(responses[i]));
}

bool Engine::joined(int32_t set) const {
  return std::any_of(table_.begin(), table_.end(), [set](const auto& kv) {
    return kv.first.process_set == set && kv.second.request.spec.op == OpType::Join;
  });
}

// What a rank that has joined puts in for tensor `i` of `r`, which it never submitted: the reduction's
// identity (zeros for Sum and Average, as in Horovod), in a host buffer its own handle owns. For GPU tensors
// the data phase copies it to the GPU this rank's GPU operations ran on (-1: none yet, an error there).
TensorEntry Engine::stand_in(const Response& r, size_t i) const {
  TensorEntry e;
  e.stand_in = true;
  if (r.spec.memory == Memory::Cuda) e.device = gpu_device_.load();
  e.request.rank = topo_.rank;
  e.request.spec = r.spec;
  e.request.shape = {r.stand_in_counts[i]};
  e.request.name = r.names[i];
  e.handle = std::make_shared<Handle>();
  e.handle->output.allocate(static_cast<size_t>(e.request.num_bytes()));
  fill_identity(r.spec.dtype, r.spec.reduce, e.handle->output.data(), r.stand_in_counts[i]);
  e.input = e.output = e.handle->output.data();
  e.enqueue_us = now_us();
  return e;
}

void Engine::execute(const Response& r) {
  auto& found = found_;  // lists that keep their memory from one response to the next
  auto& es = entries_;
  found.clear();
  es.clear();
  std::vector<TensorEntry> stand_ins;
  stand_ins.reserve(r.stand_in_counts.size());  // es points into it
  for (size_t i = 0; i < r.names.size(); ++i) {
    probe_.process_set = r.spec.process_set;
    probe_.name.assign(r.names[i]);  // into the memory it had: no allocation per tensor
    auto it = table_.find(probe_);
    if (it == table_.end()) {
      // This rank has joined (Coordinator::add): it stands in, and an error is the submitters' alone.
      if (!joined(r.spec.process_set)) {
        log::write(log::Level::Error, "internal error: response for unknown tensor " +
                                          describe_key(TensorKey{r.spec.process_set, r.names[i]}));
      } else if (r.kind == Response::Kind::Execute && i < r.stand_in_counts.size()) {
        stand_ins.push_back(stand_in(r, i));
        es.push_back(&stand_ins.back());
      }
      continue;
    }
    found.push_back(it);
    es.push_back(&it->second);
  }
  if (r.whole_group) add_rest_of_calls(r.spec.process_set);
  if (es.empty() && r.kind != Response::Kind::Execute) return;  // another rank's error while this one has joined
  int64_t now = now_us();
  for (auto* e : es) {
    metrics_.negotiate_us += now - e->enqueue_us;
    record(Phase::Negotiate, e->request.name, op_name(r.spec.op), e->enqueue_us, e->request.num_bytes(), now);
  }
  Status s;
  auto set = sets_.get(r.spec.process_set);
  if (r.kind != Response::Kind::Execute) {
    s = Status::Error(r.kind == Response::Kind::Refused ? Status::Code::Refused : Status::Code::Mismatch, r.error);
  } else if (!set) {
    s = Status::Error(Status::Code::Invalid, "process set " + std::to_string(r.spec.process_set) +
                                                 " was removed while this operation was pending");
  } else if (es.size() != r.names.size()) {
    s = Status::Error(Status::Code::Internal, "engine state out of sync for " + label(r));
  } else if (r.spec.op == OpType::Join) {
    s = finish_join(r, es);
  } else {
    s = run(r, es, *set);
  }
  if (log::enabled(log::Level::Debug)) {
    int64_t bytes = 0;
    for (auto* e : es) bytes += e->request.num_bytes();
    log::write(log::Level::Debug, std::string(op_name(r.spec.op)) + " '" + label(r) + "', " + size_text(bytes) + ", " +
                                      std::to_string(now_us() - now) + " us" +
                                      (s.ok() ? std::string() : ": failed: " + s.message));
  }
  if (!s.ok() && !stand_ins.empty())  // its own join goes on waiting: the others see the error
    log::warning("standing in (joined) for " + label(r) + " failed: " + s.message);
  metrics_.responses += 1;
  if (!r.carried.empty() && s.ok()) metrics_.carried_allreduces += 1;
  if (tuner_ && s.ok()) autotune(r, es);
  if (es.size() > 1) metrics_.fused_tensors += static_cast<int64_t>(es.size());
  for (size_t i = 0; i < es.size(); ++i) {
    const Request& q = es[i]->request;
    if (!s.ok()) {
      metrics_.errors += 1;
      continue;
    }
    metrics_.count(r.spec.op, q.num_bytes());
    if (!coordinator_ && stand_ins.empty() && es.size() == r.cache_ids.size()) cache_.learn(r.cache_ids[i], q);
  }
  {
    std::lock_guard<std::mutex> g(mu_);  // free the names before their waiters wake
    for (auto it : found) live_names_.erase(it->first);
  }
  for (auto* e : es) e->handle->complete(s);
  for (auto it : found) table_.erase(it);
}

void Engine::add_rest_of_calls(int32_t set) {
  const size_t named = found_.size();
  auto in_named_call = [this, named](const Request& q) {
    return std::any_of(found_.begin(), found_.begin() + named,
                       [&q](const auto& f) { return f->second.request.group_key() == q.group_key(); });
  };
  for (auto it = table_.begin(); it != table_.end(); ++it) {
    const bool named_here = std::find(found_.begin(), found_.begin() + named, it) != found_.begin() + named;
    if (it->first.process_set == set && !named_here && in_named_call(it->second.request)) {
      found_.push_back(it);
      entries_.push_back(&it->second);
    }
  }
}

// Every member has joined: each join returns the rank that joined last (the response's root_rank).
Status Engine::finish_join(const Response& r, std::vector<TensorEntry*>& entries) {
  for (TensorEntry* e : entries)
    if (e->output && e->request.spec.dtype == DataType::Int32 && e->request.num_elements() > 0)
      std::memcpy(e->output, &r.spec.root_rank, sizeof(int32_t));
  return Status::Ok();
}

Status Engine::run(const Response& r, std::vector<TensorEntry*>& entries, const ProcessSet& set) {
  int64_t total = 0;
  for (auto* e : entries) total += e->request.num_bytes();
  if (mpi_yield_) update_mpi_yield(total);
  const std::string fused = r.names.size() > 1 ? label(r) : std::string();  // one tensor's label is its name
  const std::string& name = r.names.size() > 1 ? fused : r.names[0];
  // One span of this response: a timeline event and the phase's time in the metrics. It captures two
  // pointers, which std::function holds without allocating.
  const std::pair<const std::string&, int64_t> of{name, total};
  auto span = [this, &of](Phase p, const char* op, int64_t start, int64_t end) {
    record(p, of.first, op, start, of.second, end);
    int64_t d = end - start;
    if (p == Phase::MemcpyIn) metrics_.memcpy_in_us += d;
    if (p == Phase::Collective) metrics_.collective_us += d;
    if (p == Phase::MemcpyOut) metrics_.memcpy_out_us += d;
  };
  return data_plane_->run(r, entries, set, span);
}

void Engine::periodic(int64_t now) {
  last_periodic_us_ = now;
  forward_timeline();
  if (!coordinator_ || !stalls_.enabled() || state_ != State::Running) return;
  for (const StallFinding& f : stalls_.inspect(*coordinator_, now)) {
    log::warning("stall detected: " + f.text);
    metrics_.stalls += 1;
    record(Phase::Stall, f.text, "stall", now, 0, now);
    if (f.shutdown) begin_stop(Status::Error(Status::Code::Aborted, "stall shutdown: " + f.text, topo_.rank));
    if (state_ != State::Running) return;
  }
}

void Engine::fail(TensorEntry& e, const Status& s) {
  {
    std::lock_guard<std::mutex> g(mu_);
    live_names_.erase(e.request.key());
  }
  metrics_.errors += 1;
  e.handle->complete(s);
}

}  // namespace hvd
