#include "engine.h"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>
#include <numeric>
#include <sstream>

#include "clock.h"
#include "clock_sync.h"
#include "collectives.h"
#include "comm_pool.h"
#include "gpu/gpu_collectives.h"
#include "log.h"
#include "log_format.h"
#include "thread_placement.h"
#include "wire.h"

namespace hvd {
namespace {

constexpr int64_t kPeriodUs = 100000;      // stall checks and timeline forwarding
constexpr int64_t kDrainTimeoutUs = 2000000;  // longest wait for rank 0's final stop notice
// How long the engine thread sleeps between polls when it does not spin: 20 us after work, doubling
// to 100 us (a reply that comes soon is seen soon; a long wait wakes the thread seldom), and 1 ms once
// idle for 50 ms.
constexpr int64_t kFirstPollUs = 20, kIdlePollUs = 100, kLongIdlePollUs = 1000, kLongIdleUs = 50000;

// Engines started in this process so far: with the other ranks' count, the new engine's epoch.
int g_engines_started = 0;

}  // namespace

Engine::Engine(MPI_Comm comm, Config config)
    : config_(std::move(config)), cache_(config_.cache_capacity), ring_(config_.ring_capacity) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    throw std::runtime_error("MPI was initialised without MPI_THREAD_MULTIPLE support");
  const EngineComms comms = engine_comms(comm);
  ctrl_ = comms.ctrl;
  data_ = comms.data;
  admin_ = comms.admin;
  MPI_Comm_rank(admin_, &topo_.rank);
  MPI_Comm_size(admin_, &topo_.size);
  MPI_Comm local, cross;
  MPI_Comm_split_type(admin_, MPI_COMM_TYPE_SHARED, topo_.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &topo_.local_rank);
  MPI_Comm_size(local, &topo_.local_size);
  MPI_Comm_split(admin_, topo_.local_rank, topo_.rank, &cross);
  MPI_Comm_rank(cross, &topo_.cross_rank);
  MPI_Comm_size(cross, &topo_.cross_size);
  const int64_t clock_offset_us = clock_offset_to_rank0(local, cross, topo_.local_rank);
  MPI_Comm_free(&local);
  MPI_Comm_free(&cross);
  log::configure(config_.log_level, topo_.rank, !config_.log_hide_time);
  // A waiter works (see progress.h) for as long as the engine thread would otherwise spin, and only where
  // each local rank can have a core: with more ranks than cores, a busy waiter takes the core another
  // rank needs.
  wait_spin_us_ = topo_.local_size <= usable_cores() ? config_.spin_us : 0;

  auto global = std::make_shared<ProcessSet>();
  global->id = 0;
  global->ranks.resize(topo_.size);
  std::iota(global->ranks.begin(), global->ranks.end(), 0);
  global->comm = data_;
  sets_.add(global);

