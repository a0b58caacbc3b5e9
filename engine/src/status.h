// The outcome of one operation, carried from the engine thread to the caller.
#pragma once

#include <string>

namespace hvd {

struct Status {
  enum class Code { Ok, Mismatch, Invalid, Aborted, Shutdown, Internal };
  Code code = Code::Ok;
  std::string message;
  int origin_rank = -1;  // for Aborted: the rank that aborted

  bool ok() const { return code == Code::Ok; }
  static Status Ok() { return {}; }
  static Status Error(Code c, std::string m, int origin = -1) { return {c, std::move(m), origin}; }
};

}  // namespace hvd
