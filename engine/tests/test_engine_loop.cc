// The engine's loop, negotiation, stop protocol and stall check, on several engines in one process
// (in_process_job.h): no MPI.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "in_process_job.h"
#include "wire.h"

using namespace hvd;
using namespace hvd::testing;

namespace {

Config quick_config() {
  Config c;
  c.spin_us = 0;
  c.stall_check = false;
  return c;
}

bool has_event(Engine& engine, Phase phase, const std::string& text) {
  uint64_t dropped = 0;
  for (const Event& e : engine.drain_events(0, 1 << 16, &dropped))
    if (e.phase == phase && e.name.find(text) != std::string::npos) return true;
  return false;
}

// `name` allreduced in process set `set` by ranks `a` (input 1) and `b` (input 3), two floats each, `b`
// enqueueing first; whether both succeed with 4.
bool pair_allreduce(InProcessJob& job, int a, int b, const std::string& name, int32_t set) {
  std::vector<float> xa(2, 1.0f), xb(2, 3.0f), oa, ob;
  TensorEntry ea = allreduce(name, xa, &oa), eb = allreduce(name, xb, &ob);
  ea.request.spec.process_set = eb.request.spec.process_set = set;
  auto hb = job[b].enqueue(std::move(eb));
  auto ha = job[a].enqueue(std::move(ea));
  const bool ok = finish(ha).ok() && finish(hb).ok();
  return ok && oa == std::vector<float>(2, 4.0f) && ob == oa;
}

}  // namespace

TEST_CASE("ops submitted in different orders on different ranks negotiate to the same responses") {
  const int n = 3;
  InProcessJob job(n, quick_config());
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  std::vector<std::vector<float>> outs(n * names.size());
  std::vector<std::vector<float>> ins(n * names.size());
  std::vector<std::shared_ptr<Handle>> handles(n * names.size());
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < n; ++rank)
    ranks.emplace_back([&, rank] {
      std::vector<size_t> order(names.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::rotate(order.begin(), order.begin() + 2 * rank, order.end());  // each rank its own order
      if (rank == 1) std::reverse(order.begin(), order.end());
      for (size_t i : order) {
        const size_t k = rank * names.size() + i;
        ins[k].assign(i + 1, static_cast<float>(rank + 1));
        handles[k] = job[rank].enqueue(allreduce(names[i], ins[k], &outs[k]));
      }
    });
  for (auto& t : ranks) t.join();
  for (size_t k = 0; k < handles.size(); ++k) {
    Status s = finish(handles[k]);
    CHECK_MESSAGE(s.ok(), s.message);
    CHECK(outs[k] == std::vector<float>(k % names.size() + 1, 6.0f));  // 1 + 2 + 3
  }
  const auto ran = job.data_plane(0).ran();
  size_t tensors = 0;
  for (const auto& r : ran) tensors += r.size();
  CHECK(tensors == names.size());
  for (int rank = 1; rank < n; ++rank) CHECK(job.data_plane(rank).ran() == ran);
  CHECK(job[0].metrics().responses == static_cast<int64_t>(ran.size()));
}

TEST_CASE("names that repeat take the response cache and still agree") {
  InProcessJob job(2, quick_config());
  for (int step = 0; step < 5; ++step) {
    std::vector<float> x0(4, 1.0f), x1(4, 2.0f), o0, o1;
    auto h1 = job[1].enqueue(allreduce("w", x1, &o1));
    auto h0 = job[0].enqueue(allreduce("w", x0, &o0));
    CHECK(finish(h0).ok());
    CHECK(finish(h1).ok());
    CHECK(o0 == std::vector<float>(4, 3.0f));
    CHECK(o1 == o0);
  }
  CHECK(job[1].metrics().cached_requests >= 1);
}

