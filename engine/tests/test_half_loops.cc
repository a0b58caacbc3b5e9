#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "half.h"
#include "half_loops.h"

using namespace hvd;

namespace {

const HalfType kTypes[] = {HalfType::Float16, HalfType::BFloat16};
const HalfOp kOps[] = {HalfOp::Sum, HalfOp::Min, HalfOp::Max, HalfOp::Product};

bool is_nan(HalfType t, uint16_t h) {
  return std::isnan(t == HalfType::Float16 ? half_to_float(h) : bf16_to_float(h));
}

// The vector loop's result must be the scalar loop's, bit for bit; a NaN may differ in its payload (the
// compiler may swap a scalar sum's operands, and with them which NaN is kept).
void check_same(HalfType t, const std::vector<uint16_t>& scalar, const std::vector<uint16_t>& vector,
                const std::string& what) {
  for (size_t i = 0; i < scalar.size(); ++i) {
    if (scalar[i] == vector[i] || (is_nan(t, scalar[i]) && is_nan(t, vector[i]))) continue;
    char bits[64];
    std::snprintf(bits, sizeof bits, ": scalar 0x%04x, vector 0x%04x", scalar[i], vector[i]);
    FAIL(what << " element " << i << bits);
  }
}

// Values from every class: zeros, subnormals, normals, the largest, infinities, NaNs; plus random bits.
std::vector<uint16_t> values(std::mt19937& rng, size_t n) {
  const uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x3c00, 0xbc00, 0x7bff, 0xfbff, 0x7c00,
                              0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x0080, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x3f80};
  std::vector<uint16_t> v(n);
  for (auto& x : v)
    x = rng() % 4 == 0 ? special[rng() % (sizeof special / sizeof special[0])] : static_cast<uint16_t>(rng());
  return v;
}

}  // namespace

TEST_CASE("half_vector_loops_give_the_scalar_loops_bits_for_every_value_pair") {
  if (!half_vector_loops()) {
    MESSAGE("this CPU has no AVX2 and F16C: only the scalar loops run");
    return;
  }
  // Every 16-bit pattern against a spread of others, for each type and op (65,536 x 24 x 8 results).
  std::vector<uint16_t> every(65536);
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<uint16_t>(i);
  std::mt19937 rng(7);
  for (HalfType t : kTypes)
    for (HalfOp op : kOps)
      for (int round = 0; round < 24; ++round) {
        std::vector<uint16_t> other = values(rng, every.size()), scalar = other, vector = other;
        combine_half(t, op, every.data(), scalar.data(), static_cast<int64_t>(every.size()), false);
        combine_half(t, op, every.data(), vector.data(), static_cast<int64_t>(every.size()), true);
        check_same(t, scalar, vector, "combine type " + std::to_string(int(t)) + " op " + std::to_string(int(op)));
      }
}

TEST_CASE("half_loops_seeded_lengths_tails_and_scaling_match") {
  // Replay one case with JHVD_HALF_SEED=<seed>.
  const char* env = std::getenv("JHVD_HALF_SEED");
  const unsigned first = env ? static_cast<unsigned>(std::atoi(env)) : 1, last = env ? first : 200;
  for (unsigned seed = first; seed <= last; ++seed) {
    std::mt19937 rng(seed);
    const HalfType t = kTypes[rng() % 2];
    const HalfOp op = kOps[rng() % 4];
    const size_t n = rng() % 3 == 0 ? rng() % 17 : rng() % 5000;  // lengths around the 8-lane step too
    const size_t offset = rng() % 8;  // unaligned starts
    std::vector<uint16_t> in = values(rng, n + offset), out = values(rng, n + offset);
    std::vector<uint16_t> scalar = out, vector = out;
    combine_half(t, op, in.data() + offset, scalar.data() + offset, static_cast<int64_t>(n), false);
    combine_half(t, op, in.data() + offset, vector.data() + offset, static_cast<int64_t>(n), true);
    check_same(t, scalar, vector, "seed " + std::to_string(seed) + " combine");
    const float factors[] = {0.5f, 1.0f / 3, -2.0f, 1e-3f, 7e4f, 0.0f};
    const float f = factors[rng() % 6];
    scale_half(t, scalar.data() + offset, static_cast<int64_t>(n), f, false);
    scale_half(t, vector.data() + offset, static_cast<int64_t>(n), f, true);
    check_same(t, scalar, vector, "seed " + std::to_string(seed) + " scale by " + std::to_string(f));
  }
}

TEST_CASE("half_loops_compute_in_float32_and_round_to_nearest_even") {
  for (bool vector : {false, true}) {
    std::vector<uint16_t> a(9, float_to_half(1.0f)), b(9, float_to_half(2048.0f));
    combine_half(HalfType::Float16, HalfOp::Sum, a.data(), b.data(), 9, vector);  // 2049: a tie, to even
    for (uint16_t x : b) CHECK(half_to_float(x) == 2048.0f);
    std::vector<uint16_t> c(9, float_to_bf16(3.0f));
    scale_half(HalfType::BFloat16, c.data(), 9, 0.5f, vector);
    for (uint16_t x : c) CHECK(bf16_to_float(x) == 1.5f);
    std::vector<uint16_t> lo(9, float_to_half(-1.0f)), hi(9, float_to_half(5.0f));
    combine_half(HalfType::Float16, HalfOp::Min, lo.data(), hi.data(), 9, vector);
    for (uint16_t x : hi) CHECK(half_to_float(x) == -1.0f);
  }
}
