#include "gpu/device_memory.h"

namespace hvd::gpu {

GrowableBuffer::~GrowableBuffer() { release(); }

void GrowableBuffer::release() {
  if (!ptr_) return;
  if (kind_ == Kind::Device) api_.cudaFree(ptr_);
  else api_.cudaFreeHost(ptr_);
  ptr_ = nullptr;
  size_ = 0;
}

cudaError_t GrowableBuffer::reserve(size_t bytes) {
  if (bytes <= size_) return cudaSuccess;
  release();
  size_t want = bytes + bytes / 4;  // some headroom, so slowly growing batches do not realloc each time
  cudaError_t e = kind_ == Kind::Device ? api_.cudaMalloc(&ptr_, want) : api_.cudaMallocHost(&ptr_, want);
  if (e != cudaSuccess) {
    api_.cudaGetLastError();
    ptr_ = nullptr;
    return e;
  }
  size_ = want;
  return cudaSuccess;
}

std::shared_ptr<void> device_alloc(const CudaApi& api, size_t bytes, cudaError_t* error) {
  *error = cudaSuccess;
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  *error = api.cudaMalloc(&p, bytes);
  if (*error != cudaSuccess) {
    api.cudaGetLastError();
    return nullptr;
  }
  const CudaApi* a = &api;  // the runtime's table lives for the whole process
  return std::shared_ptr<void>(p, [a](void* q) { a->cudaFree(q); });
}

}  // namespace hvd::gpu
