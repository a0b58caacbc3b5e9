// Automatic names for unnamed ops, by the rule jupyter_hvd/naming.py states: the n-th unnamed op of a kind on
// a process set is `KIND.noname.SET.n`, counted from the engine's start. The counters live here, so that
// _C.submit numbers an unnamed op without a call into Python; naming.py reads and restarts the same ones.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

namespace jhvd {

// The next automatic name for an op of `kind` on process set `set_id`. Callers hold the GIL.
std::string auto_name(const std::string& kind, int set_id);

// _C.auto_name(kind, set_id) and _C.restart_auto_names(set_id=None).
void bind_auto_names(nanobind::module_& m);

}  // namespace jhvd
