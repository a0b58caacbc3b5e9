// The MXNet engine bridge: collectives on NDArrays pushed into MXNet's dependency engine as
// asynchronous operations, so reads of a result wait for it and communication overlaps compute.
// libmxnet is not linked: its C API entry points arrive from Python at run time.
#pragma once

#include <nanobind/nanobind.h>

namespace jhvd {

// Adds mxnet_setup and mxnet_push to the module.
void bind_mxnet(nanobind::module_& m);

}  // namespace jhvd
