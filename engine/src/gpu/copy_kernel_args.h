// The argument of the batched device-to-device copy kernel, shared by its CUDA source
// (kernels/batched_copy.cu) and the engine that launches it (copy_kernel.cc). It is passed by
// value, so it stays under the 4 KiB limit on a kernel's parameters.
#pragma once

#define JHVD_COPY_MAX 120       // copies per launch
#define JHVD_COPY_CHUNK 65536   // bytes one block copies
#define JHVD_COPY_THREADS 256   // threads per block

struct JhvdCopies {
  const char* src[JHVD_COPY_MAX];
  char* dst[JHVD_COPY_MAX];
  unsigned long long bytes[JHVD_COPY_MAX];
  unsigned int first_block[JHVD_COPY_MAX + 1];  // the first block of copy i; [count] is the grid's size
  unsigned int count;
};
