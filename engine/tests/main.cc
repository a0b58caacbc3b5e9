// Runs every registered engine unit test and prints the totals.
#include "check.h"

int main() {
  int passed = 0, failed = 0;
  for (const auto& c : check::cases()) {
    int before = check::failures();
    c.fn();
    bool ok = check::failures() == before;
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", c.name);
    (ok ? passed : failed)++;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
