// The engine's timeline: events into the in-memory ring, rank 0's trace file, other ranks' events
// forwarded to it; and the autotuner's settings, which it marks on the timeline.
#include "clock.h"
#include "engine.h"
#include "log.h"
#include "wire.h"

namespace hvd {

void Engine::start_timeline(const std::string& path, bool mark_cycles) {
  std::lock_guard<std::mutex> g(timeline_mu_);
  mark_cycles_ = mark_cycles;
  forwarded_seq_ = events_.next_seq();
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
  if (writer_) forward_timeline_locked();  // rank 0's ops that completed before the call, not only those of
                                            // the last forwarding period (a send from this thread would race
                                            // the engine thread's use of the transport)
  mark_cycles_ = false;
  writer_.reset();
  forwarding_ = false;
}

void Engine::record(Phase p, const std::string& name, const char* op, int64_t start, int64_t bytes, int64_t end) {
  events_.push(topo_.rank, p, name, op, start, (end < 0 ? now_us() : end) - start, bytes);
}

void Engine::forward_timeline() {
  std::lock_guard<std::mutex> g(timeline_mu_);
  forward_timeline_locked();
}

void Engine::forward_timeline_locked() {
  if (!writer_ && !forwarding_) return;
  uint64_t dropped = 0;
  auto events = events_.drain(forwarded_seq_, 1 << 14, &dropped);
  if (events.empty()) return;
  forwarded_seq_ = events.back().seq + 1;
  if (writer_) writer_->add(std::move(events));
  else transport_->send(0, kTimeline, encode_events(events));
}

void Engine::autotune(const Response& r, const std::vector<TensorEntry*>& entries) {
  int64_t bytes = 0;
  for (auto* e : entries) bytes += e->request.num_bytes();
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

}  // namespace hvd
