#include "gpu/copy_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "gpu/copy_kernel_args.h"
#include "gpu/dynamic_library.h"

namespace hvd::gpu {

// kernels/batched_copy.ptx, embedded by the build (engine/CMakeLists.txt).
extern const char kBatchedCopyPtx[];

namespace {

static_assert(sizeof(JhvdCopies) <= 4096, "a kernel's parameters must fit in 4 KiB");

std::mutex g_status_mu;
std::string g_status;

void set_status(const std::string& s) {
  std::lock_guard<std::mutex> g(g_status_mu);
  g_status = s;
}

std::string result_text(const DriverApi& api, CUresult r) {
  const char* text = nullptr;
  if (api.cuGetErrorString && api.cuGetErrorString(r, &text) == CUDA_SUCCESS && text)
    return std::string(text) + " (CUresult " + std::to_string(r) + ")";
  return "CUresult " + std::to_string(r);
}

// The driver library (JUPYTER_HVD_CUDA_DRIVER_LIB, a file or a folder, replaces the loader's search),
// opened and initialised once per process; null, with `why`, where it is not.
const DriverApi* driver(std::string* why) {
  static DynamicLibrary lib;
  static DriverApi api{};
  static std::string error;
  static const bool ok = [] {
    const char* override_path = std::getenv("JUPYTER_HVD_CUDA_DRIVER_LIB");
    lib = DynamicLibrary::open_first(library_candidates({"libcuda.so.1"}, {}, override_path ? override_path : ""),
                                     &error);
    if (!lib) {
      error = "no CUDA driver library (" + error + ")";
      return false;
    }
    std::string missing;
#define JHVD_CU(name)                                                    \
  api.name = reinterpret_cast<decltype(api.name)>(lib.symbol(#name)); \
  if (!api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
    JHVD_CU(cuInit) JHVD_CU(cuGetErrorString) JHVD_CU(cuCtxGetCurrent) JHVD_CU(cuModuleLoadData)
    JHVD_CU(cuModuleUnload) JHVD_CU(cuModuleGetFunction) JHVD_CU(cuLaunchKernel)
#undef JHVD_CU
    if (!missing.empty()) {
      error = lib.path() + " lacks " + missing;
      return false;
    }
    if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS) {
      error = "cuInit: " + result_text(api, r);
      return false;
    }
    return true;
  }();
  if (!ok) *why = error;
  return ok ? &api : nullptr;
}

}  // namespace

std::unique_ptr<CopyKernel> CopyKernel::load(std::string* why) {
  std::unique_ptr<CopyKernel> k;
  if (const DriverApi* api = driver(why)) {
    CUcontext ctx = nullptr;
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
    CUresult r;
    if (api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
      *why = "no current CUDA context on the engine's thread";
    } else if ((r = api->cuModuleLoadData(&module, kBatchedCopyPtx)) != CUDA_SUCCESS) {
      *why = "the driver could not load its PTX: " + result_text(*api, r);
    } else if ((r = api->cuModuleGetFunction(&fn, module, "jhvd_batched_copy")) != CUDA_SUCCESS) {
      *why = "jhvd_batched_copy: " + result_text(*api, r);
      api->cuModuleUnload(module);
    } else {
      k.reset(new CopyKernel(*api, module, fn));
    }
  }
  set_status(k ? "loaded" : *why);
  return k;
}

CopyKernel::~CopyKernel() { api_.cuModuleUnload(module_); }

std::string CopyKernel::launch(const std::vector<void*>& dst, const std::vector<const void*>& src,
                               const std::vector<size_t>& bytes, cudaStream_t stream) const {
  JhvdCopies c;
  void* args[] = {&c};  // copied by the launch, so `c` is refilled for the next one
  for (size_t first = 0; first < dst.size(); first += JHVD_COPY_MAX) {
    c.count = static_cast<unsigned>(std::min<size_t>(JHVD_COPY_MAX, dst.size() - first));
    unsigned blocks = 0;
    for (unsigned i = 0; i < c.count; ++i) {
      c.src[i] = static_cast<const char*>(src[first + i]);
      c.dst[i] = static_cast<char*>(dst[first + i]);
      c.bytes[i] = bytes[first + i];
      c.first_block[i] = blocks;
      blocks += static_cast<unsigned>((bytes[first + i] + JHVD_COPY_CHUNK - 1) / JHVD_COPY_CHUNK);
    }
    c.first_block[c.count] = blocks;
    if (CUresult r = api_.cuLaunchKernel(fn_, blocks, 1, 1, JHVD_COPY_THREADS, 1, 1, 0, stream, args, nullptr);
        r != CUDA_SUCCESS)
      return "launching the batched copy kernel: " + result_text(api_, r);
  }
  return "";
}

std::string copy_kernel_status() {
  std::lock_guard<std::mutex> g(g_status_mu);
  return g_status;
}

}  // namespace hvd::gpu
