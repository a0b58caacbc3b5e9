// Many copies queued as one call: cudaMemcpyBatchAsync where the runtime has it (CUDA 12.8+), else
// one cudaMemcpyAsync each. Fusing many small tensors is otherwise dominated by the cost of
// launching each copy, not by moving the bytes.
#pragma once

#include <vector>

#include "gpu/cuda_api.h"

namespace hvd::gpu {

class BatchedCopy {
 public:
  explicit BatchedCopy(cudaMemcpyKind kind) : kind_(kind) {}

  // Adds a copy; zero-byte copies are dropped.
  void add(void* dst, const void* src, size_t bytes);
  void reserve(size_t n);
  size_t size() const { return dsts_.size(); }
  cudaMemcpyKind kind() const { return kind_; }
  const std::vector<void*>& dsts() const { return dsts_; }
  const std::vector<const void*>& srcs() const { return srcs_; }
  const std::vector<size_t>& sizes() const { return sizes_; }

  // Queues every copy on `stream` (of `device`), as one batch when `batch` and the runtime allow.
  // A batch the runtime refuses is queued copy by copy instead, and `*batch` turns false so that
  // later batches are not tried.
  cudaError_t issue(const CudaApi& api, cudaStream_t stream, int device, bool* batch) const;

 private:
  cudaMemcpyKind kind_;
  std::vector<void*> dsts_;
  std::vector<const void*> srcs_;
  std::vector<size_t> sizes_;
};

}  // namespace hvd::gpu
