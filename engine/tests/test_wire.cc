#include <doctest/doctest.h>
#include "half.h"
#include "wire.h"

#include <functional>

using namespace hvd;

TEST_CASE("batch_round_trip") {
  RequestBatch b;
  Request r;
  r.rank = 3;
  r.spec.op = OpType::Alltoall;
  r.spec.dtype = DataType::BFloat16;
  r.shape = {7, 2};
  r.name = "layer.0/weight";
  r.spec.prescale = 0.25;
  r.data = {'a', '\0', 'b'};
  r.refusal = "alltoall: splits [1] must be 2 counts";
  r.group_size = 3;
  r.group = "layer.0/bias";
  b.requests = {r};
  b.cached = {{4, 0, {}}, {9, 1, {'x', 'y'}}};
  auto bytes = encode_batch(b);
  auto d = decode_batch(bytes.data(), bytes.size());
  REQUIRE(d.requests.size() == 1);
  CHECK(d.requests[0].same_signature(r));
  CHECK(d.requests[0].rank == 3);
  CHECK(d.requests[0].data == r.data);
  CHECK(d.requests[0].refusal == r.refusal);
  CHECK(d.requests[0].group_key() == "layer.0/bias");
  CHECK(d.requests[0].group_size == 3);
  CHECK(d.cached == b.cached);
  b.cached = {{4, 1, {}}, {9, 0, {}}};  // out of the order they were submitted in
  auto backwards = encode_batch(b);
  CHECK_THROWS_AS(decode_batch(backwards.data(), backwards.size()), WireError);
  b.cached = {{4, 2, {}}};  // after more full requests than the batch has
  auto past = encode_batch(b);
  CHECK_THROWS_AS(decode_batch(past.data(), past.size()), WireError);
}

TEST_CASE("responses_round_trip_and_truncation_throws") {
  Response x;
  x.kind = Response::Kind::Error;
  x.names = {"a", "b"};
  x.cache_ids = {1, -1};
  x.rows = {3, 0, 5};
  x.error = "bad";
  x.carried = {'1', '2', '3', '4'};
  x.stand_in_counts = {6, 0};
  x.whole_group = true;
  auto bytes = encode_responses({x, x}, {0, 1});
  auto d = decode_responses(bytes.data(), bytes.size());
  REQUIRE(d.size() == 2);
  CHECK(d[1].names[1] == "b");
  CHECK(d[1].error == "bad");
  CHECK(d[1].carried == x.carried);
  CHECK(d[0].cache_ids[1] == -1);
  CHECK(d[1].rows == std::vector<int64_t>{3, 0, 5});
  CHECK(d[1].stand_in_counts == x.stand_in_counts);
  CHECK(d[1].whole_group);
  auto flag = encode_responses({x}, {0});
  flag.back() = 2;  // whole_group, the last byte, is a bool
  CHECK_THROWS_AS(decode_responses(flag.data(), flag.size()), WireError);
  x.stand_in_counts = {6};  // not one per name
  auto odd = encode_responses({x}, {0});
  CHECK_THROWS_AS(decode_responses(odd.data(), odd.size()), std::runtime_error);
  bool threw = false;
  try {
    decode_responses(bytes.data(), bytes.size() / 2);
  } catch (const std::runtime_error&) {
    threw = true;
  }
  CHECK(threw);
}

TEST_CASE("half_and_bfloat16_conversions") {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 1e-4f, 3.140625f}) {
    CHECK((half_to_float(float_to_half(f)) == f || std::abs(half_to_float(float_to_half(f)) - f) < 1e-6f));
  }
  CHECK(half_to_float(float_to_half(1e6f)) > 65504.0f);  // overflows to infinity
  CHECK(bf16_to_float(float_to_bf16(1.5f)) == 1.5f);
  CHECK(bf16_to_float(float_to_bf16(-3.0f)) == -3.0f);
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_bf16(1.0f) == 0x3f80);
}

TEST_CASE("stop_notices_and_timeline_batches_round_trip") {
  StopNotice n{true, Status::Error(Status::Code::Aborted, "rank 2 raised", 2)};
  auto b = encode_stop(n);
  StopNotice d = decode_stop(b.data(), b.size());
  CHECK(d.final);
  CHECK(d.status.code == Status::Code::Aborted);
  CHECK(d.status.origin_rank == 2);
  CHECK(d.status.message == "rank 2 raised");
  Event e;
  e.rank = 1;
  e.phase = Phase::MemcpyOut;
  e.name = "w";
  e.op = "allreduce";
  e.start_us = 5;
  e.dur_us = 7;
  e.bytes = 64;
  auto eb = encode_events({e, e});
  auto es = decode_events(eb.data(), eb.size());
  REQUIRE(es.size() == 2);
  CHECK(es[1].phase == Phase::MemcpyOut);
  CHECK(es[1].name == "w");
  CHECK(es[1].bytes == 64);
}

static bool rejects(const std::function<void()>& decode) {
  try {
    decode();
  } catch (const WireError&) {
    return true;
  }
  return false;
}

TEST_CASE("decoders_reject_out_of_range_values_and_impossible_counts") {
  Request r;
  r.name = "x";
  r.shape = {2};
  RequestBatch b;
  b.requests = {r};
  auto bytes = encode_batch(b);
  auto bad_op = bytes;
  bad_op[4 + sizeof(int32_t)] = 42;  // the first request's op
  CHECK(rejects([&] { decode_batch(bad_op.data(), bad_op.size()); }));
  auto huge = bytes;
  huge[0] = huge[1] = huge[2] = huge[3] = '\xff';  // 4 billion requests in a few bytes
  CHECK(rejects([&] { decode_batch(huge.data(), huge.size()); }));
  auto trailing = bytes;
  trailing.push_back(0);
  CHECK(rejects([&] { decode_batch(trailing.data(), trailing.size()); }));
  Request negative = r;
  negative.shape = {-3};
  b.requests = {negative};
  auto neg = encode_batch(b);
  CHECK(rejects([&] { decode_batch(neg.data(), neg.size()); }));
  Request no_group = r;
  no_group.group_size = -1;
  b.requests = {no_group};
  auto negative_group = encode_batch(b);
  CHECK(rejects([&] { decode_batch(negative_group.data(), negative_group.size()); }));
  auto stop = encode_stop({false, Status::Error(Status::Code::Shutdown, "bye", 0)});
  stop[1] = 0;  // Ok is not a reason to stop
  CHECK(rejects([&] { decode_stop(stop.data(), stop.size()); }));
  Event e;
  auto events = encode_events({e});
  events[4 + sizeof(int32_t)] = 99;  // the phase
  CHECK(rejects([&] { decode_events(events.data(), events.size()); }));
}
