// Binds the GPU path: loading CUDA and NCCL, their status, and the engine entries of device tensors.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include "tensor_entry.h"

namespace jhvd {

// The entries of one operation on each DeviceArray of `arrays` (jupyter_hvd/gpu.py: address, shape, device and
// the stream its producer wrote it on), whose results go to `outputs`' (None: the engine allocates them).
// Each input is ready once the work queued so far on its stream (None: it is ready now) is done.
std::vector<hvd::TensorEntry> device_entries(const hvd::OpSpec& spec, const std::vector<std::string>& names,
                                             const std::vector<int>& codes, nanobind::list arrays,
                                             nanobind::list outputs, const std::vector<int64_t>& splits);

void bind_gpu(nanobind::module_& m);

}  // namespace jhvd
