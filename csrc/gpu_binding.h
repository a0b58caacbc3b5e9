// Binds the GPU path: loading CUDA and NCCL, their status, and enqueueing device tensors.
#pragma once

#include <nanobind/nanobind.h>

namespace jhvd {

void bind_gpu(nanobind::module_& m);

}  // namespace jhvd