  reductions_ = std::make_unique<Reductions>();
  gpu::CommOptions gpu_options;
  gpu_options.force_staging = config_.gpu_staging;
  gpu_options.hierarchical = config_.hierarchical_allreduce;
  gpu_options.ranks_per_host = config_.test_ranks_per_host;
  gpu_options.batch_copies = config_.gpu_batch_copies;
  // A GPU collective that is running is cut short by an abort, this rank's or a peer's notice (a
  // peer that aborted its part would leave this one waiting forever), never by a shutdown.
  gpu_ = std::make_unique<gpu::GpuCollectives>(gpu::runtime(), gpu_options, [this] {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stop_requested_ && stop_status_.code == Status::Code::Aborted) return true;
    }
    return channel_->pending(kAbort);
  });
  // The engine's communicators outlive it (comm_pool.h), so each engine on them takes a new epoch: every
  // rank's count of engines agrees unless some started engines on other communicators, and the largest
  // is one none of them has used on these.
  int epoch = 0;
  MPI_Allreduce(&g_engines_started, &epoch, 1, MPI_INT, MPI_MAX, admin_);
  g_engines_started = epoch + 1;
  channel_ = std::make_unique<ControlChannel>(ctrl_, epoch);
  if (topo_.rank == 0) {
    auto members = [this](int32_t id) -> const std::vector<int>* {
      auto ps = sets_.get(id);
      return ps ? &ps->ranks : nullptr;  // sets live until removed, after their last op
    };
    coordinator_ = std::make_unique<Coordinator>(members, config_.fusion_threshold, config_.fusion_max_tensor,
                                                 config_.cache_capacity);
    if (config_.autotune.enabled)
      tuner_ = std::make_unique<Autotuner>(config_.autotune,
                                           TunedParams{config_.fusion_threshold, config_.cycle_time_ms},
                                           config_.hierarchical_allreduce);
    metrics_.autotuning = tuner_ && tuner_->tuning();
  }
  apply({config_.fusion_threshold, config_.cycle_time_ms});
  // A common time origin for the trace: now on rank 0's clock, and where that is on each rank's own clock.
  int64_t origin_us = now_us();
  MPI_Bcast(&origin_us, 1, MPI_INT64_T, 0, admin_);
  origin_us -= clock_offset_us;
  if (topo_.rank == 0) origins_us_.resize(topo_.size);
  MPI_Gather(&origin_us, 1, MPI_INT64_T, origins_us_.data(), 1, MPI_INT64_T, 0, admin_);
  if (!config_.timeline_path.empty()) {
    try {
      start_timeline(config_.timeline_path, config_.timeline_mark_cycles);
    } catch (const std::runtime_error& e) {  // as Horovod: the job runs on, without a timeline
      log::write(log::Level::Error, std::string("HOROVOD_TIMELINE: ") + e.what() + "; no timeline is written");
    }
  }
  if (log::enabled(log::Level::Info)) {
    std::ostringstream o;
    o << "engine started: rank " << topo_.rank << " of " << topo_.size << " (local " << topo_.local_rank << " of "
      << topo_.local_size << ", host " << topo_.cross_rank << " of " << topo_.cross_size << "); fusion threshold "
      << size_text(config_.fusion_threshold) << ", cycle time " << config_.cycle_time_ms << " ms, response cache "
      << config_.cache_capacity << ", spin " << config_.spin_us << " us, stall check "
      << (config_.stall_check ? std::to_string(static_cast<int>(config_.stall_check_s)) + " s" : "off");
    log::write(log::Level::Info, o.str());
  }
  progress_ = std::make_shared<Progress>([this](bool by_waiter) { return step(by_waiter); });
  last_work_us_ = now_us();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvd-engine");  // as top -H, perf and gdb show it
    if (!config_.thread_affinity.empty()) pin_thread(config_.thread_affinity, topo_.local_rank, topo_.local_size);
    prctl(PR_SET_TIMERSLACK, 1UL);  // its short sleeps end on time, not up to 50 us late
    loop();
  });
}

Engine::~Engine() { shutdown(); }

void Engine::check(const TensorEntry& e) const {
  auto set = sets_.get(e.request.spec.process_set);
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

std::vector<std::shared_ptr<Handle>> Engine::enqueue(std::vector<TensorEntry> group) {
  int device = -1;
  for (const auto& e : group) {
    check(e);
    if (e.device >= 0 && device >= 0 && e.device != device)
      throw InvalidArgument("tensor '" + e.request.name + "' is on cuda:" + std::to_string(e.device) +
                            ", but others of its group are on cuda:" + std::to_string(device) +
                            "; use one GPU per rank (its local rank's)");
    if (e.device >= 0) device = e.device;
  }
  if (device >= 0) {
    int claimed = -1;
    if (!gpu_device_.compare_exchange_strong(claimed, device) && claimed != device)
      for (auto& e : group) check(e);  // another thread claimed another device meanwhile: this throws
  }
  std::vector<std::shared_ptr<Handle>> handles;
  handles.reserve(group.size());
  int64_t now = now_us();
  for (auto& e : group) {
    e.request.rank = topo_.rank;
    e.handle = std::make_shared<Handle>(wait_spin_us_, progress_);
    e.enqueue_us = now;
    handles.push_back(e.handle);
  }
  std::unique_lock<std::mutex> lk(mu_);
  if (state_ != State::Running || stop_requested_) {
    Status s = stop_status_.ok() ? Status::Error(Status::Code::Shutdown, "the engine is shut down")
                                 : stop_status_;
    lk.unlock();
    for (auto& h : handles) h->complete(s);
    return handles;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    const TensorKey key = group[i].request.key();
    if (live_names_.insert(key).second) continue;
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
  for (auto& e : group) queue_.push_back(std::move(e));
  lk.unlock();
  cv_.notify_all();
  return handles;
}

void Engine::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_requested_ || state_ != State::Running) return;
    stop_requested_ = true;
    stop_status_ = Status::Error(Status::Code::Aborted, reason, topo_.rank);
  }
  cv_.notify_all();
}

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!stop_requested_ && state_ == State::Running) {
      stop_requested_ = true;
      stop_status_ = Status::Error(Status::Code::Shutdown,
                                   "rank " + std::to_string(topo_.rank) + " shut the engine down",
                                   topo_.rank);
    }
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  thread_.join();
  {
    std::lock_guard<std::mutex> g(timeline_mu_);
    writer_.reset();
  }
  free_comms();
}

