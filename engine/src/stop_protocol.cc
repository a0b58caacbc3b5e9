// How engines stop together. A rank that aborts (or shuts down) sends a stop notice to every other rank;
// rank 0, which has run every response it sent, sends each rank a final notice after them and stops.
// Other ranks drain until rank 0's final notice arrives (or a deadline passes), then fail what is left.
// The notices' encoding is in wire.h.
#include "clock.h"
#include "engine.h"
#include "log.h"
#include "wire.h"

namespace hvd {
namespace {

constexpr int64_t kDrainTimeoutUs = 2000000;  // longest wait for rank 0's final stop notice

}  // namespace

void Engine::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_requested_ || state_ != State::Running) return;
    stop_requested_ = true;
    stop_status_ = Status::Error(Status::Code::Aborted, reason, topo_.rank);
  }
  cv_.notify_all();
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
  record(aborted ? Phase::Abort : Phase::Shutdown, s.message, aborted ? "abort" : "shutdown", now, 0, now);
  forward_timeline();  // rank 0 may stop listening soon: send it this rank's last events now
  const int tag = aborted ? kAbort : kShutdown;
  if (coordinator_) {
    // Rank 0 has run every response it sent; this notice follows them on every channel.
    for (int k = 1; k < topo_.size; ++k) transport_->send(k, tag, encode_stop({true, s}));
    finish_stop();
    return;
  }
  if (s.origin_rank == topo_.rank)
    for (int k = 0; k < topo_.size; ++k)
      if (k != topo_.rank) transport_->send(k, tag, encode_stop({false, s}));
  state_ = State::Draining;
  drain_deadline_us_ = now_us() + kDrainTimeoutUs;
}

// What a shutdown leaves pending, or a rank queues once a peer's shutdown reached it, some rank never
// submitted: it runs a collective its peers did not.
Status Engine::left_unsubmitted(Status s) {
  if (s.code == Status::Code::Shutdown)
    s.message += " (hvd.shutdown(), or the end of its program) before every rank had submitted this operation; "
                 "where ranks run different numbers of collectives (uneven data), end each rank's loop with "
                 "hvd.join()";
  return s;
}

void Engine::finish_stop() {
  Status s;
  {
    std::lock_guard<std::mutex> g(mu_);
    s = stop_status_;
  }
  s = left_unsubmitted(s);
  // The table is emptied before the engine says it stopped: from then on remove_process_set works on it from
  // the caller's thread.
  for (auto& kv : table_) fail(kv.second, s);
  table_.clear();
  std::vector<TensorEntry> rest;
  {
    std::lock_guard<std::mutex> g(mu_);
    state_ = State::Stopped;
    rest.swap(queue_);
  }
  cv_.notify_all();  // remove_process_set waits for the engine thread, or for this
  for (auto& e : rest) fail(e, s);
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

}  // namespace hvd
