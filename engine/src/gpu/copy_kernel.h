// The batched device-to-device copy kernel (kernels/batched_copy.cu): any number of copies of any
// sizes in one launch, where each cudaMemcpyAsync, even inside cudaMemcpyBatchAsync, costs
// microseconds. Its PTX is embedded in the engine and compiled by the driver when it is loaded,
// through the driver API, into the context the CUDA runtime made current on the calling thread.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "gpu/cuda_api.h"
#include "gpu/device_memory.h"
#include "gpu/driver_api.h"

namespace hvd::gpu {

class CopyKernel {
 public:
  // The kernel, loaded into the calling thread's current context; null, with `why`, where there
  // is no driver library, no current context, or the driver cannot compile the PTX. `rt` uploads
  // the tables of launches with more copies than the kernel's parameter holds.
  static std::unique_ptr<CopyKernel> load(const CudaApi& rt, std::string* why);
  ~CopyKernel();
  CopyKernel(const CopyKernel&) = delete;
  CopyKernel& operator=(const CopyKernel&) = delete;

  // Queues the copies dst[i] <- src[i] (bytes[i] each, none empty) on `stream`, in one launch;
  // "" or what failed.
  std::string launch(const std::vector<void*>& dst, const std::vector<const void*>& src,
                     const std::vector<size_t>& bytes, cudaStream_t stream);

 private:
  // A table of copies: written in pinned host memory, uploaded to device memory on the launch's
  // stream; `used` is recorded after the launch that reads it, and waited for before it is rewritten.
  struct Table {
    Table(const CudaApi& rt) : host(rt, GrowableBuffer::Kind::Pinned), device(rt, GrowableBuffer::Kind::Device) {}
    GrowableBuffer host, device;
    cudaEvent_t used = nullptr;
  };
  CopyKernel(const DriverApi& api, const CudaApi& rt, CUmodule module, CUfunction fn);
  std::string upload(Table& t, const void* copies, size_t bytes, cudaStream_t stream);
  std::string cuda_error(const char* what, cudaError_t e) const;
  const DriverApi& api_;
  const CudaApi& rt_;
  CUmodule module_;
  CUfunction fn_;
  std::array<std::unique_ptr<Table>, 2> tables_;  // alternate, so one launch's upload need not wait for the last's
  unsigned next_table_ = 0;
};

// What became of the last load in this process: "" before any, "loaded", or why it failed.
std::string copy_kernel_status();

}  // namespace hvd::gpu
