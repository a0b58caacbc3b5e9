// The batched device-to-device copy kernel (kernels/batched_copy.cu): up to JHVD_COPY_MAX copies
// of any sizes per launch, where each cudaMemcpyAsync, even inside cudaMemcpyBatchAsync, costs
// microseconds. Its PTX is embedded in the engine and compiled by the driver when it is loaded,
// through the driver API, into the context the CUDA runtime made current on the calling thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu/driver_api.h"

namespace hvd::gpu {

class CopyKernel {
 public:
  // The kernel, loaded into the calling thread's current context; null, with `why`, where there
  // is no driver library, no current context, or the driver cannot compile the PTX.
  static std::unique_ptr<CopyKernel> load(std::string* why);
  ~CopyKernel();
  CopyKernel(const CopyKernel&) = delete;
  CopyKernel& operator=(const CopyKernel&) = delete;

  // Queues the copies dst[i] <- src[i] (bytes[i] each, none empty) on `stream`; "" or what failed.
  std::string launch(const std::vector<void*>& dst, const std::vector<const void*>& src,
                     const std::vector<size_t>& bytes, cudaStream_t stream) const;

 private:
  CopyKernel(const DriverApi& api, CUmodule module, CUfunction fn) : api_(api), module_(module), fn_(fn) {}
  const DriverApi& api_;
  CUmodule module_;
  CUfunction fn_;
};

// What became of the last load in this process: "" before any, "loaded", or why it failed.
std::string copy_kernel_status();

}  // namespace hvd::gpu