// The process sets' communicators carry only collectives, which every member finished before its engine
// stopped, so they can go; the engine's own are kept for the next engine (see comm_pool.h).
void Engine::free_comms() {
  channel_.reset();
  gpu_.reset();
  for (const auto& ps : sets_.take_all()) {
    MPI_Comm c = ps->comm;
    if (ps->id != 0 && c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }
}

Status Engine::stop_status() const {
  std::lock_guard<std::mutex> g(mu_);
  return (state_ == State::Running && !stop_requested_) ? Status::Ok() : stop_status_;
}

int32_t Engine::add_process_set(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty() || std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end() ||
      ranks.front() < 0 || ranks.back() >= topo_.size)
    throw InvalidArgument("process set ranks must be distinct and in [0, " + std::to_string(topo_.size) + ")");
  auto ps = std::make_shared<ProcessSet>();
  ps->id = next_set_id_++;
  ps->ranks = ranks;
  if (ps->rank_in_set(topo_.rank) >= 0) {
    MPI_Group world, group;
    MPI_Comm_group(admin_, &world);
    MPI_Group_incl(world, static_cast<int>(ranks.size()), ranks.data(), &group);
    MPI_Comm_create_group(admin_, group, ps->id, &ps->comm);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
  }
  sets_.add(ps);
  if (log::enabled(log::Level::Info)) {
    std::string members;
    for (int r : ranks) members += (members.empty() ? "" : ", ") + std::to_string(r);
    log::write(log::Level::Info, "process set " + std::to_string(ps->id) + " added: ranks " + members);
  }
  return ps->id;
}

void Engine::remove_process_set(int32_t id) {
  if (id == 0) throw InvalidArgument("the global process set cannot be removed");
  if (!sets_.get(id)) throw InvalidArgument("unknown process set id " + std::to_string(id));
  std::unique_lock<std::mutex> lk(mu_);
  if (state_ == State::Stopped) {  // no engine thread to do it
    lk.unlock();
    remove_sets({id});
    return;
  }
  sets_to_remove_.push_back(id);
  const uint64_t ticket = ++sets_remove_asked_;
  cv_.notify_all();
  cv_.wait(lk, [&] { return sets_removed_ >= ticket || state_ == State::Stopped; });
  if (sets_removed_ < ticket) {
    lk.unlock();
    remove_sets({id});
  }
}

void Engine::remove_sets(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    auto ps = sets_.remove(id);
    if (!ps) continue;
    if (coordinator_) coordinator_->drop_set(id);
    const Status gone = Status::Error(Status::Code::Invalid, "process set " + std::to_string(id) +
                                                                 " was removed while this operation was pending");
    for (auto it = table_.begin(); it != table_.end();) {
      if (it->first.process_set != id) {
        ++it;
        continue;
      }
      fail(it->second, gone);
      it = table_.erase(it);
    }
    if (gpu_) gpu_->release_set(id);
    MPI_Comm c = ps->comm;
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    log::write(log::Level::Info, "process set " + std::to_string(id) + " removed");
  }
}

