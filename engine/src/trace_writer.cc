#include "trace_writer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>

#include "clock.h"

namespace hvd {
namespace {

const char kTrailer[] = "\n]}\n";

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') { o += '\\'; o += c; }
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o;
}

// An event's name in the file, as Horovod's timeline names it: NEGOTIATE_ALLREDUCE (the phase and its op),
// the collective by its op (ALLREDUCE, NCCL_ALLREDUCE, ...), a cycle's mark CYCLE_START; the other marks
// (AUTOTUNE) by their op, the rest by phase.
std::string trace_name(const Event& e) {
  std::string name = e.phase == Phase::Negotiate ? "NEGOTIATE_" + e.op
                     : e.phase == Phase::Cycle && e.op == "cycle" ? std::string("CYCLE_START")
                     : e.phase == Phase::Collective || e.phase == Phase::Cycle ? e.op
                                                                              : std::string(phase_name(e.phase));
  for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace

TraceWriter::TraceWriter(const std::string& path, std::vector<int64_t> origins_us)
    : path_(path),
      origins_us_(std::move(origins_us)),
      opened_us_(now_us() - origin(0)),
      file_(create_output_file(path, "timeline file")) {
  FILE* f = file_.get();
  std::setvbuf(f, nullptr, _IONBF, 0);  // each append reaches the file as one write
  // The wall-clock time of the trace's time 0 (on this rank's clock), which Horovod's timeline gives too.
  using namespace std::chrono;
  const int64_t epoch_us = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  const int64_t start_us = epoch_us - (now_us() - origin(0));
  std::fputs(("{\"displayTimeUnit\": \"ms\", \"otherData\": {\"start_time_since_epoch_in_micros\": " +
              std::to_string(start_us) + "}, \"traceEvents\": [").c_str(), f);
  end_ = std::ftell(f);
  std::fputs(kTrailer, f);
  std::fflush(f);
  thread_ = std::thread([this] { run(); });
}

TraceWriter::~TraceWriter() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void TraceWriter::add(std::vector<Event> events) {
  if (events.empty()) return;
  std::lock_guard<std::mutex> g(mu_);
  for (auto& e : events) queue_.push_back(std::move(e));
  cv_.notify_all();
}

void TraceWriter::add_forwarded(std::vector<Event> events) {
  auto ended_before = [this](const Event& e) { return e.start_us + e.dur_us - origin(e.rank) < opened_us_; };
  events.erase(std::remove_if(events.begin(), events.end(), ended_before), events.end());
  add(std::move(events));
}

void TraceWriter::run() {
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    cv_.wait_for(lk, std::chrono::milliseconds(100), [this] { return stop_ || !queue_.empty(); });
    std::vector<Event> batch;
    batch.swap(queue_);
    bool stopping = stop_;
    lk.unlock();
    if (!batch.empty()) write(batch);
    lk.lock();
    if (stopping && queue_.empty()) return;
  }
}

int TraceWriter::lane(int32_t rank, const std::string& name, std::string* meta) {
  auto key = std::make_pair(rank, name);
  auto it = lanes_.find(key);
  if (it != lanes_.end()) return it->second;
  int tid = next_lane_[rank]++;
  lanes_[key] = tid;
  if (tid == 0) {
    *meta += (first_ ? "\n" : ",\n");
    first_ = false;
    *meta += "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + std::to_string(rank) +
             ", \"args\": {\"name\": \"rank " + std::to_string(rank) + "\"}}";
  }
  *meta += (first_ ? "\n" : ",\n");
  first_ = false;
  *meta += "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + std::to_string(rank) +
           ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"name\": \"" + escape(name) + "\"}}";
  return tid;
}

int64_t TraceWriter::origin(int32_t rank) const {
  if (origins_us_.empty()) return 0;
  return rank >= 0 && static_cast<size_t>(rank) < origins_us_.size() ? origins_us_[rank] : origins_us_[0];
}

void TraceWriter::write(const std::vector<Event>& events) {
  std::string out;
  for (const Event& e : events) {
    bool engine_wide = e.phase == Phase::Cycle || e.phase == Phase::Stall || e.phase == Phase::Abort ||
                       e.phase == Phase::Shutdown;
    int tid = lane(e.rank, engine_wide ? std::string("engine") : e.name, &out);
    std::string label = trace_name(e);
    out += (first_ ? "\n" : ",\n");
    first_ = false;
    out += "{\"name\": \"" + escape(label) + "\", \"ph\": \"" + (e.dur_us > 0 ? "X" : "i") +
           "\", \"ts\": " + std::to_string(e.start_us - origin(e.rank)) +
           (e.dur_us > 0 ? ", \"dur\": " + std::to_string(e.dur_us) : std::string(", \"s\": \"t\"")) +
           ", \"pid\": " + std::to_string(e.rank) + ", \"tid\": " + std::to_string(tid) +
           ", \"args\": {\"tensor\": \"" + escape(e.name) + "\", \"bytes\": " +
           std::to_string(e.bytes) + "}}";
  }
  out += kTrailer;
  // One write that replaces the old trailer keeps the file parseable after every append.
  std::fseek(file_.get(), end_, SEEK_SET);
  std::fwrite(out.data(), 1, out.size(), file_.get());
  std::fflush(file_.get());
  end_ += static_cast<long>(out.size() - (sizeof(kTrailer) - 1));
}

}  // namespace hvd
