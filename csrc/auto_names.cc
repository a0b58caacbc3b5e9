#include "auto_names.h"

#include <nanobind/stl/optional.h>
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
  m.def("restart_auto_names", [](std::optional<int> set_id) {
    if (!set_id) return g_counters.clear();
    for (auto it = g_counters.begin(); it != g_counters.end();)
      it = it->first.second == *set_id ? g_counters.erase(it) : std::next(it);
  }, "set_id"_a = nb::none(), "Start the counts of automatic names of process set `set_id` (default: all) again from 0.");
}

}  // namespace jhvd
