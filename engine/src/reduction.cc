#include "reduction.h"

#include <algorithm>
#include <limits>

#include "half.h"
#include "half_loops.h"

namespace hvd {
namespace {

template <HalfType T, HalfOp Op>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  combine_half(T, Op, static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), *len);
}

// Sums of 8- or 16-bit integers that wrap around, as numpy, torch, NCCL and MPI's scalar loop do. In two's
// complement signed and unsigned integers add alike, so one unsigned (well-defined) addition serves both.
template <typename U>
void wrap_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const U*>(in);
  auto* b = static_cast<U*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<U>(a[i] + b[i]);
}

int op_index(ReduceOp r) {
  switch (r) {
    case ReduceOp::Sum: case ReduceOp::Average: case ReduceOp::Adasum: return 0;  // Adasum: never valid
    case ReduceOp::Min: return 1;
    case ReduceOp::Max: return 2;
    case ReduceOp::Product: return 3;
  }
  return 0;
}

// Integers scale in double and go back toward zero, as Horovod's do; a result out of the type's range
// saturates (the bare conversion is undefined) and NaN becomes 0.
template <typename T>
void scale_integers(void* buf, int64_t n, double f) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());  // 2^63 for int64: not a value
  auto* p = static_cast<T*>(buf);
  for (int64_t i = 0; i < n; ++i) {
    double x = static_cast<double>(p[i]) * f;
    p[i] = x >= hi ? std::numeric_limits<T>::max() : x <= lo ? std::numeric_limits<T>::min()
                                                             : (x == x ? static_cast<T>(x) : T(0));
  }
}

template <typename T>
void divide(void* buf, int64_t count, int n) {
  auto* p = static_cast<T*>(buf);
  for (int64_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / n);
}

}  // namespace

Reductions::Reductions() {
  MPI_User_function* fns[2][4] = {
      {half_op<HalfType::Float16, HalfOp::Sum>, half_op<HalfType::Float16, HalfOp::Min>,
       half_op<HalfType::Float16, HalfOp::Max>, half_op<HalfType::Float16, HalfOp::Product>},
      {half_op<HalfType::BFloat16, HalfOp::Sum>, half_op<HalfType::BFloat16, HalfOp::Min>,
       half_op<HalfType::BFloat16, HalfOp::Max>, half_op<HalfType::BFloat16, HalfOp::Product>}};
  for (int d = 0; d < 2; ++d)
    for (int k = 0; k < 4; ++k) MPI_Op_create(fns[d][k], 1, &half_ops_[d][k]);
  MPI_Op_create(wrap_sum<uint8_t>, 1, &wrap_sum8_);
  MPI_Op_create(wrap_sum<uint16_t>, 1, &wrap_sum16_);
}

Reductions::~Reductions() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& row : half_ops_)
    for (auto& op : row) MPI_Op_free(&op);
  MPI_Op_free(&wrap_sum8_);
  MPI_Op_free(&wrap_sum16_);
}

MPI_Datatype Reductions::type(DataType t) const {
  switch (t) {
    case DataType::UInt8: return MPI_UINT8_T;
    case DataType::Int8: return MPI_INT8_T;
    case DataType::Int16: return MPI_INT16_T;
    case DataType::UInt16: return MPI_UINT16_T;
    case DataType::Int32: return MPI_INT32_T;
    case DataType::Int64: return MPI_INT64_T;
    case DataType::Float16: case DataType::BFloat16: return MPI_UINT16_T;
    case DataType::Float32: return MPI_FLOAT;
    case DataType::Float64: return MPI_DOUBLE;
    case DataType::Bool: return MPI_C_BOOL;
  }
  return MPI_BYTE;
}

MPI_Op Reductions::op(DataType t, ReduceOp r) const {
  if (t == DataType::Float16) return half_ops_[0][op_index(r)];
  if (t == DataType::BFloat16) return half_ops_[1][op_index(r)];
  if (t == DataType::Bool) return (r == ReduceOp::Min || r == ReduceOp::Product) ? MPI_LAND : MPI_LOR;
  const bool sum = r == ReduceOp::Sum || r == ReduceOp::Average;
  if ((t == DataType::UInt8 || t == DataType::Int8) && sum) return wrap_sum8_;
  if ((t == DataType::UInt16 || t == DataType::Int16) && sum) return wrap_sum16_;
  switch (r) {
    case ReduceOp::Sum: case ReduceOp::Average: case ReduceOp::Adasum: return MPI_SUM;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Product: return MPI_PROD;
  }
  return MPI_SUM;
}

