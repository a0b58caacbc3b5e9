#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>
#include "clock.h"
#include "output_file.h"
#include "timeline.h"
#include "trace_writer.h"

using namespace hvd;

static Event ev(int rank, const std::string& name, Phase p = Phase::Collective) {
  Event e;
  e.rank = rank;
  e.name = name;
  e.phase = p;
  e.op = "allreduce";
  e.start_us = 1000;
  e.dur_us = 5;
  return e;
}

TEST_CASE("event_log_drains_by_sequence_and_counts_overwritten") {
  EventLog log(4);
  for (int i = 0; i < 6; ++i) log.push(0, Phase::Collective, "t" + std::to_string(i), "allreduce", 1000, 5, 0);
  uint64_t dropped = 0;
  auto es = log.drain(0, 100, &dropped);
  REQUIRE(es.size() == 4);
  CHECK(dropped == 2);
  CHECK(es.front().name == "t2");
  CHECK(es.back().seq == 5);
  REQUIRE(log.drain(6, 100, &dropped).empty());
  CHECK(dropped == 0);
  CHECK(log.drain(4, 1, &dropped).size() == 1);
  // A slot written again holds only the new event, whatever the length of the one before.
  log.push(1, Phase::Negotiate, std::string(40, 'x'), "broadcast", 7, 8, 9);
  for (int i = 0; i < 3; ++i) log.push(0, Phase::Collective, "s" + std::to_string(i), "allreduce", 1000, 5, 0);
  log.push(2, Phase::Queue, "y", "ab", 10, 11, 12);
  es = log.drain(10, 100, &dropped);
  REQUIRE(es.size() == 1);
  CHECK(es[0].seq == 10);
  CHECK(es[0].rank == 2);
  CHECK(es[0].phase == Phase::Queue);
  CHECK(es[0].name == "y");
  CHECK(es[0].op == "ab");
  CHECK(es[0].start_us == 10);
  CHECK(es[0].dur_us == 11);
  CHECK(es[0].bytes == 12);
}

static std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

static bool balanced_json_object(const std::string& s) {
  int depth = 0;
  bool in_str = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_str) {
      if (c == '\\') ++i;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') --depth;
    if (depth < 0) return false;
  }
  return depth == 0 && !in_str;
}

TEST_CASE("trace_puts_every_rank_on_one_time_axis") {
  // Rank 1's clock reads 200 us more than rank 0's: its origin is 200 us later on its own clock, so events
  // at the same moment (1000 on rank 0's clock, 1200 on rank 1's) get the same trace time.
  char tmpl[] = "/tmp/trace_testXXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  std::string path = tmpl;
  {
    TraceWriter w(path, {400, 600});
    Event late = ev(1, "b");
    late.start_us = 1200;
    w.add({ev(0, "a"), late});
  }  // the writer writes what it was given before it closes
  std::string out = slurp(path);
  CHECK(out.find("\"ts\": 600, \"dur\": 5, \"pid\": 0") != std::string::npos);
  CHECK(out.find("\"ts\": 600, \"dur\": 5, \"pid\": 1") != std::string::npos);
  unlink(path.c_str());
}

TEST_CASE("a_new_trace_leaves_out_forwarded_events_that_ended_before_it_was_opened") {
  // Rank 1's clock reads 200 us more than rank 0's; its batches for an earlier timeline can arrive late.
  char tmpl[] = "/tmp/trace_testXXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  std::string path = tmpl;
  const int64_t now = now_us();
  {
    TraceWriter w(path, {now - 1000000, now - 1000000 + 200});
    Event before = ev(1, "before"), after = ev(1, "after");
    before.start_us = now + 200 - 3000;  // ended 3 ms before the file was opened, on rank 1's clock
    after.start_us = now + 200 + 1000000;  // a second after
    w.add_forwarded({before, after});
  }
  std::string out = slurp(path);
  CHECK(out.find("\"tensor\": \"after\"") != std::string::npos);
  CHECK(out.find("\"tensor\": \"before\"") == std::string::npos);
  unlink(path.c_str());
}

