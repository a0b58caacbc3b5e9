// Compiled, never run, by tests/test_gpu_runtime.py against the headers of the nvidia-cuda-runtime
// and nvidia-nccl wheels: every CUDA runtime, CUDA driver and NCCL call that engine/src/gpu declares by hand
// (so that no CUDA is needed to build) must take the arguments the real headers declare, in
// number and size, and the structs it passes must have the real layout. calls.inc, written by
// the test, lists the calls of the engine's tables: SAME(CudaApi, name), SAME(DriverApi, name) and
// SAME(NcclApi, name).
#include <cstddef>

#include "gpu/cuda_api.h"  // before the real headers, which #define some of the names it declares
#include "gpu/driver_api.h"
#include "gpu/nccl_api.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

namespace {

template <typename F>
struct Sig;
template <typename R, typename... A>
struct Sig<R (*)(A...)> {
  static constexpr size_t arity = sizeof...(A);
  static constexpr size_t sizes[] = {sizeof(R), sizeof(A)...};
};

template <typename Ours, typename Real>
constexpr bool same_abi() {
  if (Sig<Ours>::arity != Sig<Real>::arity) return false;
  for (size_t i = 0; i <= Sig<Ours>::arity; ++i)
    if (Sig<Ours>::sizes[i] != Sig<Real>::sizes[i]) return false;
  return true;
}

namespace ours = hvd::gpu;

static_assert(sizeof(ours::ncclUniqueId) == sizeof(::ncclUniqueId));
static_assert(ours::CUDA_SUCCESS == ::CUDA_SUCCESS);
static_assert(sizeof(ours::cudaMemLocation) == sizeof(::cudaMemLocation));
static_assert(sizeof(ours::cudaMemcpyAttributes) == sizeof(::cudaMemcpyAttributes));
static_assert(offsetof(ours::cudaMemcpyAttributes, srcLocHint) == offsetof(::cudaMemcpyAttributes, srcLocHint));
static_assert(offsetof(ours::cudaMemcpyAttributes, dstLocHint) == offsetof(::cudaMemcpyAttributes, dstLocHint));
static_assert(offsetof(ours::cudaMemcpyAttributes, flags) == offsetof(::cudaMemcpyAttributes, flags));
#if CUDART_VERSION >= 13000
static_assert(same_abi<ours::MemcpyBatch13, decltype(&::cudaMemcpyBatchAsync)>(), "cudaMemcpyBatchAsync");
#elif CUDART_VERSION >= 12080
static_assert(same_abi<ours::MemcpyBatch12, decltype(&::cudaMemcpyBatchAsync)>(), "cudaMemcpyBatchAsync");
#endif

#define SAME(table, name) \
  static_assert(same_abi<decltype(ours::table{}.name), decltype(&::name)>(), #table ": " #name);
#include "calls.inc"

}  // namespace
