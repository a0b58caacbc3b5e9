// Stands in for the compiler's crt/host_defines.h, which the runtime wheels' headers include:
// the qualifiers those headers put on declarations, all empty or plain for host code.
#pragma once
#define __host__
#define __device__
#define __device_builtin__
#define __cudart_builtin__
#define CUDARTAPI
#define CUDART_CB
#define __dv(v) = v
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __location__(a)
#define __forceinline__ inline
#define __inline__ inline
