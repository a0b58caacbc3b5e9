// One monotonic clock for the whole engine, in microseconds (shared by every process on a host).
#pragma once

#include <chrono>
#include <cstdint>

namespace hvd {

inline int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace hvd
