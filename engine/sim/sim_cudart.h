// The simulated CUDA runtime (sim_cudart.cc) as the simulated NCCL (sim_nccl.cc) sees it: the
// few runtime calls it makes, with the simulator's own types, and one check CUDA has no call for.
// The simulator lets CI run the engine's GPU code path without a GPU, in host memory; it proves
// the engine's logic, not CUDA's behaviour.
#pragma once

#include <cstdarg>
#include <cstddef>

#define JHVD_SIM_API extern "C" __attribute__((visibility("default")))

using cudaError_t = int;
using cudaStream_t = struct CUstream_st*;

constexpr cudaError_t cudaSuccess = 0;

JHVD_SIM_API cudaError_t cudaGetDevice(int* device);
JHVD_SIM_API cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device);
JHVD_SIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, void (*fn)(void*), void* arg);

// Writes "[who] message" as one line on stderr: how the simulator says why it refuses a call.
JHVD_SIM_API void jhvd_sim_vreport(const char* who, const char* fmt, va_list ap);

// Whether [p, p + bytes) lies inside one device allocation (cudaMalloc) of `device`.
JHVD_SIM_API bool jhvd_sim_in_device_memory(const void* p, size_t bytes, int device);