void Engine::start_timeline(const std::string& path, bool mark_cycles) {
  std::lock_guard<std::mutex> g(timeline_mu_);
  mark_cycles_ = mark_cycles;
  forwarded_seq_ = ring_.next_seq();
  if (topo_.rank == 0) {
    writer_.reset();
    writer_ = std::make_unique<TraceWriter>(path, origins_us_);
    log::write(log::Level::Info, "timeline: writing " + path);
  } else {
    forwarding_ = true;
  }
}

void Engine::stop_timeline() {
  std::lock_guard<std::mutex> g(timeline_mu_);
  mark_cycles_ = false;
  writer_.reset();
  forwarding_ = false;
}

void Engine::record(Phase p, const std::string& name, const char* op, int64_t start, int64_t bytes, int64_t end) {
  Event e;
  e.rank = topo_.rank;
  e.phase = p;
  e.name = name;
  e.op = op;
  e.start_us = start;
  e.dur_us = (end < 0 ? now_us() : end) - start;
  e.bytes = bytes;
  ring_.push(std::move(e));
}

void Engine::autotune(const Response& r, const std::vector<TensorEntry*>& es) {
  int64_t bytes = 0;
  for (auto* e : es) bytes += e->request.num_bytes();
  if (tuner_->record(r.names, bytes, now_us())) {
    apply(tuner_->params());
    int64_t at = now_us();
    record(Phase::Cycle, "autotune: " + tuner_->params().describe(), "autotune", at, 0, at);
  }
  metrics_.autotune_settings = tuner_->settings_tried();
  metrics_.autotuning = tuner_->tuning();
}

void Engine::apply(const TunedParams& p) {
  if (coordinator_) coordinator_->set_fusion_threshold(p.fusion_threshold);
  cycle_time_us_ = static_cast<int64_t>(p.cycle_time_ms * 1000);
  metrics_.fusion_threshold = p.fusion_threshold;
  metrics_.cycle_time_us = cycle_time_us_;
}

void Engine::fail(TensorEntry& e, const Status& s) {
  {
    std::lock_guard<std::mutex> g(mu_);
    live_names_.erase(e.request.key());
  }
  metrics_.errors += 1;
  e.handle->complete(s);
}

