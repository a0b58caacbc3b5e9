// Elementwise loops over float16 and bfloat16 buffers, computed in float32: the reduce ops MPI runs on
// them (it has no such types) and scaling. On x86-64 CPUs with AVX2 and F16C (Haswell and later) they
// run eight elements per instruction; elsewhere one at a time. Both loops give the same bits.
#pragma once

#include <cstdint>

namespace hvd {

enum class HalfType { Float16, BFloat16 };
enum class HalfOp { Sum, Min, Max, Product };  // Min and Max as std::min(in, inout) and std::max(in, inout)

// Whether this CPU runs the vector loops (checked once).
bool half_vector_loops();

// inout[i] = op(in[i], inout[i]) for n elements.
void combine_half(HalfType t, HalfOp op, const uint16_t* in, uint16_t* inout, int64_t n,
                  bool vector = half_vector_loops());
// buf[i] *= factor for n elements.
void scale_half(HalfType t, uint16_t* buf, int64_t n, float factor, bool vector = half_vector_loops());

}  // namespace hvd
