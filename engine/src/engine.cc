#include "engine.h"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>
#include <future>
#include <numeric>
#include <sstream>

#include "clock.h"
#include "log.h"
#include "log_format.h"
#include "mpi_wiring.h"
#include "thread_placement.h"

namespace hvd {
Engine::Engine(MPI_Comm comm, Config config) : Engine(mpi_wiring(comm), std::move(config)) {}

Engine::Engine(EngineWiring wiring, Config config)
    : config_(std::move(config)),
      topo_(wiring.topology),
      admin_(wiring.admin),
      transport_(std::move(wiring.transport)),
      cache_(config_.cache_capacity),
      events_(config_.ring_capacity),
      stalls_(config_),
      origins_us_(std::move(wiring.origins_us)) {
  if (config_.mpi_yield) mpi_yield_ = std::move(wiring.mpi_yield);
  log::configure(config_.log_level, topo_.rank, !config_.log_hide_time);
  // A waiter works (see progress.h) for as long as the engine thread would otherwise spin, and only where
  // each local rank can have a core of those the host's ranks may use together (ranks bound one core each
  // have one apiece): with more ranks than cores, a busy waiter takes the core another rank needs.
  wait_spin_us_ = topo_.local_size <= topo_.host_cores ? config_.spin_us : 0;

  auto global = std::make_shared<ProcessSet>();
  global->id = 0;
  global->ranks.resize(topo_.size);
  std::iota(global->ranks.begin(), global->ranks.end(), 0);
  global->comm = wiring.data_comm;
  sets_.add(global);

  data_plane_ = wiring.make_data_plane(config_, [this] { return abandoned(); });
  if (topo_.rank == 0) {
    auto members = [this](int32_t id) -> const std::vector<int>* {
      auto ps = sets_.get(id);
      return ps ? &ps->ranks : nullptr;  // sets live until removed, after their last op
    };
    coordinator_ = std::make_unique<Coordinator>(members, config_.fusion_threshold, config_.fusion_max_tensor,
                                                 config_.cache_capacity, config_.carry_bytes);
    if (config_.autotune.enabled)
      tuner_ = std::make_unique<Autotuner>(config_.autotune,
                                           TunedParams{config_.fusion_threshold, config_.cycle_time_ms},
                                           config_.hierarchical_allreduce, config_.cache_capacity > 0);
    metrics_.autotuning = tuner_ && tuner_->tuning();
  }
  apply({config_.fusion_threshold, config_.cycle_time_ms});
  if (!config_.timeline_path.empty() && config_.timeline_path != "DYNAMIC") {
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
      << config_.cache_capacity << ", spin " << config_.spin_us << " us (waiters " << wait_spin_us_ << " us: "
      << topo_.local_size << " ranks on " << topo_.host_cores << " cores of this host), stall check "
      << (config_.stall_check ? std::to_string(static_cast<int>(config_.stall_check_s)) + " s" : "off");
    log::write(log::Level::Info, o.str());
  }
  progress_ = std::make_shared<Progress>([this](bool by_waiter) { return step(by_waiter); }, [this] {
    {
      std::lock_guard<std::mutex> g(mu_);
      woken_ = true;
    }
    cv_.notify_all();
  });
  last_work_us_ = now_us();
  // The thread is named and placed before the engine is handed out: waiters may run every step of a
  // job's first operations before the engine thread itself is scheduled.
  std::promise<void> placed;
  std::future<void> ready = placed.get_future();
  thread_ = std::thread([this, &placed] {
    pthread_setname_np(pthread_self(), "hvd-engine");  // as top -H, perf and gdb show it
    if (!config_.thread_affinity.empty()) pin_thread(config_.thread_affinity, topo_.local_rank, topo_.local_size);
    prctl(PR_SET_TIMERSLACK, 1UL);  // its short sleeps end on time, not up to 50 us late
    placed.set_value();
    loop();
  });
  ready.wait();
}

Engine::~Engine() { shutdown(); }

bool Engine::abandoned() const {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_requested_ && stop_status_.code == Status::Code::Aborted) return true;
  }
  return transport_->pending(kAbort);
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
  transport_.reset();
  data_plane_.reset();
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
  if (ps->rank_in_set(topo_.rank) >= 0 && admin_ != MPI_COMM_NULL) {
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
    cache_.drop_set(id);  // what this rank learned of the set's tensors
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
    if (data_plane_) data_plane_->release_set(id);
    MPI_Comm c = ps->comm;
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    log::write(log::Level::Info, "process set " + std::to_string(id) + " removed");
  }
}

}  // namespace hvd
