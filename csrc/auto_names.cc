#include "auto_names.h"

#include <nanobind/stl/string.h>

#include <map>
#include <utility>

namespace nb = nanobind;
using namespace nb::literals;

namespace jhvd {
namespace {

// The count of each (kind, set): Python's callers hold the GIL, which orders every use.
std::map<std::pair<std::string, int>, long long> g_counters;

}  // namespace

std::string auto_name(const std::string& kind, int set_id) {
  const long long n = g_counters[{kind, set_id}]++;
  return kind + ".noname." + std::to_string(set_id) + "." + std::to_string(n);
}

void bind_auto_names(nb::module_& m) {
  m.def("auto_name", &auto_name, "kind"_a, "set_id"_a,
        "The next automatic name for an unnamed op of `kind` on process set `set_id`.");
  m.def("restart_auto_names", [] { g_counters.clear(); }, "Start every count of automatic names again from 0.");
}

}  // namespace jhvd
