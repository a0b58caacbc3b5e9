// The binding of the engine's cross-tier codes and OpSpec (contracts.cc).
#pragma once

#include <nanobind/nanobind.h>

namespace jhvd {

void bind_contracts(nanobind::module_& m);

}  // namespace jhvd
