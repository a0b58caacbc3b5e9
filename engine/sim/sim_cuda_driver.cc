// A simulated CUDA driver (libjhvd_sim_cuda.so) for the simulated runtime of sim_cudart.cc, with the
// driver calls the engine makes to load and launch its batched copy kernel. It lets CI run that path
// without a GPU (JUPYTER_HVD_CUDA_DRIVER_LIB names it); it proves the engine's launches, not the
// kernel's CUDA code, which only a real GPU runs.
//
// The only module it loads is the engine's kernel (its PTX must declare the parameter the engine
// passes), and a launch is checked: the launch shape, each copy's blocks, every byte inside device
// memory of the stream's device; at once for copies in the parameter, and for a table of copies in
// device memory (uploaded on the same stream just before) when the launch runs, with a line on stderr
// and no copy if it is wrong. It runs on the stream as a host function that does what the kernel
// does, block by block: find the copy a block belongs to, copy that block's chunk.
#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "gpu/copy_kernel_args.h"
#include "sim_cudart.h"

using CUresult = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;

struct CUmod_st {};
struct CUfunc_st {};

namespace {

constexpr CUresult CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_INVALID_PTX = 218,
                   CUDA_ERROR_INVALID_HANDLE = 400, CUDA_ERROR_NOT_FOUND = 500;
constexpr const char* kEntry = "jhvd_batched_copy";

__attribute__((format(printf, 2, 3))) CUresult fail(CUresult r, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  jhvd_sim_vreport("sim-cuda", fmt, ap);
  va_end(ap);
  return r;
}

std::mutex g_mu;
std::set<CUmodule> g_modules;
CUfunc_st g_kernel;  // the one function a module has

struct Launch {
  JhvdCopies c;
  int device;
};

// Whether the copies fill the launch's blocks in order and lie in device memory of `device`.
bool check_copies(const char* call, const JhvdCopy* copies, unsigned count, unsigned blocks, int device) {
  if (count < 1 || copies[0].first_block != 0) {
    fail(CUDA_ERROR_INVALID_VALUE, "%s: %u copies over %u blocks", call, count, blocks);
    return false;
  }
  for (unsigned i = 0; i < count; ++i) {
    const JhvdCopy& c = copies[i];
    const unsigned long long n = (c.bytes + JHVD_COPY_CHUNK - 1) / JHVD_COPY_CHUNK;
    const unsigned end = i + 1 < count ? copies[i + 1].first_block : blocks;
    if (c.bytes == 0 || end - c.first_block != n) {
      fail(CUDA_ERROR_INVALID_VALUE, "%s: copy %u of %llu bytes has blocks %u to %u", call, i, c.bytes, c.first_block,
           end);
      return false;
    }
    if (!jhvd_sim_in_device_memory(c.src, c.bytes, device) || !jhvd_sim_in_device_memory(c.dst, c.bytes, device)) {
      fail(CUDA_ERROR_INVALID_VALUE, "%s: copy %u (%p to %p, %llu bytes) is not in device memory of cuda:%d", call, i,
           static_cast<const void*>(c.src), static_cast<void*>(c.dst), c.bytes, device);
      return false;
    }
  }
  return true;
}

// What the kernel does for one launch, on the host.
void run_copies(void* arg) {
  std::unique_ptr<Launch> launch(static_cast<Launch*>(arg));
  const JhvdCopies& c = launch->c;
  const JhvdCopy* copies = c.table ? c.table : c.copies;
  if (c.table && !check_copies("jhvd_batched_copy (its table, as the launch runs)", copies, c.count, c.blocks,
                               launch->device))
    return;
  for (unsigned block = 0; block < c.blocks; ++block) {
    unsigned i = c.count - 1;
    while (copies[i].first_block > block) --i;  // the last copy whose first block is at or before this one
    const unsigned long long begin = static_cast<unsigned long long>(block - copies[i].first_block) * JHVD_COPY_CHUNK;
    const unsigned long long left = copies[i].bytes - begin;
    std::memcpy(copies[i].dst + begin, copies[i].src + begin, left < JHVD_COPY_CHUNK ? left : JHVD_COPY_CHUNK);
  }
}

}  // namespace

