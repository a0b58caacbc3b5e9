#include "half_loops.h"

#include <algorithm>

#include "half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define JHVD_HALF_VECTORS 1
#define JHVD_VECTOR __attribute__((target("avx2,f16c")))
#endif

namespace hvd {
namespace {

template <HalfOp Op>
float apply(float x, float y) {
  switch (Op) {
    case HalfOp::Sum: return x + y;
    case HalfOp::Min: return std::min(x, y);
    case HalfOp::Max: return std::max(x, y);
    case HalfOp::Product: return x * y;
  }
  return x;
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float), HalfOp Op>
void combine_scalar(const uint16_t* a, uint16_t* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) b[i] = FromF(apply<Op>(ToF(a[i]), ToF(b[i])));
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void scale_scalar(uint16_t* p, int64_t n, float f) {
  for (int64_t i = 0; i < n; ++i) p[i] = FromF(ToF(p[i]) * f);
}

#ifdef JHVD_HALF_VECTORS
// Eight values widened to float32 and narrowed back, rounding to nearest even as half.h does.
struct Float16Lanes {
  JHVD_VECTOR static __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  JHVD_VECTOR static void store(uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
};

struct BFloat16Lanes {
  JHVD_VECTOR static __m256 load(const uint16_t* p) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // float_to_bf16 on each lane: add 0x7fff plus the kept part's lowest bit, keep the top half; a NaN
  // keeps its top half with the quiet bit set.
  JHVD_VECTOR static void store(uint16_t* p, __m256 v) {
    __m256i bits = _mm256_castps_si256(v), top = _mm256_srli_epi32(bits, 16);
    __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(top, _mm256_set1_epi32(1)));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
    __m256i nan = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
    __m256i r = _mm256_blendv_epi8(rounded, nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);  // lanes 0-3, 4-7 in order
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
};

// The operands in the order that gives std::min/std::max's results, NaNs included: _mm256_min_ps(a, b)
// is a < b ? a : b, as std::min(x, y) is y < x ? y : x.
template <HalfOp Op>
JHVD_VECTOR __m256 apply_lanes(__m256 x, __m256 y) {
  switch (Op) {
    case HalfOp::Sum: return _mm256_add_ps(x, y);
    case HalfOp::Min: return _mm256_min_ps(y, x);
    case HalfOp::Max: return _mm256_max_ps(y, x);
    case HalfOp::Product: return _mm256_mul_ps(x, y);
  }
  return x;
}

template <class Lanes, HalfOp Op>
JHVD_VECTOR int64_t combine_lanes(const uint16_t* a, uint16_t* b, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Lanes::store(b + i, apply_lanes<Op>(Lanes::load(a + i), Lanes::load(b + i)));
  return i;
}

template <class Lanes>
JHVD_VECTOR int64_t scale_lanes(uint16_t* p, int64_t n, float f) {
  const __m256 factor = _mm256_set1_ps(f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Lanes::store(p + i, _mm256_mul_ps(Lanes::load(p + i), factor));
  return i;
}
#endif

template <HalfOp Op>
void combine(HalfType t, const uint16_t* a, uint16_t* b, int64_t n, bool vector) {
  int64_t done = 0;  // elements the vector loop did; the rest go one at a time
#ifdef JHVD_HALF_VECTORS
  if (vector && half_vector_loops())
    done = t == HalfType::Float16 ? combine_lanes<Float16Lanes, Op>(a, b, n)
                                  : combine_lanes<BFloat16Lanes, Op>(a, b, n);
#endif
  if (t == HalfType::Float16) combine_scalar<half_to_float, float_to_half, Op>(a + done, b + done, n - done);
  else combine_scalar<bf16_to_float, float_to_bf16, Op>(a + done, b + done, n - done);
}

}  // namespace

bool half_vector_loops() {
#ifdef JHVD_HALF_VECTORS
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

void combine_half(HalfType t, HalfOp op, const uint16_t* in, uint16_t* inout, int64_t n, bool vector) {
  switch (op) {
    case HalfOp::Sum: combine<HalfOp::Sum>(t, in, inout, n, vector); break;
    case HalfOp::Min: combine<HalfOp::Min>(t, in, inout, n, vector); break;
    case HalfOp::Max: combine<HalfOp::Max>(t, in, inout, n, vector); break;
    case HalfOp::Product: combine<HalfOp::Product>(t, in, inout, n, vector); break;
  }
}

void scale_half(HalfType t, uint16_t* buf, int64_t n, float factor, bool vector) {
  int64_t done = 0;
#ifdef JHVD_HALF_VECTORS
  if (vector && half_vector_loops())
    done = t == HalfType::Float16 ? scale_lanes<Float16Lanes>(buf, n, factor)
                                  : scale_lanes<BFloat16Lanes>(buf, n, factor);
#endif
  if (t == HalfType::Float16) scale_scalar<half_to_float, float_to_half>(buf + done, n - done, factor);
  else scale_scalar<bf16_to_float, float_to_bf16>(buf + done, n - done, factor);
}

}  // namespace hvd
