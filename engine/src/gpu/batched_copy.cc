#include "gpu/batched_copy.h"

namespace hvd::gpu {

void BatchedCopy::add(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  dsts_.push_back(dst);
  srcs_.push_back(src);
  sizes_.push_back(bytes);
}

void BatchedCopy::reserve(size_t n) {
  dsts_.reserve(n);
  srcs_.reserve(n);
  sizes_.reserve(n);
}

cudaError_t BatchedCopy::issue(const CudaApi& api, cudaStream_t stream, int device, bool* batch) const {
  const size_t n = dsts_.size();
  if (*batch && n > 1 && (api.cudaMemcpyBatchAsync_13 || api.cudaMemcpyBatchAsync_12)) {
    // One set of attributes for every copy: sources read in stream order. The location hints
    // matter only for managed memory; they name this rank's device.
    cudaMemcpyAttributes attrs{cudaMemcpySrcAccessOrderStream, {cudaMemLocationTypeDevice, device},
                               {cudaMemLocationTypeDevice, device}, 0};
    size_t first = 0;
    cudaError_t e;
    if (api.cudaMemcpyBatchAsync_13) {
      e = api.cudaMemcpyBatchAsync_13(dsts_.data(), srcs_.data(), sizes_.data(), n, &attrs, &first, 1, stream);
    } else {
      size_t failed = 0;
      // CUDA 12's declaration lacks the consts; it does not write through these pointers.
      e = api.cudaMemcpyBatchAsync_12(const_cast<void**>(dsts_.data()), const_cast<void**>(srcs_.data()),
                                      const_cast<size_t*>(sizes_.data()), n, &attrs, &first, 1, &failed, stream);
    }
    if (e == cudaSuccess) return e;
    api.cudaGetLastError();
    *batch = false;
  }
  for (size_t i = 0; i < n; ++i) {
    cudaError_t e = api.cudaMemcpyAsync(dsts_[i], srcs_[i], sizes_[i], kind_, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace hvd::gpu