TEST_CASE("a rank's cached and new requests are negotiated in the order it submitted them") {
  // A worker sends repeats by cache id and new names in full, in one batch when its engine thread takes
  // both at once; the coordinator took the new ones first, so a barrier (new) was ready, and returned,
  // before the cached allreduces submitted before it had run.
  Config config = quick_config();
  config.carry_bytes = 0;  // every response through the data plane, which records them
  InProcessJob job(2, config);
  const std::vector<float> ones(2, 1.0f);
  std::vector<float> x[2] = {ones, ones}, w[2] = {ones, ones}, o[4];
  // A group of "w" and `second` on each rank, submitted together, so they reach the coordinator in one batch.
  auto group = [&](int rank, const std::string& second) {
    std::vector<TensorEntry> both;
    both.push_back(allreduce("w", w[rank], &o[2 * rank]));
    both.push_back(allreduce(second, x[rank], &o[2 * rank + 1]));
    both.back().request.spec.reduce = ReduceOp::Max;  // not fused with "w"
    return job[rank].enqueue(std::move(both));
  };
  for (const std::string second : {"y0", "y1", "y2"})
    for (const auto& h : {group(0, second), group(1, second)}) CHECK((finish(h[0]).ok() && finish(h[1]).ok()));
  REQUIRE(job[1].metrics().cached_requests >= 1);  // "w" goes by cache id now, a new second name in full
  auto h0 = group(0, "x");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0's requests are in: rank 1's complete both
  auto hs = group(1, "x");
  for (const auto& h : {h0[0], h0[1], hs[0], hs[1]}) CHECK(finish(h).ok());
  const auto ran = job.data_plane(1).ran();
  REQUIRE(ran.size() >= 2);
  CHECK(ran[ran.size() - 2] == std::vector<std::string>{"w"});
  CHECK(ran.back() == std::vector<std::string>{"x"});
}

TEST_CASE("removed process sets leave the response cache to the names that come after them") {
  // Set ids are never reused: each removed set's entries would otherwise hold their room for good.
  Config config = quick_config();
  config.cache_capacity = 2;
  InProcessJob job(2, config);
  // `name` reduced `times` times on set `set` by both ranks; how many of rank 1's requests were by cache id.
  auto reduce = [&job](const std::string& name, int32_t set, int times) {
    const int64_t before = job[1].metrics().cached_requests;
    for (int i = 0; i < times; ++i) CHECK(pair_allreduce(job, 0, 1, name, set));
    return job[1].metrics().cached_requests - before;
  };
  for (int cycle = 0; cycle < 4; ++cycle) {
    int32_t id = 0;
    for (int rank = 0; rank < 2; ++rank) id = job[rank].add_process_set({0, 1});
    CHECK(reduce("in_set", id, 3) == 1);  // cached from the name's third time
    for (int rank = 0; rank < 2; ++rank) job[rank].remove_process_set(id);
  }
  CHECK(reduce("global", 0, 4) == 2);
}

TEST_CASE("a mismatch between ranks is an error on every rank") {
  InProcessJob job(3, quick_config());
  std::vector<float> small(4, 1.0f), large(5, 1.0f), o0, o1, o2;
  auto h0 = job[0].enqueue(allreduce("t", small, &o0));
  auto h1 = job[1].enqueue(allreduce("t", large, &o1));
  auto h2 = job[2].enqueue(allreduce("t", small, &o2));
  for (const auto& h : {h0, h1, h2}) {
    Status s = finish(h);
    CHECK(s.code == Status::Code::Mismatch);
    CHECK_MESSAGE(s.message.find("'t'") != std::string::npos, s.message);
  }
  // The engines run on: a later op succeeds everywhere.
  auto g0 = job[0].enqueue(allreduce("u", small, &o0));
  auto g1 = job[1].enqueue(allreduce("u", small, &o1));
  auto g2 = job[2].enqueue(allreduce("u", small, &o2));
  CHECK(finish(g0).ok());
  CHECK(finish(g1).ok());
  CHECK(finish(g2).ok());
  CHECK(o2 == std::vector<float>(4, 3.0f));
}

TEST_CASE("a grouped op whose tensors differ in number across ranks fails every tensor on every rank") {
  InProcessJob job(3, quick_config());
  std::vector<float> in[3][3], out[3][3];
  // Each rank's group of `sizes[rank]` allreduces g.0, g.1, ...
  auto call = [&](std::vector<int> sizes) {
    std::vector<std::vector<std::shared_ptr<Handle>>> handles;
    for (int rank = 0; rank < 3; ++rank) {
      std::vector<TensorEntry> group;
      for (int i = 0; i < sizes[rank]; ++i) {
        in[rank][i].assign(4, 1.0f);
        group.push_back(allreduce("g." + std::to_string(i), in[rank][i], &out[rank][i]));
      }
      handles.push_back(job[rank].enqueue(std::move(group)));
    }
    return handles;
  };
  for (int round = 0; round < 3; ++round)  // the group's tensors go by cache id from the second time
    for (const auto& handles : call({2, 2, 2}))
      for (const auto& h : handles) CHECK(finish(h).ok());
  CHECK(job[1].metrics().cached_requests >= 2);
  for (const auto& handles : call({3, 2, 3}))
    for (const auto& h : handles) {
      Status s = finish(h);
      CHECK(s.code == Status::Code::Mismatch);
      CHECK_MESSAGE(s.message.find("mismatched groups") != std::string::npos, s.message);
    }
  // Nothing of the failed calls is left behind: the same names, called alike, run.
  for (const auto& handles : call({2, 2, 2}))
    for (const auto& h : handles) CHECK(finish(h).ok());
  CHECK(out[1][1] == std::vector<float>(4, 3.0f));
}

