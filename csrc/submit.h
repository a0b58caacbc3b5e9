// Binds submit, the one way a collective's Python arguments become engine entries (submit.cc).
#pragma once

#include <nanobind/nanobind.h>

namespace jhvd {

void bind_submit(nanobind::module_& m);

}  // namespace jhvd
