// The engine's messages on stderr, filtered as Horovod filters its own: HOROVOD_LOG_LEVEL is trace,
// debug, info, warning (the default), error or fatal; HOROVOD_LOG_HIDE_TIME=1 leaves the time out.
// One process-wide setting, as stderr is process-wide: the engine sets it when it starts.
#pragma once

#include <cstdint>
#include <string>

#include "enum_list.h"

namespace hvd {
namespace log {

#define HVD_LOG_LEVELS(X) \
  X(Trace, "trace") X(Debug, "debug") X(Info, "info") X(Warning, "warning") X(Error, "error") X(Fatal, "fatal")

enum class Level : uint8_t { HVD_LOG_LEVELS(HVD_ENUM_VALUE) };

}  // namespace log

template <>
struct EnumNames<log::Level> {
  static constexpr const char* names[] = {HVD_LOG_LEVELS(HVD_ENUM_NAME)};
};

namespace log {

// The level a HOROVOD_LOG_LEVEL value names, in any case; std::invalid_argument naming the choices.
Level parse_level(const std::string& value);

// Messages below `threshold` are dropped; each line names `rank`, and the wall-clock time unless hidden.
void configure(Level threshold, int rank, bool show_time);
bool enabled(Level l);
// One line on stderr, written with a single call so that lines of different threads do not interleave.
void write(Level l, const std::string& message);
// The line write() prints (without its newline); `time` empty when it is hidden.
std::string format_line(Level l, int rank, const std::string& time, const std::string& message);

inline void warning(const std::string& message) { write(Level::Warning, message); }

}  // namespace log
}  // namespace hvd