TEST_CASE("a rank that refuses its own call fails the members' operation of that name, cached or not") {
  InProcessJob job(3, quick_config());
  std::vector<float> x(1, 1.0f), o0, o1, o2;
  // A scalar Sum of float32: the signature of what Engine::refuse sends (OpSpec{} and no shape), which must
  // still not go as the cached request of the name's earlier successes.
  auto scalar = [](const std::string& name, const std::vector<float>& in, std::vector<float>* out) {
    TensorEntry e = allreduce(name, in, out);
    e.request.shape = {};
    return e;
  };
  for (int round = 0; round < 3; ++round) {
    auto h0 = job[0].enqueue(scalar("m", x, &o0));
    auto h1 = job[1].enqueue(scalar("m", x, &o1));
    auto h2 = job[2].enqueue(scalar("m", x, &o2));
    CHECK(finish(h0).ok());
    CHECK(finish(h1).ok());
    CHECK(finish(h2).ok());
    auto told = job[1].refuse(OpSpec{}, {"m"}, "allreduce: unsupported dtype object");
    REQUIRE(told.size() == 1);
    auto g0 = job[0].enqueue(scalar("m", x, &o0));
    auto g2 = job[2].enqueue(scalar("m", x, &o2));
    for (const auto& h : {g0, g2, told[0]}) {
      Status s = finish(h);
      CHECK(s.code == Status::Code::Refused);
      CHECK_MESSAGE(s.message == "allreduce of tensor 'm': rank 1 could not start it: allreduce: unsupported dtype "
                                 "object", s.message);
    }
  }
  // An error without a message is still a refusal (an empty one would be a request to run), and says so.
  auto told = job[0].refuse(OpSpec{}, {"quiet"}, "");
  auto q1 = job[1].enqueue(allreduce("quiet", x, &o1));
  auto q2 = job[2].enqueue(allreduce("quiet", x, &o2));
  for (const auto& h : {told[0], q1, q2}) {
    Status s = finish(h);
    CHECK(s.code == Status::Code::Refused);
    CHECK_MESSAGE(s.message == "allreduce of tensor 'quiet': rank 0 could not start it: its call raised an error "
                               "with no message", s.message);
  }
  // A name already in flight on the refusing rank is not refused again: that operation is the one that counts.
  auto h1 = job[1].enqueue(allreduce("n", x, &o1));
  CHECK(job[1].refuse(OpSpec{}, {"n"}, "no").empty());
  auto h0 = job[0].enqueue(allreduce("n", x, &o0));
  auto h2 = job[2].enqueue(allreduce("n", x, &o2));
  CHECK(finish(h0).ok());
  CHECK(finish(h1).ok());
  CHECK(finish(h2).ok());
  CHECK(o2 == std::vector<float>(1, 3.0f));
}

TEST_CASE("an abort on one rank reaches every rank") {
  InProcessJob job(3, quick_config());
  std::vector<float> x(2, 1.0f), o0, o2;
  auto h0 = job[0].enqueue(allreduce("never", x, &o0));  // rank 1 never submits it
  auto h2 = job[2].enqueue(allreduce("never", x, &o2));
  job[1].abort("rank 1 raised ValueError");
  for (const auto& h : {h0, h2}) {
    Status s = finish(h);
    CHECK(s.code == Status::Code::Aborted);
    CHECK(s.message == "rank 1 raised ValueError");
    CHECK(s.origin_rank == 1);
  }
  for (int rank = 0; rank < 3; ++rank) {
    REQUIRE(eventually([&] { return !job[rank].stop_status().ok(); }));
    CHECK(job[rank].stop_status().code == Status::Code::Aborted);
    std::vector<float> later;
    Status s = finish(job[rank].enqueue(allreduce("later", x, &later)));
    CHECK(s.code == Status::Code::Aborted);
    CHECK(s.origin_rank == 1);
  }
  CHECK(has_event(job[0], Phase::Abort, "rank 1 raised ValueError"));
}