TEST_CASE("trace_file_is_complete_json_after_every_write") {
  char tmpl[] = "/tmp/trace_testXXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  std::string path = tmpl;
  {
    TraceWriter w(path, {0, 0});
    CHECK(balanced_json_object(slurp(path)));
    w.add({ev(0, "grad\"quoted\""), ev(1, "b", Phase::Negotiate)});
    usleep(300000);
    std::string mid = slurp(path);
    CHECK(balanced_json_object(mid));
    CHECK(mid.find("\"pid\": 1") != std::string::npos);
    CHECK(mid.find("\"name\": \"ALLREDUCE\", \"ph\": \"X\"") != std::string::npos);
    CHECK(mid.find("\"name\": \"NEGOTIATE_ALLREDUCE\", \"ph\": \"X\"") != std::string::npos);
    w.add({ev(0, "c")});
  }
  std::string end = slurp(path);
  CHECK(balanced_json_object(end));
  CHECK(end.find("\"tensor\": \"c\"") != std::string::npos);
  CHECK(end.rfind("]}") != std::string::npos);
  unlink(path.c_str());
}

TEST_CASE("trace_names_events_as_horovods_timeline_does") {
  // Marks: a cycle's is CYCLE_START, the autotuner's AUTOTUNE; the file gives the wall-clock time of its time 0.
  char tmpl[] = "/tmp/trace_testXXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  std::string path = tmpl;
  const int64_t before = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  {
    TraceWriter w(path, {now_us() - 1000000});  // time 0 was a second ago
    Event cycle = ev(0, "cycle", Phase::Cycle), tune = ev(0, "autotune: x", Phase::Cycle);
    cycle.op = "cycle";
    tune.op = "autotune";
    Event gather = ev(0, "g", Phase::Negotiate);
    gather.op = "allgather";
    w.add({cycle, tune, gather, ev(0, "s", Phase::Stall)});
  }
  std::string out = slurp(path);
  CHECK(out.find("\"name\": \"CYCLE_START\"") != std::string::npos);
  CHECK(out.find("\"name\": \"AUTOTUNE\"") != std::string::npos);
  CHECK(out.find("\"name\": \"NEGOTIATE_ALLGATHER\"") != std::string::npos);
  CHECK(out.find("\"name\": \"STALL\"") != std::string::npos);
  const std::string key = "\"otherData\": {\"start_time_since_epoch_in_micros\": ";
  const size_t at = out.find(key);
  REQUIRE(at != std::string::npos);
  const int64_t start = std::stoll(out.substr(at + key.size()));
  CHECK(start >= before - 1000000 - 100000);
  CHECK(start <= before - 1000000 + 100000);
  unlink(path.c_str());
}

TEST_CASE("output_files_are_never_written_through_a_symbolic_link") {
  char dir[] = "/tmp/jhvd-output-XXXXXX";
  CHECK(mkdtemp(dir) != nullptr);
  const std::string target = std::string(dir) + "/target", link = std::string(dir) + "/link";
  { hvd::OutputFile f = hvd::create_output_file(target, "test file"); std::fputs("keep", f.get()); }
  CHECK(symlink(target.c_str(), link.c_str()) == 0);
  std::string error;
  try {
    hvd::create_output_file(link, "timeline file");
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  CHECK(error.find("cannot write the timeline file") != std::string::npos);
  CHECK(error.find("symbolic link") != std::string::npos);
  char buf[8] = {};
  FILE* f = std::fopen(target.c_str(), "r");
  CHECK(f);
  CHECK(std::fread(buf, 1, 4, f) == 4);
  CHECK(std::string(buf) == "keep");
  if (f) std::fclose(f);
  unlink(link.c_str());
  unlink(target.c_str());
  rmdir(dir);
}
