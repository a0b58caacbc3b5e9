// The part of the NCCL API the engine calls, declared here (no nccl.h at build time). Values
// match nccl.h of NCCL 2.x; ncclRedOpCreatePreMulSum needs 2.11+, ncclSend/ncclRecv 2.7+.
#pragma once

#include <cstddef>

#include "gpu/cuda_api.h"

namespace hvd::gpu {

using ncclResult_t = int;
using ncclComm_t = struct ncclComm*;
using ncclDataType_t = int;
using ncclRedOp_t = int;

constexpr ncclResult_t ncclSuccess = 0;
constexpr ncclResult_t ncclInProgress = 7;

constexpr ncclDataType_t ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4,
                         ncclUint64 = 5, ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8,
                         ncclBfloat16 = 9;
constexpr ncclRedOp_t ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4;
constexpr int ncclScalarHostImmediate = 1;

struct ncclUniqueId {
  char internal[128];
};

// Function table filled by dlsym; the optional entries are null on NCCL versions without them.
struct NcclApi {
  ncclResult_t (*ncclGetVersion)(int*);
  const char* (*ncclGetErrorString)(ncclResult_t);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*);
  ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*ncclCommDestroy)(ncclComm_t);
  ncclResult_t (*ncclCommAbort)(ncclComm_t);
  ncclResult_t (*ncclAllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*ncclBroadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*ncclAllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*ncclReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                    cudaStream_t);
  ncclResult_t (*ncclGroupStart)();
  ncclResult_t (*ncclGroupEnd)();
  // Optional.
  ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t*);
  ncclResult_t (*ncclSend)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*ncclRecv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*ncclRedOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, int, ncclComm_t);
  ncclResult_t (*ncclRedOpDestroy)(ncclRedOp_t, ncclComm_t);
};

}  // namespace hvd::gpu