TEST_CASE("a shutdown on one rank stops every rank") {
  InProcessJob job(3, quick_config());
  std::vector<float> x(2, 1.0f), o1;
  auto pending = job[1].enqueue(allreduce("pending", x, &o1));
  job[2].shutdown();
  Status s = finish(pending);
  CHECK(s.code == Status::Code::Shutdown);
  CHECK_MESSAGE(s.message.find("rank 2") != std::string::npos, s.message);
  for (int rank = 0; rank < 2; ++rank) {
    REQUIRE(eventually([&] { return !job[rank].stop_status().ok(); }));
    CHECK(job[rank].stop_status().code == Status::Code::Shutdown);
  }
  std::vector<float> o0;
  CHECK(finish(job[0].enqueue(allreduce("after", x, &o0))).code == Status::Code::Shutdown);
  CHECK(has_event(job[0], Phase::Shutdown, "rank 2 shut the engine down"));  // a stop, not a failure
  CHECK_FALSE(has_event(job[0], Phase::Abort, ""));
}

TEST_CASE("a stall is reported with the ranks that have not submitted") {
  Config c = quick_config();
  c.stall_check = true;
  c.stall_check_s = 0.2;
  InProcessJob job(3, c);
  std::vector<float> x(3, 1.0f), o0, o1, o2;
  auto h0 = job[0].enqueue(allreduce("slow", x, &o0));
  auto h2 = job[2].enqueue(allreduce("slow", x, &o2));
  REQUIRE(eventually([&] { return job[0].metrics().stalls >= 1; }));
  CHECK(has_event(job[0], Phase::Stall, "ranks that have not submitted it: 1"));
  CHECK(job[0].stop_status().ok());  // a warning, no abort
  auto h1 = job[1].enqueue(allreduce("slow", x, &o1));
  CHECK(finish(h0).ok());
  CHECK(finish(h1).ok());
  CHECK(finish(h2).ok());
  CHECK(o1 == std::vector<float>(3, 3.0f));
}

TEST_CASE("a stall past the shutdown time aborts every rank") {
  Config c = quick_config();
  c.stall_check = true;
  c.stall_check_s = 0.2;
  c.stall_shutdown_s = 0.2;
  InProcessJob job(2, c);
  std::vector<float> x(3, 1.0f), o0;
  Status s = finish(job[0].enqueue(allreduce("stuck", x, &o0)));
  CHECK(s.code == Status::Code::Aborted);
  CHECK_MESSAGE(s.message.find("stall shutdown") != std::string::npos, s.message);
  REQUIRE(eventually([&] { return !job[1].stop_status().ok(); }));
  CHECK(job[1].stop_status().code == Status::Code::Aborted);
}

TEST_CASE("a malformed message fails the engine thread into an abort on every rank") {
  InProcessJob job(3, quick_config());
  std::vector<float> x(2, 1.0f), o0, o1;
  auto h0 = job[0].enqueue(allreduce("waiting", x, &o0));
  auto h1 = job[1].enqueue(allreduce("waiting", x, &o1));
  job.inject(0, 2, kResponses, {'\x7f', '\x01', '\x02'});  // rank 2 cannot decode it
  for (const auto& h : {h0, h1}) {
    Status s = finish(h);
    CHECK(s.code == Status::Code::Aborted);
    CHECK_MESSAGE(s.message.find("engine error on rank 2") != std::string::npos, s.message);
    CHECK(s.origin_rank == 2);
  }
  for (int rank = 0; rank < 3; ++rank) {
    REQUIRE(eventually([&] { return !job[rank].stop_status().ok(); }));
    CHECK(job[rank].stop_status().code == Status::Code::Aborted);
  }
}

TEST_CASE("a message with an unknown tag is an engine error, not a crash") {
  InProcessJob job(2, quick_config());
  job.inject(1, 0, 42, {});
  REQUIRE(eventually([&] { return !job[1].stop_status().ok(); }));
  Status s = job[1].stop_status();
  CHECK(s.code == Status::Code::Aborted);
  CHECK_MESSAGE(s.message.find("unknown tag 42") != std::string::npos, s.message);
}

