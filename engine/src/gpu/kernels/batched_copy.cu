// Many device-to-device copies in one launch: every block copies one JHVD_COPY_CHUNK of one copy,
// 16 bytes per load where both ends are 16-byte aligned. The engine embeds this kernel as PTX
// (batched_copy.ptx, made by `make gpu-ptx`), which the driver compiles for the GPU at run time.
#include "../copy_kernel_args.h"

// Copy i's first block, from the table in device memory or from the parameter (field by field, so
// the parameter is read where it is and never copied to local memory).
__device__ __forceinline__ unsigned first_block(const JhvdCopies& c, unsigned i) {
  return c.table ? c.table[i].first_block : c.copies[i].first_block;
}

extern "C" __global__ void __launch_bounds__(JHVD_COPY_THREADS) jhvd_batched_copy(const JhvdCopies c) {
  // This block's copy: the last one whose first block is at or before this block.
  unsigned lo = 0, hi = c.count - 1;
  while (lo < hi) {
    const unsigned mid = (lo + hi + 1) / 2;
    if (first_block(c, mid) <= blockIdx.x) lo = mid;
    else hi = mid - 1;
  }
  const char* src = c.table ? c.table[lo].src : c.copies[lo].src;
  char* dst = c.table ? c.table[lo].dst : c.copies[lo].dst;
  const unsigned long long bytes = c.table ? c.table[lo].bytes : c.copies[lo].bytes;
  const unsigned long long begin = (unsigned long long)(blockIdx.x - first_block(c, lo)) * JHVD_COPY_CHUNK;
  const unsigned long long left = bytes - begin;
  const unsigned n = left < JHVD_COPY_CHUNK ? (unsigned)left : JHVD_COPY_CHUNK;
  src += begin;
  dst += begin;
  unsigned done = 0;
  if ((((unsigned long long)src | (unsigned long long)dst) & 15) == 0) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    constexpr unsigned kPerThread = JHVD_COPY_CHUNK / 16 / JHVD_COPY_THREADS;
    if (n == JHVD_COPY_CHUNK) {  // a whole chunk: every load in flight before the first store
      uint4 v[kPerThread];
#pragma unroll
      for (unsigned j = 0; j < kPerThread; ++j) v[j] = s[j * JHVD_COPY_THREADS + threadIdx.x];
#pragma unroll
      for (unsigned j = 0; j < kPerThread; ++j) d[j * JHVD_COPY_THREADS + threadIdx.x] = v[j];
      return;
    }
    for (unsigned k = threadIdx.x; k < n / 16; k += JHVD_COPY_THREADS) d[k] = s[k];
    done = n / 16 * 16;
  }
  for (unsigned k = done + threadIdx.x; k < n; k += JHVD_COPY_THREADS) dst[k] = src[k];
}
