// The part of the CUDA runtime API the engine calls, declared here so that no CUDA headers
// are needed at build time: one build serves hosts with and without a GPU. The values match
// cuda_runtime_api.h / driver_types.h (stable across CUDA 11, 12 and 13).
#pragma once

#include <cstddef>

namespace hvd::gpu {

using cudaError_t = int;
using cudaStream_t = struct CUstream_st*;
using cudaEvent_t = struct CUevent_st*;

constexpr cudaError_t cudaSuccess = 0;
constexpr cudaError_t cudaErrorNotReady = 600;
constexpr cudaError_t cudaErrorInsufficientDriver = 35;
constexpr cudaError_t cudaErrorNoDevice = 100;

enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

constexpr unsigned cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventDisableTiming = 0x2;

// cudaMemcpyBatchAsync's attributes (driver_types.h, CUDA 12.8+).
constexpr int cudaMemcpySrcAccessOrderStream = 0x1;
constexpr int cudaMemLocationTypeDevice = 1;
struct cudaMemLocation {
  int type;
  int id;
};
struct cudaMemcpyAttributes {
  int srcAccessOrder;
  cudaMemLocation srcLocHint, dstLocHint;
  unsigned flags;
};

// The legacy and per-thread default streams, as the CUDA Array Interface numbers them.
inline cudaStream_t legacy_stream() { return reinterpret_cast<cudaStream_t>(0x1); }
inline cudaStream_t per_thread_stream() { return reinterpret_cast<cudaStream_t>(0x2); }

// cudaMemcpyBatchAsync as CUDA 13 declares it, and as CUDA 12.8 and 12.9 did (with failIdx).
using MemcpyBatch13 = cudaError_t (*)(void* const*, const void* const*, const size_t*, size_t, cudaMemcpyAttributes*,
                                      size_t*, size_t, cudaStream_t);
using MemcpyBatch12 = cudaError_t (*)(void**, void**, size_t*, size_t, cudaMemcpyAttributes*, size_t*, size_t, size_t*,
                                      cudaStream_t);

// Function table filled by dlsym; every entry is required but the batch copy.
struct CudaApi {
  cudaError_t (*cudaRuntimeGetVersion)(int*);
  cudaError_t (*cudaDriverGetVersion)(int*);
  cudaError_t (*cudaGetDeviceCount)(int*);
  const char* (*cudaGetErrorString)(cudaError_t);
  const char* (*cudaGetErrorName)(cudaError_t);
  cudaError_t (*cudaGetLastError)();
  cudaError_t (*cudaGetDevice)(int*);
  cudaError_t (*cudaSetDevice)(int);
  cudaError_t (*cudaDeviceGetPCIBusId)(char*, int, int);
  cudaError_t (*cudaStreamCreateWithFlags)(cudaStream_t*, unsigned);
  cudaError_t (*cudaStreamDestroy)(cudaStream_t);
  cudaError_t (*cudaStreamSynchronize)(cudaStream_t);
  cudaError_t (*cudaStreamWaitEvent)(cudaStream_t, cudaEvent_t, unsigned);
  cudaError_t (*cudaEventCreateWithFlags)(cudaEvent_t*, unsigned);
  cudaError_t (*cudaEventDestroy)(cudaEvent_t);
  cudaError_t (*cudaEventRecord)(cudaEvent_t, cudaStream_t);
  cudaError_t (*cudaEventQuery)(cudaEvent_t);
  cudaError_t (*cudaEventSynchronize)(cudaEvent_t);
  cudaError_t (*cudaEventElapsedTime)(float*, cudaEvent_t, cudaEvent_t);
  cudaError_t (*cudaMalloc)(void**, size_t);
  cudaError_t (*cudaFree)(void*);
  cudaError_t (*cudaMallocHost)(void**, size_t);
  cudaError_t (*cudaFreeHost)(void*);
  cudaError_t (*cudaMemcpyAsync)(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
  // Optional: at most one is set, the form of the loaded runtime's version.
  MemcpyBatch13 cudaMemcpyBatchAsync_13;
  MemcpyBatch12 cudaMemcpyBatchAsync_12;
};

}  // namespace hvd::gpu
