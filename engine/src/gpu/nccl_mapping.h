// How an engine reduction maps onto NCCL: data type, reduce op, and the premultiplier that
// carries prescale, postscale and an Average's 1/n on the device without custom kernels.
#pragma once

#include <string>
#include <vector>

#include "gpu/nccl_api.h"
#include "types.h"

namespace hvd::gpu {

ncclDataType_t nccl_type(DataType t);

struct NcclReduction {
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  bool pre_mul_sum = false;  // create ncclRedOpCreatePreMulSum(factor) for this call
  double factor = 1.0;
  std::string error;         // non-empty when NCCL cannot do this reduction
};

// The NCCL reduction for `spec` over `n` ranks with NCCL version `version` (ncclGetVersion).
// Sum and Average fold prescale * postscale (/ n) into one premultiplied sum; integer averages
// use ncclAvg (sum, then division toward zero); bool reduces as uint8 max (Sum, Max) or min.
NcclReduction nccl_reduction(const OpSpec& spec, int n, int version);

// Why a reduction of GPU tensors cannot be scaled (empty when it can): NCCL scales only sums, and
// host staging follows the same rule, so a program behaves alike whichever path its ranks take.
std::string scaling_error(const OpSpec& spec);

// `factor` as one element of `t`: the host-immediate scalar of ncclRedOpCreatePreMulSum.
std::vector<char> scalar_bytes(DataType t, double factor);

}  // namespace hvd::gpu