void Engine::loop() {
  int64_t next_poll_us = kFirstPollUs;
  while (state_ != State::Stopped) {
    if (progress_->step()) next_poll_us = kFirstPollUs;
    else idle(next_poll_us);
  }
  progress_->detach();  // waiters' handles may outlive the engine
  try {
    forward_timeline();  // this rank's last events: into the file on rank 0
  } catch (const std::exception& e) {
    log::write(log::Level::Error, std::string("timeline: the last events were lost: ") + e.what());
  }
  // Give in-flight notices a moment to leave before the buffers go.
  for (int i = 0; i < 1000 && !channel_->idle(); ++i) {
    channel_->reap();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Whatever fails on the engine thread (a malformed message, memory that cannot be had) aborts the job from
// this rank with the reason, so every rank's operations fail with it instead of the process terminating.
void Engine::on_engine_error(const std::string& what) {
  const std::string reason = "engine error on rank " + std::to_string(topo_.rank) + ": " + what;
  log::write(log::Level::Error, reason);
  try {
    if (state_ == State::Running) {
      begin_stop(Status::Error(Status::Code::Aborted, reason, topo_.rank));
      return;
    }
  } catch (...) {
  }
  try {
    finish_stop();
  } catch (...) {
    state_ = State::Stopped;  // nothing more can be done here; the waiters' handles stay pending
  }
}

bool Engine::step(bool by_waiter) {
  if (state_ == State::Stopped || (by_waiter && gpu_device_.load() >= 0)) return false;
  try {
    const bool worked = work();
    if (worked) last_work_us_.store(now_us(), std::memory_order_relaxed);
    return worked;
  } catch (const std::exception& e) {
    on_engine_error(e.what());
  } catch (...) {
    on_engine_error("unknown error");
  }
  return true;
}

// Between steps that found nothing to do: within the spin time of the last work, and while no waiter
// moves the engine along itself, it only yields, so the next operation or reply is seen at once; after
// that it sleeps, longer the longer it has been idle.
void Engine::idle(int64_t& next_poll_us) {
  const int64_t now = now_us(), since_work = now - last_work_us_.load(std::memory_order_relaxed);
  if (since_work < config_.spin_us && !progress_->driven()) {
    std::this_thread::yield();
    return;
  }
  const int64_t cap = since_work < kLongIdleUs ? kIdlePollUs : kLongIdlePollUs;
  const int64_t poll_us = std::min(next_poll_us, cap);
  next_poll_us = std::min(2 * poll_us, cap);
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::microseconds(poll_us), [this] {
    return !queue_.empty() || !sets_to_remove_.empty() || (stop_requested_ && state_ == State::Running);
  });
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
  while (auto m = channel_->poll()) {
    got_requests |= m->tag == kRequests;
    dispatch(*m);
    worked = true;
  }
  if (state_ == State::Running && coordinator_) coordinate(got_requests);
  if (!exec_queue_.empty() && mark_cycles_) {
    int64_t at = now_us();
    record(Phase::Cycle, "cycle", "cycle", at, 0, at);
  }
  std::vector<Response> batch;
  batch.swap(exec_queue_);
  for (const Response& r : batch) execute(r);
  worked |= !batch.empty();
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
  if (now - last_periodic_us_ > kPeriodUs) periodic(now);
  channel_->reap();
  return worked;
}

void Engine::submit(std::vector<TensorEntry> fresh) {
  if (state_ != State::Running) {
    for (auto& e : fresh) fail(e, stop_status());
    return;
  }
  RequestBatch batch;
  int64_t now = now_us();
  const bool trace = log::enabled(log::Level::Trace);
  for (auto& e : fresh) {
    const Request& q = e.request;
    if (!sets_.get(q.spec.process_set)) {  // removed after this operation was checked
      fail(e, Status::Error(Status::Code::Invalid, "process set " + std::to_string(q.spec.process_set) +
                                                       " was removed while this operation was pending"));
      continue;
    }
    if (trace)
      log::write(log::Level::Trace, std::string("enqueued ") + op_name(q.spec.op) + " '" + q.name + "' " +
                                        describe(q) + " in process set " + std::to_string(q.spec.process_set));
    if (coordinator_) {
      coordinator_->add(q, now);
    } else {
      int32_t id = cache_.lookup(q);
      if (id >= 0) {
        batch.cached.push_back(id);
        metrics_.cached_requests += 1;
      } else {
        batch.requests.push_back(q);
        metrics_.full_requests += 1;
      }
    }
    TensorKey key = q.key();
    table_.emplace(std::move(key), std::move(e));
  }
  if (!coordinator_ && (!batch.requests.empty() || !batch.cached.empty()))
    channel_->send(0, kRequests, encode_batch(batch));
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
      for (auto& q : b.requests) {
        q.rank = m.source;  // a request speaks for the rank that sent it
        coordinator_->add(std::move(q), now);
      }
      for (int32_t id : b.cached)
        if (!coordinator_->add_cached(m.source, id, now))
          throw std::runtime_error("rank " + std::to_string(m.source) + " sent an unknown response-cache id " +
                                   std::to_string(id));
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
      std::vector<Event> es = decode_events(m.bytes.data(), m.bytes.size());
      std::lock_guard<std::mutex> g(timeline_mu_);
      if (writer_) writer_->add(std::move(es));
      return;
    }
    default:
      throw WireError("engine message with unknown tag " + std::to_string(m.tag) + " from rank " +
                      std::to_string(m.source));
  }
}

void Engine::coordinate(bool got_requests) {
  if (!coordinator_->has_ready()) return;
  // Hold ready tensors while more requests keep arriving, at most one cycle time, to fuse them, unless
  // waiting cannot add to their fusion.
  int64_t waited = now_us() - coordinator_->oldest_ready_us();
  if (got_requests && waited < cycle_time_us_ && coordinator_->worth_holding()) return;
  distribute(coordinator_->take_ready());
}

