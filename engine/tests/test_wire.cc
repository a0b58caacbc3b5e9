#include "check.h"
#include "half.h"
#include "wire.h"

using namespace hvd;

TEST(batch_round_trip) {
  RequestBatch b;
  Request r;
  r.rank = 3;
  r.spec.op = OpType::Alltoall;
  r.spec.dtype = DataType::BFloat16;
  r.shape = {7, 2};
  r.name = "layer.0/weight";
  r.spec.prescale = 0.25;
  b.requests = {r};
  b.cached = {4, 9};
  auto bytes = encode_batch(b);
  auto d = decode_batch(bytes.data(), bytes.size());
  CHECK(d.requests.size() == 1 && d.requests[0].same_signature(r) && d.requests[0].rank == 3);
  CHECK((d.cached == std::vector<int32_t>{4, 9}));
}

TEST(responses_round_trip_and_truncation_throws) {
  Response x;
  x.kind = Response::Kind::Error;
  x.names = {"a", "b"};
  x.cache_ids = {1, -1};
  x.rows = {3, 0, 5};
  x.error = "bad";
  auto bytes = encode_responses({x, x});
  auto d = decode_responses(bytes.data(), bytes.size());
  CHECK(d.size() == 2 && d[1].names[1] == "b" && d[1].error == "bad" && d[0].cache_ids[1] == -1);
  CHECK((d[1].rows == std::vector<int64_t>{3, 0, 5}));
  bool threw = false;
  try {
    decode_responses(bytes.data(), bytes.size() / 2);
  } catch (const std::runtime_error&) {
    threw = true;
  }
  CHECK(threw);
}

TEST(half_and_bfloat16_conversions) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 1e-4f, 3.140625f}) {
    CHECK(half_to_float(float_to_half(f)) == f || std::abs(half_to_float(float_to_half(f)) - f) < 1e-6f);
  }
  CHECK(half_to_float(float_to_half(1e6f)) > 65504.0f);  // overflows to infinity
  CHECK(bf16_to_float(float_to_bf16(1.5f)) == 1.5f && bf16_to_float(float_to_bf16(-3.0f)) == -3.0f);
  CHECK(float_to_half(1.0f) == 0x3c00 && float_to_bf16(1.0f) == 0x3f80);
}
