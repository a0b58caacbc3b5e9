#include "gpu/nccl_mapping.h"

#include <cstdint>
#include <cstring>

#include "half.h"

namespace hvd::gpu {
namespace {

constexpr int kAvgVersion = 21000;         // ncclAvg and ncclBfloat16: NCCL 2.10
constexpr int kPreMulSumVersion = 21100;   // ncclRedOpCreatePreMulSum: NCCL 2.11

}  // namespace

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::UInt8: case DataType::Bool: return ncclUint8;
    case DataType::Int8: return ncclInt8;
    case DataType::Int32: return ncclInt32;
    case DataType::Int64: return ncclInt64;
    case DataType::Float16: return ncclFloat16;
    case DataType::BFloat16: return ncclBfloat16;
    case DataType::Float32: return ncclFloat32;
    case DataType::Float64: return ncclFloat64;
    case DataType::Int16: case DataType::UInt16: break;  // NCCL has no 16-bit integers: see nccl_reduction
  }
  return ncclUint8;
}

std::string scaling_error(const OpSpec& spec) {
  const bool reduces = spec.op == OpType::Allreduce || spec.op == OpType::Reducescatter;
  const bool min_max_prod =
      spec.reduce == ReduceOp::Min || spec.reduce == ReduceOp::Max || spec.reduce == ReduceOp::Product;
  if (!reduces || !min_max_prod || spec.prescale * spec.postscale == 1.0) return "";
  return std::string("prescale/postscale factors on GPU tensors need op Sum or Average, not ") +
         reduce_name(spec.reduce);
}

NcclReduction nccl_reduction(const OpSpec& spec, int n, int version) {
  NcclReduction r;
  r.type = nccl_type(spec.dtype);
  const double scale = spec.prescale * spec.postscale;
  if (spec.dtype == DataType::BFloat16 && version < kAvgVersion) {
    r.error = "bfloat16 needs NCCL 2.10 or newer";
    return r;
  }
  if (spec.dtype == DataType::Int16 || spec.dtype == DataType::UInt16) {
    r.error = std::string(dtype_name(spec.dtype)) + " tensors cannot be reduced on the GPU (NCCL has no 16-bit "
              "integer type); reduce them as int32, or on the host";
    return r;
  }
  if (spec.dtype == DataType::Bool) {
    if (spec.reduce == ReduceOp::Average) r.error = "Average is not defined for bool tensors";
    r.op = (spec.reduce == ReduceOp::Sum || spec.reduce == ReduceOp::Max) ? ncclMax : ncclMin;
    return r;
  }
  const bool scaled = scale != 1.0;
  if (scaled && !is_float(spec.dtype)) {
    r.error = "prescale/postscale factors need a floating-point tensor";
    return r;
  }
  switch (spec.reduce) {
    case ReduceOp::Min: r.op = ncclMin; break;
    case ReduceOp::Max: r.op = ncclMax; break;
    case ReduceOp::Product: r.op = ncclProd; break;
    case ReduceOp::Adasum:  // never valid (OpSpec::valid)
    case ReduceOp::Sum:
      r.op = ncclSum;
      r.pre_mul_sum = scaled;
      r.factor = scale;
      break;
    case ReduceOp::Average:
      if (!is_float(spec.dtype)) {
        if (version < kAvgVersion) r.error = "integer Average needs NCCL 2.10 or newer";
        r.op = n == 1 ? ncclSum : ncclAvg;
      } else {
        r.op = ncclSum;
        r.factor = scale / n;
        r.pre_mul_sum = r.factor != 1.0;
      }
      break;
  }
  if (r.error.empty()) r.error = scaling_error(spec);
  if (r.pre_mul_sum && version < kPreMulSumVersion) {
    if (spec.reduce == ReduceOp::Average && scale == 1.0) {
      r.op = ncclAvg;  // the plain 1/n average needs no premultiplier
      r.pre_mul_sum = false;
      r.factor = 1.0;
    } else {
      r.error = "prescale/postscale factors on GPU tensors need NCCL 2.11 or newer";
    }
  }
  return r;
}

std::vector<char> scalar_bytes(DataType t, double factor) {
  std::vector<char> b(dtype_size(t));
  auto put = [&](auto v) { std::memcpy(b.data(), &v, sizeof(v)); };
  switch (t) {
    case DataType::Float16: put(float_to_half(static_cast<float>(factor))); break;
    case DataType::BFloat16: put(float_to_bf16(static_cast<float>(factor))); break;
    case DataType::Float32: put(static_cast<float>(factor)); break;
    case DataType::Float64: put(factor); break;
    case DataType::Int32: put(static_cast<int32_t>(factor)); break;
    case DataType::Int64: put(static_cast<int64_t>(factor)); break;
    case DataType::UInt8: case DataType::Bool: put(static_cast<uint8_t>(factor)); break;
    case DataType::Int8: put(static_cast<int8_t>(factor)); break;
    case DataType::Int16: put(static_cast<int16_t>(factor)); break;
    case DataType::UInt16: put(static_cast<uint16_t>(factor)); break;
  }
  return b;
}

}  // namespace hvd::gpu
