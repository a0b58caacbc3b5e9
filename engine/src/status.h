// The outcome of one operation, carried from the engine thread to the caller.
#pragma once

#include <string>

#include "enum_list.h"

namespace hvd {

// Python raises one exception class per code (jupyter_hvd/errors.py, by name).
#define HVD_STATUS_CODES(X)                                                                        \
  X(Ok, "Ok") X(Mismatch, "Mismatch") X(Invalid, "Invalid") X(Aborted, "Aborted") X(Shutdown, "Shutdown") \
  X(Internal, "Internal") X(Refused, "Refused")

struct Status {
  enum class Code { HVD_STATUS_CODES(HVD_ENUM_VALUE) };
  Code code = Code::Ok;
  std::string message;
  int origin_rank = -1;  // for Aborted: the rank that aborted

  bool ok() const { return code == Code::Ok; }
  static Status Ok() { return {}; }
  static Status Error(Code c, std::string m, int origin = -1) { return {c, std::move(m), origin}; }
};

template <>
struct EnumNames<Status::Code> {
  static constexpr const char* names[] = {HVD_STATUS_CODES(HVD_ENUM_NAME)};
};

}  // namespace hvd
