// A minimal test harness: CHECK records failures, TEST registers a case, main runs them all.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace check {

struct Case {
  const char* name;
  std::function<void()> fn;
};
inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}
inline int& failures() {
  static int n = 0;
  return n;
}
struct Register {
  Register(const char* name, std::function<void()> fn) { cases().push_back({name, std::move(fn)}); }
};

}  // namespace check

#define TEST(name)                                                \
  static void name();                                             \
  static check::Register name##_registered(#name, name);          \
  static void name()

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::printf("  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);      \
      ++check::failures();                                                        \
    }                                                                             \
  } while (0)
