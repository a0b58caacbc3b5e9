#include "gpu/ready_event.h"

#include <map>
#include <mutex>
#include <vector>

namespace hvd::gpu {
namespace {

// Events no ReadyEvent holds, per device; never destroyed (the process's contexts outlive them).
std::mutex g_pool_mu;
std::map<int, std::vector<cudaEvent_t>> g_pool;
std::mutex g_order_mu;  // held across a record and its number, so their orders agree on every stream
uint64_t g_order = 0;

cudaEvent_t take(int device) {
  std::lock_guard<std::mutex> g(g_pool_mu);
  auto& free = g_pool[device];
  if (free.empty()) return nullptr;
  cudaEvent_t ev = free.back();
  free.pop_back();
  return ev;
}

}  // namespace

std::shared_ptr<ReadyEvent> ReadyEvent::record(const Runtime& rt, int device, cudaStream_t stream,
                                               std::string* error) {
  const CudaApi& api = rt.cuda();
  int prev = -1;
  api.cudaGetDevice(&prev);
  if (prev != device && api.cudaSetDevice(device) != cudaSuccess) {
    *error = "cannot use cuda:" + std::to_string(device) + ": " + rt.cuda_error(api.cudaGetLastError());
    return nullptr;
  }
  cudaEvent_t ev = take(device);
  cudaError_t e = ev ? cudaSuccess : api.cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  uint64_t order = 0;
  if (e == cudaSuccess) {
    {
      std::lock_guard<std::mutex> g(g_order_mu);
      e = api.cudaEventRecord(ev, stream);
      order = ++g_order;
    }
    if (e != cudaSuccess) api.cudaEventDestroy(ev);  // not pooled: it may be what failed
  }
  if (prev >= 0 && prev != device) api.cudaSetDevice(prev);
  if (e != cudaSuccess) {
    api.cudaGetLastError();
    *error = "cannot record a ready event on the producer's stream: " + rt.cuda_error(e);
    return nullptr;
  }
  return std::make_shared<ReadyEvent>(Token{}, device, stream, ev, order);
}

bool ReadyEvent::same_stream(const ReadyEvent& other) const {
  return device_ == other.device_ && stream_ == other.stream_ && stream_ != per_thread_stream();
}

ReadyEvent::~ReadyEvent() {
  std::lock_guard<std::mutex> g(g_pool_mu);
  g_pool[device_].push_back(event_);
}

}  // namespace hvd::gpu
