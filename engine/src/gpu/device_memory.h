// Device and pinned host memory from the loaded CUDA runtime, owned by RAII objects.
#pragma once

#include <cstddef>
#include <memory>

#include "gpu/cuda_api.h"

namespace hvd::gpu {

// A reusable buffer that grows on demand: device memory (the fusion buffer) or page-locked
// host memory (host staging), so copies to and from it run asynchronously at full speed.
class GrowableBuffer {
 public:
  enum class Kind { Device, Pinned };
  GrowableBuffer(const CudaApi& api, Kind kind) : api_(api), kind_(kind) {}
  ~GrowableBuffer();
  GrowableBuffer(const GrowableBuffer&) = delete;
  GrowableBuffer& operator=(const GrowableBuffer&) = delete;

  // Makes room for `bytes` (contents are not kept); the CUDA error when allocation fails.
  cudaError_t reserve(size_t bytes);
  char* data() const { return static_cast<char*>(ptr_); }
  size_t size() const { return size_; }

 private:
  void release();
  const CudaApi& api_;
  Kind kind_;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// A device allocation shared with a Handle, freed when its last owner lets go; null for 0 bytes.
std::shared_ptr<void> device_alloc(const CudaApi& api, size_t bytes, cudaError_t* error);

}  // namespace hvd::gpu
