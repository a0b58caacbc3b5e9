// The few CUDA driver API calls (libcuda.so.1, installed with every NVIDIA driver) that load and
// launch the engine's own kernel, declared here so that no CUDA headers are needed at build time.
// The values match cuda.h.
#pragma once

#include "gpu/cuda_api.h"

namespace hvd::gpu {

using CUresult = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;

constexpr CUresult CUDA_SUCCESS = 0;

struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             cudaStream_t, void**, void**);
};

}  // namespace hvd::gpu
