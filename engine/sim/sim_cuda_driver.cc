// A simulated CUDA driver (libjhvd_sim_cuda.so) for the simulated runtime of sim_cudart.cc, with the
// driver calls the engine makes to load and launch its batched copy kernel. It lets CI run that path
// without a GPU (JUPYTER_HVD_CUDA_DRIVER_LIB names it); it proves the engine's launches, not the
// kernel's CUDA code, which only a real GPU runs.
//
// The only module it loads is the engine's kernel (its PTX must declare the parameter the engine
// passes), and a launch is checked at once: the launch shape, each copy's blocks, every byte inside
// device memory of the stream's device. It then runs on the stream as a host function that does what
// the kernel does, block by block: find the copy a block belongs to, copy that block's chunk.
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

// What the kernel does for one launch, on the host.
void run_copies(void* arg) {
  std::unique_ptr<JhvdCopies> c(static_cast<JhvdCopies*>(arg));
  for (unsigned block = 0; block < c->first_block[c->count]; ++block) {
    unsigned i = c->count - 1;
    while (c->first_block[i] > block) --i;  // the last copy whose first block is at or before this one
    const unsigned long long begin = static_cast<unsigned long long>(block - c->first_block[i]) * JHVD_COPY_CHUNK;
    const unsigned long long left = c->bytes[i] - begin;
    std::memcpy(c->dst[i] + begin, c->src[i] + begin, left < JHVD_COPY_CHUNK ? left : JHVD_COPY_CHUNK);
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
  auto c = std::make_unique<JhvdCopies>(*static_cast<const JhvdCopies*>(params[0]));  // the launch copies it too
  if (c->count < 1 || c->count > JHVD_COPY_MAX || c->first_block[0] != 0 || c->first_block[c->count] != gx)
    return fail(CUDA_ERROR_INVALID_VALUE, "%s: %u copies over %u blocks", call, c->count, gx);
  for (unsigned i = 0; i < c->count; ++i) {
    const unsigned long long blocks = (c->bytes[i] + JHVD_COPY_CHUNK - 1) / JHVD_COPY_CHUNK;
    if (c->bytes[i] == 0 || c->first_block[i + 1] - c->first_block[i] != blocks)
      return fail(CUDA_ERROR_INVALID_VALUE, "%s: copy %u of %llu bytes has blocks %u to %u", call, i, c->bytes[i],
                  c->first_block[i], c->first_block[i + 1]);
    if (!jhvd_sim_in_device_memory(c->src[i], c->bytes[i], device) ||
        !jhvd_sim_in_device_memory(c->dst[i], c->bytes[i], device))
      return fail(CUDA_ERROR_INVALID_VALUE, "%s: copy %u (%p to %p, %llu bytes) is not in device memory of cuda:%d",
                  call, i, static_cast<const void*>(c->src[i]), static_cast<void*>(c->dst[i]), c->bytes[i], device);
  }
  if (cudaLaunchHostFunc(stream, run_copies, c.get()) != cudaSuccess)
    return fail(CUDA_ERROR_INVALID_HANDLE, "%s: cannot queue on stream %p", call, static_cast<void*>(stream));
  c.release();  // run_copies owns it now
  return CUDA_SUCCESS;
}
