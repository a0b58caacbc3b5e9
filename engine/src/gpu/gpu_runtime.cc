#include "gpu/gpu_runtime.h"

#include <cstdlib>

namespace hvd::gpu {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

// Resolves `name` into `slot`; a missing required symbol is recorded in `missing`.
template <typename Fn>
void resolve(const DynamicLibrary& lib, const char* name, Fn*& slot, bool required, std::string* missing) {
  slot = reinterpret_cast<Fn*>(lib.symbol(name));
  if (!slot && required) *missing += (missing->empty() ? "" : ", ") + std::string(name);
}

std::string cuda_version_str(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

}  // namespace

SearchPaths SearchPaths::from_env(std::vector<std::string> cuda_dirs, std::vector<std::string> nccl_dirs) {
  SearchPaths p;
  p.cuda_dirs = std::move(cuda_dirs);
  p.nccl_dirs = std::move(nccl_dirs);
  if (auto v = env("JUPYTER_HVD_CUDART_LIB")) p.cuda_override = v;
  if (auto v = env("JUPYTER_HVD_NCCL_LIB")) p.nccl_override = v;
  return p;
}

GpuStatus Runtime::load(const SearchPaths& paths) {
  std::lock_guard<std::mutex> g(mu_);
  if (!status_.cuda.loaded) load_cuda(paths);
  if (!status_.nccl.loaded) load_nccl(paths);
  return status_;
}

GpuStatus Runtime::status() const {
  std::lock_guard<std::mutex> g(mu_);
  return status_;
}

bool Runtime::cuda_ready() const {
  std::lock_guard<std::mutex> g(mu_);
  return status_.cuda_ready();
}

bool Runtime::nccl_ready() const {
  std::lock_guard<std::mutex> g(mu_);
  return status_.nccl_ready();
}

void Runtime::load_cuda(const SearchPaths& paths) {
  LibraryStatus& s = status_.cuda;
  auto cands = library_candidates({"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"},
                                  paths.cuda_dirs, paths.cuda_override);
  std::string err;
  DynamicLibrary lib = DynamicLibrary::open_first(cands, &err);
  if (!lib) {
    s.error = "libcudart not found" +
              std::string(paths.cuda_override.empty() ? "" : " at JUPYTER_HVD_CUDART_LIB=" + paths.cuda_override) +
              " (install nvidia-cuda-runtime-cu12, or set JUPYTER_HVD_CUDART_LIB): " + err;
    return;
  }
  CudaApi api{};
  std::string missing;
#define JHVD_CUDA(name) resolve(lib, #name, api.name, true, &missing)
  JHVD_CUDA(cudaRuntimeGetVersion); JHVD_CUDA(cudaDriverGetVersion); JHVD_CUDA(cudaGetDeviceCount);
  JHVD_CUDA(cudaGetErrorString); JHVD_CUDA(cudaGetErrorName); JHVD_CUDA(cudaGetLastError);
  JHVD_CUDA(cudaGetDevice); JHVD_CUDA(cudaSetDevice); JHVD_CUDA(cudaDeviceGetPCIBusId);
  JHVD_CUDA(cudaStreamCreateWithFlags); JHVD_CUDA(cudaStreamDestroy); JHVD_CUDA(cudaStreamSynchronize);
  JHVD_CUDA(cudaStreamWaitEvent); JHVD_CUDA(cudaEventCreateWithFlags); JHVD_CUDA(cudaEventDestroy);
  JHVD_CUDA(cudaEventRecord); JHVD_CUDA(cudaEventQuery); JHVD_CUDA(cudaEventSynchronize);
  JHVD_CUDA(cudaEventElapsedTime); JHVD_CUDA(cudaMalloc); JHVD_CUDA(cudaFree); JHVD_CUDA(cudaMallocHost);
  JHVD_CUDA(cudaFreeHost); JHVD_CUDA(cudaMemcpyAsync);
#undef JHVD_CUDA
  if (!missing.empty()) {
    s.error = lib.path() + " lacks symbols: " + missing + " (CUDA runtime too old?)";
    return;
  }
  api.cudaRuntimeGetVersion(&s.version);
  if (void* batch = lib.symbol("cudaMemcpyBatchAsync")) {  // its arguments changed in CUDA 13
    if (s.version >= 13000) api.cudaMemcpyBatchAsync_13 = reinterpret_cast<MemcpyBatch13>(batch);
    else if (s.version >= 12080) api.cudaMemcpyBatchAsync_12 = reinterpret_cast<MemcpyBatch12>(batch);
  }
  cuda_ = api;
  cuda_lib_ = std::move(lib);
  s.loaded = true;
  s.path = cuda_lib_.path();
  s.error.clear();
  probe_devices();
}

void Runtime::probe_devices() {
  cuda_.cudaDriverGetVersion(&status_.driver_version);
  int n = 0;
  cudaError_t e = cuda_.cudaGetDeviceCount(&n);
  cuda_.cudaGetLastError();  // clear the sticky error slot of this thread
  if (e == cudaSuccess && n > 0) {
    status_.device_count = n;
    status_.device_error.clear();
    return;
  }
  status_.device_count = 0;
  const std::string runtime_v = cuda_version_str(status_.cuda.version);
  if (e == cudaSuccess || e == cudaErrorNoDevice) {
    const char* vis = env("CUDA_VISIBLE_DEVICES");
    status_.device_error = "no CUDA device visible" +
                           (vis ? " (CUDA_VISIBLE_DEVICES=" + std::string(vis) + ")" : std::string());
  } else if (status_.driver_version == 0) {
    status_.device_error = "no CUDA driver/device: no NVIDIA driver (libcuda.so.1) found; " + cuda_error(e);
  } else if (e == cudaErrorInsufficientDriver || status_.driver_version < status_.cuda.version) {
    status_.device_error = "CUDA driver too old: it supports CUDA " + cuda_version_str(status_.driver_version) +
                           ", the runtime is CUDA " + runtime_v + "; " + cuda_error(e);
  } else {
    status_.device_error = "no CUDA driver/device: " + cuda_error(e);
  }
}

void Runtime::load_nccl(const SearchPaths& paths) {
  LibraryStatus& s = status_.nccl;
  auto cands = library_candidates({"libnccl.so.2", "libnccl.so"}, paths.nccl_dirs, paths.nccl_override);
  std::string err;
  DynamicLibrary lib = DynamicLibrary::open_first(cands, &err);
  if (!lib) {
    s.error = "libnccl not found" +
              std::string(paths.nccl_override.empty() ? "" : " at JUPYTER_HVD_NCCL_LIB=" + paths.nccl_override) +
              " (install nvidia-nccl-cu12, or set JUPYTER_HVD_NCCL_LIB): " + err;
    return;
  }
  NcclApi api{};
  std::string missing;
#define JHVD_NCCL(name, required) resolve(lib, #name, api.name, required, &missing)
  JHVD_NCCL(ncclGetVersion, true); JHVD_NCCL(ncclGetErrorString, true); JHVD_NCCL(ncclGetUniqueId, true);
  JHVD_NCCL(ncclCommInitRank, true); JHVD_NCCL(ncclCommDestroy, true); JHVD_NCCL(ncclCommAbort, true);
  JHVD_NCCL(ncclAllReduce, true); JHVD_NCCL(ncclBroadcast, true); JHVD_NCCL(ncclAllGather, true);
  JHVD_NCCL(ncclReduceScatter, true); JHVD_NCCL(ncclGroupStart, true); JHVD_NCCL(ncclGroupEnd, true);
  JHVD_NCCL(ncclCommGetAsyncError, false); JHVD_NCCL(ncclSend, false); JHVD_NCCL(ncclRecv, false);
  JHVD_NCCL(ncclRedOpCreatePreMulSum, false); JHVD_NCCL(ncclRedOpDestroy, false);
#undef JHVD_NCCL
  if (!missing.empty()) {
    s.error = lib.path() + " lacks symbols: " + missing + " (NCCL too old?)";
    return;
  }
  nccl_ = api;
  nccl_lib_ = std::move(lib);
  s.loaded = true;
  s.path = nccl_lib_.path();
  s.error.clear();
  nccl_.ncclGetVersion(&s.version);
}

std::string Runtime::cuda_error(cudaError_t e) const {
  if (!cuda_.cudaGetErrorName) return "CUDA error " + std::to_string(e);
  return std::string(cuda_.cudaGetErrorName(e)) + ": " + cuda_.cudaGetErrorString(e);
}

std::string Runtime::nccl_error(ncclResult_t r) const {
  if (!nccl_.ncclGetErrorString) return "NCCL error " + std::to_string(r);
  return std::string(nccl_.ncclGetErrorString(r)) + " (ncclResult " + std::to_string(r) + ")";
}

Runtime& runtime() {
  static Runtime r;  // its libraries are never unloaded (see DynamicLibrary)
  return r;
}

}  // namespace hvd::gpu
