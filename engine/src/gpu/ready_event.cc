#include "gpu/ready_event.h"

namespace hvd::gpu {

std::shared_ptr<ReadyEvent> ReadyEvent::record(const Runtime& rt, int device, cudaStream_t stream,
                                               std::string* error) {
  const CudaApi& api = rt.cuda();
  int prev = -1;
  api.cudaGetDevice(&prev);
  if (prev != device && api.cudaSetDevice(device) != cudaSuccess) {
    *error = "cannot use cuda:" + std::to_string(device) + ": " + rt.cuda_error(api.cudaGetLastError());
    return nullptr;
  }
  cudaEvent_t ev = nullptr;
  cudaError_t e = api.cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e == cudaSuccess) {
    e = api.cudaEventRecord(ev, stream);
    if (e != cudaSuccess) api.cudaEventDestroy(ev);
  }
  if (prev >= 0 && prev != device) api.cudaSetDevice(prev);
  if (e != cudaSuccess) {
    api.cudaGetLastError();
    *error = "cannot record a ready event on the producer's stream: " + rt.cuda_error(e);
    return nullptr;
  }
  return std::make_shared<ReadyEvent>(Token{}, api, ev);
}

ReadyEvent::~ReadyEvent() { api_.cudaEventDestroy(event_); }

}  // namespace hvd::gpu
