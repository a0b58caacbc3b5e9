// Mapping of engine dtypes and reduce ops onto MPI, plus scaling of buffers in place.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "types.h"

namespace hvd {

// Owns the MPI user ops for float16/bfloat16 and 8-bit integer sums; create after MPI_Init, destroy
// before finalize.
class Reductions {
 public:
  Reductions();
  ~Reductions();
  Reductions(const Reductions&) = delete;
  Reductions& operator=(const Reductions&) = delete;

  MPI_Datatype type(DataType t) const;
  MPI_Op op(DataType t, ReduceOp r) const;

 private:
  MPI_Op half_ops_[2][4];  // [float16, bfloat16][Sum/Average, Min, Max, Product]
  // Sums of 8- and 16-bit integers that wrap around: Open MPI 5's AVX MPI_SUM saturates them in its
  // vector loop (32 elements and more) and wraps the rest, so a result would depend on its size.
  MPI_Op wrap_sum8_, wrap_sum16_;
};

// buf[i] *= factor for `count` elements of `t`: integers in double, truncated toward zero and saturated
// at the type's range; float16 and bfloat16 in float32.
void scale_buffer(DataType t, void* buf, int64_t count, double factor);
// Fills `count` elements of `t` with the identity of `r`: 0 for Sum and Average, the type's largest value
// (or +inf) for Min, its lowest (or -inf) for Max, 1 for Product; for bool, true for Min and Product.
void fill_identity(DataType t, ReduceOp r, void* buf, int64_t count);
// Finishes an Average: float32 and float64 divide by n (Horovod multiplies by float(1/n), a last bit off
// the mean where n is no power of two), halves scale by 1/n, integers divide exactly (toward zero); with a
// postscale, every type scales by postscale/n as Horovod does.
void average_buffer(DataType t, void* buf, int64_t count, int n, double postscale);

}  // namespace hvd
