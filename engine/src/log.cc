#include "log.h"

#include <sys/time.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace hvd {
namespace log {
namespace {

std::atomic<Level> g_threshold{Level::Warning};
std::atomic<int> g_rank{-1};
std::atomic<bool> g_show_time{true};

// Local wall-clock time to the microsecond, as Horovod prints it.
std::string wall_time() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm parts;
  localtime_r(&tv.tv_sec, &parts);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &parts);
  std::snprintf(buf + n, sizeof buf - n, ".%06ld", static_cast<long>(tv.tv_usec));
  return buf;
}

const char* level_name(Level l) { return enum_name(l); }

}  // namespace

Level parse_level(const std::string& value) {
  std::string v;
  for (char ch : value) v += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (size_t i = 0; i < enum_count<Level>(); ++i)
    if (v == EnumNames<Level>::names[i]) return static_cast<Level>(i);
  std::string names;
  for (size_t i = 0; i < enum_count<Level>(); ++i) names += (i ? ", " : "") + std::string(EnumNames<Level>::names[i]);
  throw std::invalid_argument("HOROVOD_LOG_LEVEL='" + value + "': expected one of " + names);
}

void configure(Level threshold, int rank, bool show_time) {
  g_threshold = threshold;
  g_rank = rank;
  g_show_time = show_time;
}

bool enabled(Level l) { return l >= g_threshold.load(std::memory_order_relaxed); }

std::string format_line(Level l, int rank, const std::string& time, const std::string& message) {
  std::string tag = "[jupyter_hvd";
  if (!time.empty()) tag += " " + time;
  if (rank >= 0) tag += " rank " + std::to_string(rank);
  std::string level = level_name(l);
  for (auto& ch : level) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return tag + "] " + level + ": " + message;
}

void write(Level l, const std::string& message) {
  if (!enabled(l)) return;
  std::string line = format_line(l, g_rank, g_show_time ? wall_time() : "", message) + "\n";
  std::fputs(line.c_str(), stderr);
}

}  // namespace log
}  // namespace hvd
