// The CUDA runtime and NCCL, loaded at run time: where they came from, their versions, and
// why they are not usable when they are not. One per process, since the libraries are.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "gpu/cuda_api.h"
#include "gpu/dynamic_library.h"
#include "gpu/nccl_api.h"

namespace hvd::gpu {

struct LibraryStatus {
  bool loaded = false;
  std::string path;   // the file that was loaded
  std::string error;  // why it was not (not found, missing symbol), empty when loaded
  int version = 0;    // cudaRuntimeGetVersion (e.g. 12090) or ncclGetVersion (e.g. 22703)
};

struct GpuStatus {
  LibraryStatus cuda, nccl;
  int driver_version = 0;   // cudaDriverGetVersion: the newest CUDA the driver supports; 0 = no driver
  int device_count = 0;
  std::string device_error; // why no device is usable (no driver, driver too old, none visible)

  bool cuda_ready() const { return cuda.loaded && device_count > 0; }
  bool nccl_ready() const { return nccl.loaded && cuda_ready(); }
};

// Where to look: folders (e.g. an nvidia-* wheel's lib/) tried before the system loader path,
// and per-library overrides (a file or a folder; empty for none) that replace the search.
struct SearchPaths {
  std::vector<std::string> cuda_dirs, nccl_dirs;
  std::string cuda_override, nccl_override;  // JUPYTER_HVD_CUDART_LIB, JUPYTER_HVD_NCCL_LIB
  static SearchPaths from_env(std::vector<std::string> cuda_dirs, std::vector<std::string> nccl_dirs);
};

class Runtime {
 public:
  // Loads whichever of the two libraries is not loaded yet; a loaded one stays loaded.
  GpuStatus load(const SearchPaths& paths);
  GpuStatus status() const;
  bool cuda_ready() const;
  bool nccl_ready() const;

  // Valid once cuda_ready() / nccl_ready() (they never change after a successful load).
  const CudaApi& cuda() const { return cuda_; }
  const NcclApi& nccl() const { return nccl_; }

  // "cudaErrorX: message" for a CUDA error code.
  std::string cuda_error(cudaError_t e) const;
  std::string nccl_error(ncclResult_t r) const;

 private:
  void load_cuda(const SearchPaths& paths);
  void load_nccl(const SearchPaths& paths);
  void probe_devices();

  mutable std::mutex mu_;
  GpuStatus status_;
  DynamicLibrary cuda_lib_, nccl_lib_;
  CudaApi cuda_{};
  NcclApi nccl_{};
};

// The process's runtime (libraries are process-wide); nothing is loaded until load() is called.
Runtime& runtime();

}  // namespace hvd::gpu