TEST_CASE("a process set negotiates among its members only") {
  InProcessJob job(3, quick_config());
  int32_t id = 0;
  for (int rank = 0; rank < 3; ++rank) id = job[rank].add_process_set({0, 2});
  CHECK(pair_allreduce(job, 0, 2, "in_set", id));
  std::vector<float> x0(2, 1.0f), o0, o1;
  TensorEntry outside = allreduce("in_set", x0, &o1);
  outside.request.spec.process_set = id;
  CHECK_THROWS_AS(job[1].enqueue(std::move(outside)), InvalidArgument);
  for (int rank = 0; rank < 3; ++rank) job[rank].remove_process_set(id);
  TensorEntry gone = allreduce("late", x0, &o0);
  gone.request.spec.process_set = id;
  CHECK_THROWS_AS(job[0].enqueue(std::move(gone)), InvalidArgument);
}

TEST_CASE("a_joined_rank_stands_in_for_the_others_allreduces_until_all_have_joined") {
  InProcessJob job(3, quick_config());
  std::vector<int32_t> last(3, -1);
  auto join = [&](int rank) {
    TensorEntry e;
    e.request.name = "join";
    e.request.spec.op = OpType::Join;
    e.request.spec.dtype = DataType::Int32;
    e.request.shape = {1};
    e.input = e.output = &last[rank];
    return job[rank].enqueue(std::move(e));
  };
  auto joined = join(2);
  std::vector<float> x0(3, 1.0f), x1(3, 3.0f), o0, o1;
  auto h0 = job[0].enqueue(allreduce("x", x0, &o0));
  auto h1 = job[1].enqueue(allreduce("x", x1, &o1));
  CHECK(finish(h0).ok());
  CHECK(finish(h1).ok());
  CHECK(o0 == std::vector<float>(3, 4.0f));  // rank 2 put in zeros
  CHECK(o1 == o0);
  CHECK(!joined->poll());
  auto j1 = join(1);
  auto j0 = join(0);
  for (const auto& h : {joined, j1, j0}) CHECK(finish(h).ok());
  CHECK((last[0] == 0 || last[0] == 1));
  CHECK(last == std::vector<int32_t>(3, last[0]));
  CHECK(job.data_plane(2).ran() == job.data_plane(0).ran());  // it took part in the collective
  // Nobody has joined any more: an allreduce waits for rank 2 again.
  std::vector<float> x2(3, 5.0f), o2;
  h0 = job[0].enqueue(allreduce("after", x0, &o0));
  h1 = job[1].enqueue(allreduce("after", x1, &o1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(!h0->poll());
  auto h2 = job[2].enqueue(allreduce("after", x2, &o2));
  for (const auto& h : {h0, h1, h2}) CHECK(finish(h).ok());
  CHECK(o2 == std::vector<float>(3, 9.0f));
}

TEST_CASE("a_blocking_calls_lone_operation_completes_whether_its_waiter_runs_it_hands_it_back_or_never_waits") {
  // enqueue(..., caller_waits) leaves the engine thread asleep for a lone operation (Handle::defer_wake).
  Config config = quick_config();
  config.spin_us = 300;  // waiters run the steps where the host has a core per rank
  InProcessJob job(2, config);
  auto blocking = [&job](int rank, const std::string& name, std::vector<float>& x, std::vector<float>* out) {
    std::vector<TensorEntry> one;
    one.push_back(allreduce(name, x, out));
    return job[rank].enqueue(std::move(one), /*caller_waits=*/true)[0];
  };
  for (int step = 0; step < 20; ++step) {  // both callers wait at once
    std::vector<float> x0(2, 1.0f), x1(2, 3.0f), o0, o1;
    std::thread peer([&] {
      auto h1 = blocking(1, "w", x1, &o1);
      CHECK(h1->wait_for(std::chrono::seconds(60)));
    });
    auto h0 = blocking(0, "w", x0, &o0);
    CHECK(h0->wait_for(std::chrono::seconds(60)));
    peer.join();
    CHECK(o0 == std::vector<float>(2, 4.0f));
    CHECK(o1 == o0);
  }
  // Rank 1's waiter gives up before its peer comes (it hands the operation back to the engine thread), and
  // rank 0's caller never waits: the engine threads finish both.
  std::vector<float> x0(2, 1.0f), x1(2, 3.0f), o0, o1;
  auto h1 = blocking(1, "late", x1, &o1);
  CHECK_FALSE(h1->wait_for(std::chrono::milliseconds(5)));
  auto h0 = blocking(0, "late", x0, &o0);
  CHECK(finish(h0).ok());
  CHECK(finish(h1).ok());
  CHECK(o1 == std::vector<float>(2, 4.0f));
}
