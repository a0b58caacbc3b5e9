// The argument of the batched device-to-device copy kernel, shared by its CUDA source
// (kernels/batched_copy.cu) and the engine that launches it (copy_kernel.cc). It is passed by
// value, so it stays under the 4 KiB limit on a kernel's parameters: up to JHVD_COPY_INLINE copies
// travel in it; a launch of more copies passes a table of them in device memory instead, so that
// any number of copies is one launch (on an H200, three launches for 256 copies of 256 KiB moved
// 74% of a plain copy's bytes per second, one launch 90%).
#pragma once

#define JHVD_COPY_INLINE 120  // copies the parameter itself holds
#define JHVD_COPY_CHUNK 8192  // bytes one block copies
#define JHVD_COPY_THREADS 128 // threads per block

struct JhvdCopy {
  const char* src;
  char* dst;
  unsigned long long bytes;
  unsigned int first_block;  // the grid's first block for this copy; blocks run in the copies' order
};

struct JhvdCopies {
  const JhvdCopy* table;  // device memory with `count` copies, or null: they are in `copies`
  unsigned int count;
  unsigned int blocks;    // the grid's size
  JhvdCopy copies[JHVD_COPY_INLINE];
};