void Engine::distribute(std::vector<Response> responses) {
  // Each rank gets the responses of its process sets, in order; ranks with the same list (all of them,
  // when every set is the global one) share one encoding.
  std::vector<std::vector<size_t>> per_rank(topo_.size);
  for (size_t i = 0; i < responses.size(); ++i) {
    auto set = sets_.get(responses[i].spec.process_set);
    if (!set) continue;  // removed: its members failed their part when they removed it
    for (int k : set->ranks) per_rank[k].push_back(i);
  }
  std::vector<char> bytes;
  for (int k = 1; k < topo_.size; ++k) {
    if (per_rank[k].empty()) continue;
    if (bytes.empty() || per_rank[k] != per_rank[k - 1]) {
      std::vector<Response> mine;
      mine.reserve(per_rank[k].size());
      for (size_t i : per_rank[k]) mine.push_back(responses[i]);
      bytes = encode_responses(mine);
    }
    channel_->send(k, kResponses, bytes);
  }
  for (size_t i : per_rank[0]) exec_queue_.push_back(std::move(responses[i]));
}

void Engine::execute(const Response& r) {
  std::vector<decltype(table_)::iterator> found;
  std::vector<TensorEntry*> es;
  for (const auto& n : r.names) {
    auto it = table_.find(TensorKey{r.spec.process_set, n});
    if (it == table_.end()) {
      log::write(log::Level::Error, "internal error: response for unknown tensor " +
                                        describe_key(TensorKey{r.spec.process_set, n}));
      continue;
    }
    found.push_back(it);
    es.push_back(&it->second);
  }
  int64_t now = now_us();
  for (auto* e : es) {
    metrics_.negotiate_us += now - e->enqueue_us;
    record(Phase::Negotiate, e->request.name, op_name(r.spec.op), e->enqueue_us, e->request.num_bytes(), now);
  }
  Status s;
  auto set = sets_.get(r.spec.process_set);
  if (r.kind == Response::Kind::Error) {
    s = Status::Error(Status::Code::Mismatch, r.error);
  } else if (!set) {
    s = Status::Error(Status::Code::Invalid, "process set " + std::to_string(r.spec.process_set) +
                                                 " was removed while this operation was pending");
  } else if (es.size() != r.names.size()) {
    s = Status::Error(Status::Code::Internal, "engine state out of sync for " + label(r));
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
  metrics_.responses += 1;
  if (tuner_ && s.ok()) autotune(r, es);
  if (es.size() > 1) metrics_.fused_tensors += static_cast<int64_t>(es.size());
  for (size_t i = 0; i < es.size(); ++i) {
    const Request& q = es[i]->request;
    if (!s.ok()) {
      metrics_.errors += 1;
      continue;
    }
    metrics_.count(r.spec.op, q.num_bytes());
    if (!coordinator_ && es.size() == r.cache_ids.size()) cache_.learn(r.cache_ids[i], q);
  }
  {
    std::lock_guard<std::mutex> g(mu_);  // free the names before their waiters wake
    for (auto* e : es) live_names_.erase(e->request.key());
  }
  for (auto* e : es) e->handle->complete(s);
  for (auto it : found) table_.erase(it);
}

Status Engine::run(const Response& r, std::vector<TensorEntry*>& es, const ProcessSet& set) {
  int64_t total = 0;
  for (auto* e : es) total += e->request.num_bytes();
  const std::string name = label(r);
  // One span of this response: a timeline event and the phase's time in the metrics.
  auto span = [&](Phase p, const char* op, int64_t start, int64_t end) {
    record(p, name, op, start, total, end);
    int64_t d = end - start;
    if (p == Phase::MemcpyIn) metrics_.memcpy_in_us += d;
    if (p == Phase::Collective) metrics_.collective_us += d;
    if (p == Phase::MemcpyOut) metrics_.memcpy_out_us += d;
  };
  CollectiveContext c{set, topo_.rank, *reductions_, fusion_buffer_, ring_buffer_,
                      [&](Phase p, int64_t start) { span(p, op_name(r.spec.op), start, now_us()); },
                      config_.sync_reduce_bytes, config_.ring_allreduce_bytes, config_.test_mpi_max_count};
  if (r.spec.memory == Memory::Cuda) return gpu_->run(c, r, es, span);
  switch (r.spec.op) {
    case OpType::Allreduce: return run_allreduce(c, r, es);
    case OpType::Allgather: return run_allgather(c, r, *es[0]);
    case OpType::Broadcast: return run_broadcast(c, r, *es[0]);
    case OpType::Alltoall: return run_alltoall(c, r, *es[0]);
    case OpType::Reducescatter: return run_reducescatter(c, r, *es[0]);
    case OpType::Barrier: return run_barrier(c);
  }
  return Status::Error(Status::Code::Internal, "unknown op");
}

void Engine::begin_stop(const Status& s) {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_status_ = s;
    stop_requested_ = true;
  }
  int64_t now = now_us();
  const bool aborted = s.code == Status::Code::Aborted;
  log::write(log::Level::Info, std::string(aborted ? "aborting: " : "stopping: ") + s.message);
  record(Phase::Abort, s.message, aborted ? "abort" : "shutdown", now, 0, now);
  forward_timeline();  // rank 0 may stop listening soon: send it this rank's last events now
  const int tag = aborted ? kAbort : kShutdown;
  if (coordinator_) {
    // Rank 0 has run every response it sent; this notice follows them on every channel.
    for (int k = 1; k < topo_.size; ++k) channel_->send(k, tag, encode_stop({true, s}));
    finish_stop();
    return;
  }
  if (s.origin_rank == topo_.rank)
    for (int k = 0; k < topo_.size; ++k)
      if (k != topo_.rank) channel_->send(k, tag, encode_stop({false, s}));
  state_ = State::Draining;
  drain_deadline_us_ = now_us() + kDrainTimeoutUs;
}

