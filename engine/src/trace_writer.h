// Writes events as a Chrome trace JSON file that is valid JSON after every write:
// the closing bracket is always on disk and each append overwrites it in one write.
#pragma once

#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "output_file.h"
#include "timeline.h"

namespace hvd {

class TraceWriter {
 public:
  // origins_us[r]: the trace's time 0 on rank r's clock (hosts' clocks differ). Throws std::runtime_error
  // when the file cannot be created.
  TraceWriter(const std::string& path, std::vector<int64_t> origins_us);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Queues events for the writer thread (any rank's events; the rank is the trace process).
  void add(std::vector<Event> events);
  // add() for the events other ranks forwarded, less those that ended before this file was opened: they
  // belong to the timeline before it, and a peer's last batch for that one can reach rank 0 after
  // hvd.start_timeline() opened this file. (Rank 0's own are cut at the opening as they are recorded.)
  void add_forwarded(std::vector<Event> events);
  const std::string& path() const { return path_; }

 private:
  void run();
  void write(const std::vector<Event>& events);
  int lane(int32_t rank, const std::string& name, std::string* meta);
  int64_t origin(int32_t rank) const;

  std::string path_;
  std::vector<int64_t> origins_us_;
  int64_t opened_us_;  // when the file was opened, in trace time
  OutputFile file_;
  long end_ = 0;  // offset of the closing bracket
  bool first_ = true;
  std::map<std::pair<int32_t, std::string>, int> lanes_;
  std::map<int32_t, int> next_lane_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hvd
