#include "gpu/copy_kernel.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

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

std::unique_ptr<CopyKernel> CopyKernel::load(const CudaApi& rt, std::string* why) {
  std::unique_ptr<CopyKernel> k;
  if (const DriverApi* api = driver(why)) {
    CUcontext ctx = nullptr;
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
    CUresult r;
    if (api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
      *why = "no current CUDA context on the thread running the engine's step";
    } else if ((r = api->cuModuleLoadData(&module, kBatchedCopyPtx)) != CUDA_SUCCESS) {
      *why = "the driver could not load its PTX: " + result_text(*api, r);
    } else if ((r = api->cuModuleGetFunction(&fn, module, "jhvd_batched_copy")) != CUDA_SUCCESS) {
      *why = "jhvd_batched_copy: " + result_text(*api, r);
      api->cuModuleUnload(module);
    } else {
      k.reset(new CopyKernel(*api, rt, module, fn));
    }
  }
  set_status(k ? "loaded" : *why);
  return k;
}

CopyKernel::CopyKernel(const DriverApi& api, const CudaApi& rt, CUmodule module, CUfunction fn)
    : api_(api), rt_(rt), module_(module), fn_(fn) {}

CopyKernel::~CopyKernel() {
  for (auto& t : tables_)
    if (t && t->used) rt_.cudaEventDestroy(t->used);
  api_.cuModuleUnload(module_);
}

std::string CopyKernel::cuda_error(const char* what, cudaError_t e) const {
  rt_.cudaGetLastError();
  const char* text = rt_.cudaGetErrorString ? rt_.cudaGetErrorString(e) : nullptr;
  return std::string(what) + ": " + (text ? text : "cudaError " + std::to_string(e));
}

std::string CopyKernel::upload(Table& t, const std::vector<JhvdCopy>& copies, cudaStream_t stream) {
  const size_t bytes = copies.size() * sizeof(JhvdCopy);
  cudaError_t e = cudaSuccess;
  if (t.used) e = rt_.cudaEventSynchronize(t.used);  // the last launch that read this table is done
  else e = rt_.cudaEventCreateWithFlags(&t.used, cudaEventDisableTiming);
  if (e != cudaSuccess) return cuda_error("the copy kernel's table event", e);
  if ((e = t.host.reserve(bytes)) != cudaSuccess) return cuda_error("pinned memory for the copy kernel's table", e);
  if ((e = t.device.reserve(bytes)) != cudaSuccess) return cuda_error("device memory for the copy kernel's table", e);
  std::memcpy(t.host.data(), copies.data(), bytes);
  if ((e = rt_.cudaMemcpyAsync(t.device.data(), t.host.data(), bytes, cudaMemcpyHostToDevice, stream)) != cudaSuccess)
    return cuda_error("uploading the copy kernel's table", e);
  return "";
}

std::string CopyKernel::ready(const std::vector<const BatchedCopy*>& batches, cudaStream_t stream) {
  ready_for_ = batches;
  ready_.assign(batches.size(), JhvdCopies{});
  next_ready_ = 0;
  ready_table_ = nullptr;
  std::vector<JhvdCopy> table;  // the copies of every batch over the inline limit, one after another
  std::vector<size_t> table_at(batches.size(), 0);
  for (size_t k = 0; k < batches.size(); ++k) {
    const BatchedCopy& b = *batches[k];
    JhvdCopies& c = ready_[k];
    const bool inline_copies = b.size() <= JHVD_COPY_INLINE;
    table_at[k] = table.size();
    if (!inline_copies) table.resize(table.size() + b.size());
    JhvdCopy* copies = inline_copies ? c.copies : table.data() + table_at[k];
    c.count = static_cast<unsigned>(b.size());
    for (size_t i = 0; i < b.size(); ++i) {
      copies[i] = {static_cast<const char*>(b.srcs()[i]), static_cast<char*>(b.dsts()[i]), b.sizes()[i], c.blocks};
      c.blocks += static_cast<unsigned>((b.sizes()[i] + JHVD_COPY_CHUNK - 1) / JHVD_COPY_CHUNK);
    }
  }
  if (table.empty()) return "";
  auto& slot = tables_[next_table_];
  next_table_ = (next_table_ + 1) % tables_.size();
  if (!slot) slot = std::make_unique<Table>(rt_);
  if (std::string error = upload(*slot, table, stream); !error.empty()) {
    ready_for_.clear();
    ready_.clear();
    return error;
  }
  ready_table_ = slot.get();
  const JhvdCopy* device = reinterpret_cast<const JhvdCopy*>(ready_table_->device.data());
  for (size_t k = 0; k < batches.size(); ++k)
    if (ready_[k].count > JHVD_COPY_INLINE) ready_[k].table = device + table_at[k];
  return "";
}

std::string CopyKernel::launch(const BatchedCopy& b, cudaStream_t stream) {
  if (next_ready_ >= ready_for_.size() || ready_for_[next_ready_] != &b) {
    if (std::string error = ready({&b}, stream); !error.empty()) return error;
  }
  JhvdCopies& c = ready_[next_ready_++];
  void* args[] = {&c};
  if (CUresult r = api_.cuLaunchKernel(fn_, c.blocks, 1, 1, JHVD_COPY_THREADS, 1, 1, 0, stream, args, nullptr);
      r != CUDA_SUCCESS)
    return "launching the batched copy kernel: " + result_text(api_, r);
  // After each launch that reads the table, so that its event follows every such launch queued,
  // also when an op fails before the rest of its launches.
  if (c.table) {
    if (cudaError_t e = rt_.cudaEventRecord(ready_table_->used, stream); e != cudaSuccess)
      return cuda_error("recording the copy kernel's table event", e);
  }
  return "";
}

std::string copy_kernel_status() {
  std::lock_guard<std::mutex> g(g_status_mu);
  return g_status;
}

}  // namespace hvd::gpu