void Engine::finish_stop() {
  Status s;
  {
    std::lock_guard<std::mutex> g(mu_);
    s = stop_status_;
    state_ = State::Stopped;
  }
  cv_.notify_all();  // remove_process_set waits for the engine thread, or for this
  for (auto& kv : table_) fail(kv.second, s);
  table_.clear();
  std::vector<TensorEntry> rest;
  {
    std::lock_guard<std::mutex> g(mu_);
    rest.swap(queue_);
  }
  for (auto& e : rest) fail(e, s);
}

void Engine::periodic(int64_t now) {
  last_periodic_us_ = now;
  forward_timeline();
  if (!coordinator_ || !config_.stall_check || state_ != State::Running) return;
  for (const auto& st : coordinator_->stalled(now, static_cast<int64_t>(config_.stall_check_s * 1e6))) {
    std::ostringstream o;
    o << "tensor " << describe_key(st.key) << " has waited " << static_cast<int>(st.waited_seconds)
      << " s; ranks that have not submitted it: ";
    for (size_t i = 0; i < st.missing_ranks.size(); ++i) o << (i ? ", " : "") << st.missing_ranks[i];
    log::warning("stall detected: " + o.str());
    metrics_.stalls += 1;
    record(Phase::Stall, o.str(), "stall", now, 0, now);
    if (config_.stall_shutdown_s > 0 && st.waited_seconds >= config_.stall_shutdown_s)
      begin_stop(Status::Error(Status::Code::Aborted, "stall shutdown: " + o.str(), topo_.rank));
    if (state_ != State::Running) return;
  }
}

void Engine::forward_timeline() {
  std::lock_guard<std::mutex> g(timeline_mu_);
  if (!writer_ && !forwarding_) return;
  uint64_t dropped = 0;
  auto es = ring_.drain(forwarded_seq_, 1 << 14, &dropped);
  if (es.empty()) return;
  forwarded_seq_ = es.back().seq + 1;
  if (writer_) writer_->add(std::move(es));
  else channel_->send(0, kTimeline, encode_events(es));
}

}  // namespace hvd