namespace {

template <typename T>
T identity(ReduceOp r) {
  using L = std::numeric_limits<T>;
  switch (r) {
    case ReduceOp::Min: return L::has_infinity ? L::infinity() : L::max();
    case ReduceOp::Max: return L::has_infinity ? -L::infinity() : L::lowest();
    case ReduceOp::Product: return T(1);
    default: return T(0);
  }
}

template <typename T>
void fill(void* buf, int64_t n, T v) {
  std::fill_n(static_cast<T*>(buf), n, v);
}

}  // namespace

void fill_identity(DataType t, ReduceOp r, void* buf, int64_t n) {
  switch (t) {
    case DataType::UInt8: fill(buf, n, identity<uint8_t>(r)); break;
    case DataType::Int8: fill(buf, n, identity<int8_t>(r)); break;
    case DataType::Int16: fill(buf, n, identity<int16_t>(r)); break;
    case DataType::UInt16: fill(buf, n, identity<uint16_t>(r)); break;
    case DataType::Int32: fill(buf, n, identity<int32_t>(r)); break;
    case DataType::Int64: fill(buf, n, identity<int64_t>(r)); break;
    case DataType::Float16: fill(buf, n, float_to_half(identity<float>(r))); break;
    case DataType::BFloat16: fill(buf, n, float_to_bf16(identity<float>(r))); break;
    case DataType::Float32: fill(buf, n, identity<float>(r)); break;
    case DataType::Float64: fill(buf, n, identity<double>(r)); break;
    case DataType::Bool: fill(buf, n, static_cast<uint8_t>(r == ReduceOp::Min || r == ReduceOp::Product)); break;
  }
}

void scale_buffer(DataType t, void* buf, int64_t n, double f) {
  if (f == 1.0) return;
  switch (t) {
    case DataType::UInt8: scale_integers<uint8_t>(buf, n, f); break;
    case DataType::Int8: scale_integers<int8_t>(buf, n, f); break;
    case DataType::Int16: scale_integers<int16_t>(buf, n, f); break;
    case DataType::UInt16: scale_integers<uint16_t>(buf, n, f); break;
    case DataType::Int32: scale_integers<int32_t>(buf, n, f); break;
    case DataType::Int64: scale_integers<int64_t>(buf, n, f); break;
    case DataType::Float16: scale_half(HalfType::Float16, static_cast<uint16_t*>(buf), n, float(f)); break;
    case DataType::BFloat16: scale_half(HalfType::BFloat16, static_cast<uint16_t*>(buf), n, float(f)); break;
    case DataType::Float32: {
      auto* p = static_cast<float*>(buf);
      const float ff = static_cast<float>(f);
      for (int64_t i = 0; i < n; ++i) p[i] *= ff;
      break;
    }
    case DataType::Float64: {
      auto* p = static_cast<double*>(buf);
      for (int64_t i = 0; i < n; ++i) p[i] *= f;
      break;
    }
    case DataType::Bool: break;
  }
}

void average_buffer(DataType t, void* buf, int64_t count, int n, double postscale) {
  if (postscale != 1.0) {  // Horovod's factor, postscale / n, in double
    scale_buffer(t, buf, count, postscale / n);
    return;
  }
  const bool pow2 = (n & (n - 1)) == 0;
  switch (t) {
    case DataType::UInt8: divide<uint8_t>(buf, count, n); break;
    case DataType::Int8: divide<int8_t>(buf, count, n); break;
    case DataType::Int16: divide<int16_t>(buf, count, n); break;
    case DataType::UInt16: divide<uint16_t>(buf, count, n); break;
    case DataType::Int32: divide<int32_t>(buf, count, n); break;
    case DataType::Int64: divide<int64_t>(buf, count, n); break;
    // sum / n, rounded once, as numpy's mean; by a power of two, multiplying by 1 / n is that, and faster
    case DataType::Float32: pow2 ? scale_buffer(t, buf, count, 1.0 / n) : divide<float>(buf, count, n); break;
    case DataType::Float64: pow2 ? scale_buffer(t, buf, count, 1.0 / n) : divide<double>(buf, count, n); break;
    default: scale_buffer(t, buf, count, 1.0 / n);
  }
}

}  // namespace hvd
