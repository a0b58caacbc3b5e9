// The batched device-to-device copy kernel (kernels/batched_copy.cu): any number of copies of any
// sizes in one launch, where each cudaMemcpyAsync, even inside cudaMemcpyBatchAsync, costs
// microseconds. Its PTX is embedded in the engine and compiled by the driver when it is loaded,
// through the driver API, into the context the CUDA runtime made current on the calling thread.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "gpu/batched_copy.h"
#include "gpu/copy_kernel_args.h"
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

  // Makes one launch ready for each of `batches` (device-to-device copies, none empty), for launch()
  // to queue in this order: the copies of every batch with more than the parameter holds go to the
  // device in one table, uploaded on `stream` now, so that a fused op's copies out wait for no upload
  // after its collective. Launches made ready earlier and not queued are dropped. "" or what failed.
  std::string ready(const std::vector<const BatchedCopy*>& batches, cudaStream_t stream);
  // Queues the copies of `b` on `stream` (the one its table was uploaded on) in one launch: the next
  // one made ready, when that is `b`'s, else `b` made ready on its own first. "" or what failed.
  std::string launch(const BatchedCopy& b, cudaStream_t stream);

 private:
  // A table of copies: written in pinned host memory, uploaded to device memory on the launch's
  // stream; `used` is recorded after the launch that reads it, and waited for before it is rewritten.
  struct Table {
    Table(const CudaApi& rt) : host(rt, GrowableBuffer::Kind::Pinned), device(rt, GrowableBuffer::Kind::Device) {}
    GrowableBuffer host, device;
    cudaEvent_t used = nullptr;
  };
  CopyKernel(const DriverApi& api, const CudaApi& rt, CUmodule module, CUfunction fn);
  std::string upload(Table& t, const std::vector<JhvdCopy>& copies, cudaStream_t stream);
  std::string cuda_error(const char* what, cudaError_t e) const;
  const DriverApi& api_;
  const CudaApi& rt_;
  CUmodule module_;
  CUfunction fn_;
  std::array<std::unique_ptr<Table>, 2> tables_;  // alternate, so one launch's upload need not wait for the last's
  unsigned next_table_ = 0;
  std::vector<const BatchedCopy*> ready_for_;  // the batches of the launches made ready, in order
  std::vector<JhvdCopies> ready_;  // those launches; their table's copies are on the device
  size_t next_ready_ = 0;
  Table* ready_table_ = nullptr;  // the table the ready launches read, if any
};

// What became of the last load in this process: "" before any, "loaded", or why it failed.
std::string copy_kernel_status();

}  // namespace hvd::gpu