JHVD_SIM_API CUresult cuInit(unsigned flags) {
  return flags ? fail(CUDA_ERROR_INVALID_VALUE, "cuInit: flags %u", flags) : CUDA_SUCCESS;
}

JHVD_SIM_API CUresult cuGetErrorString(CUresult r, const char** text) {
  switch (r) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
    case CUDA_ERROR_INVALID_PTX: *text = "a PTX JIT compilation failed"; break;
    case CUDA_ERROR_INVALID_HANDLE: *text = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// The current device's context, as the runtime makes it current: one per device, never null.
JHVD_SIM_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  int device = 0;
  cudaGetDevice(&device);
  *ctx = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(device) + 1);
  return CUDA_SUCCESS;
}

JHVD_SIM_API CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  const std::string ptx = static_cast<const char*>(image);
  const std::string param = std::string(kEntry) + "_param_0[" + std::to_string(sizeof(JhvdCopies)) + "]";
  if (ptx.find(std::string(".entry ") + kEntry + "(") == std::string::npos || ptx.find(param) == std::string::npos)
    return fail(CUDA_ERROR_INVALID_PTX, "cuModuleLoadData: not the engine's copy kernel with a %s parameter",
                param.c_str());
  std::lock_guard<std::mutex> g(g_mu);
  *module = new CUmod_st;
  g_modules.insert(*module);
  return CUDA_SUCCESS;
}

JHVD_SIM_API CUresult cuModuleUnload(CUmodule module) {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_modules.erase(module))
    return fail(CUDA_ERROR_INVALID_HANDLE, "cuModuleUnload: %p is not a module", static_cast<void*>(module));
  delete module;
  return CUDA_SUCCESS;
}

JHVD_SIM_API CUresult cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_modules.count(module))
    return fail(CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction: %p is not a module", static_cast<void*>(module));
  if (std::strcmp(name, kEntry) != 0) return fail(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction: no %s", name);
  *fn = &g_kernel;
  return CUDA_SUCCESS;
}

JHVD_SIM_API CUresult cuLaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned shared, cudaStream_t stream, void** params, void** extra) {
  const char* call = "cuLaunchKernel";
  if (fn != &g_kernel) return fail(CUDA_ERROR_INVALID_HANDLE, "%s: %p is not a function", call, static_cast<void*>(fn));
  if (gy != 1 || gz != 1 || bx != JHVD_COPY_THREADS || by != 1 || bz != 1 || shared || !params || !params[0] || extra)
    return fail(CUDA_ERROR_INVALID_VALUE, "%s: grid %ux%ux%u, block %ux%ux%u, %u shared bytes", call, gx, gy, gz, bx,
                by, bz, shared);
  int device = -1;
  if (cudaStreamGetDevice(stream, &device) != cudaSuccess)
    return fail(CUDA_ERROR_INVALID_HANDLE, "%s: %p is not a stream", call, static_cast<void*>(stream));
  // The launch copies its parameter, so the engine may reuse it at once.
  auto launch = std::make_unique<Launch>(Launch{*static_cast<const JhvdCopies*>(params[0]), device});
  const JhvdCopies& c = launch->c;
  if (c.blocks != gx || c.count < 1 || (!c.table && c.count > JHVD_COPY_INLINE))
    return fail(CUDA_ERROR_INVALID_VALUE, "%s: %u copies over %u blocks in a grid of %u", call, c.count, c.blocks, gx);
  if (c.table && !jhvd_sim_in_device_memory(c.table, c.count * sizeof(JhvdCopy), device))
    return fail(CUDA_ERROR_INVALID_VALUE, "%s: a table of %u copies at %p is not in device memory of cuda:%d", call,
                c.count, static_cast<const void*>(c.table), device);
  if (!c.table && !check_copies(call, c.copies, c.count, c.blocks, device)) return CUDA_ERROR_INVALID_VALUE;
  if (cudaLaunchHostFunc(stream, run_copies, launch.get()) != cudaSuccess)
    return fail(CUDA_ERROR_INVALID_HANDLE, "%s: cannot queue on stream %p", call, static_cast<void*>(stream));
  launch.release();  // run_copies owns it now
  return CUDA_SUCCESS;
}
