#include <doctest/doctest.h>
#include "coordinator.h"

using namespace hvd;

static const std::vector<int> kAll = {0, 1, 2};
static const std::vector<int> kPair = {0, 2};

static Coordinator make(int64_t threshold = 1 << 20) {
  return Coordinator([](int32_t id) -> const std::vector<int>* {
    return id == 0 ? &kAll : id == 1 ? &kPair : nullptr;
  }, threshold, 1 << 20, 16, 4096);
}

static Request req(int rank, const std::string& name, std::vector<int64_t> shape = {4}, int set = 0) {
  Request r;
  r.rank = rank;
  r.name = name;
  r.shape = std::move(shape);
  r.spec.process_set = set;
  return r;
}

TEST_CASE("ready_only_when_every_member_submitted") {
  auto c = make();
  c.add(req(0, "x"), 0);
  c.add(req(1, "x"), 0);
  CHECK(!c.has_ready());
  c.add(req(2, "x"), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Execute);
  CHECK(rs[0].cache_ids[0] == -1);  // a name's first time takes no cache id (response_cache.h)
  CHECK(c.pending() == 0);
}

// Every member of the global set submits `name` once more; the responses.
static std::vector<Response> round(Coordinator& c, const std::string& name) {
  for (int rank : {0, 1, 2}) c.add(req(rank, name), 0);
  return c.take_ready();
}

TEST_CASE("an_allgather_response_carries_every_members_rows_in_rank_order") {
  auto c = make();
  for (int rank : {2, 0, 1}) {
    Request q = req(rank, "g", {rank == 1 ? 0 : 3 + rank, 7});
    q.spec.op = OpType::Allgather;
    c.add(q, 0);
  }
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Execute);
  CHECK(rs[0].rows == std::vector<int64_t>{3, 0, 5});
}

TEST_CASE("requests_that_differ_across_ranks_get_no_cache_id") {
  // A cache id stands for one signature: the coordinator's is rank 0's request, so an allgather whose
  // members' first dimensions differ must not get one (a worker's cached id would then mean rank 0's rows).
  auto c = make();
  for (int rank : {0, 1, 2}) {
    Request q = req(rank, "g", {rank == 1 ? 0 : 3, 7});
    q.spec.op = OpType::Allgather;
    c.add(q, 0);
  }
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].cache_ids[0] == -1);
  CHECK(rs[0].rows == std::vector<int64_t>{3, 0, 3});
  for (int times = 0; times < 2; ++times) {
    for (int rank : {0, 1, 2}) {
      Request q = req(rank, "g", {3, 7});
      q.spec.op = OpType::Allgather;
      c.add(q, 0);
    }
    rs = c.take_ready();
  }
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].cache_ids[0] >= 0);  // alike, and the name's second time: cached as usual
}

TEST_CASE("process_set_members_only") {
  auto c = make();
  c.add(req(0, "p", {4}, 1), 0);
  c.add(req(2, "p", {4}, 1), 0);
  CHECK(c.take_ready().size() == 1);
}

TEST_CASE("unknown_process_set_waits") {
  auto c = make();
  c.add(req(0, "u", {4}, 7), 0);
  REQUIRE(c.take_ready().empty());
  CHECK(c.pending() == 1);
}

TEST_CASE("a_tensor_waiting_for_its_set_is_ready_once_the_set_is_known") {
  // A member may submit before rank 0 registered the set; no other tensor need become ready to wake it.
  std::vector<int> late;
  Coordinator c([&late](int32_t id) -> const std::vector<int>* { return id == 5 && !late.empty() ? &late : nullptr; },
                1 << 20, 1 << 20, 16, 4096);
  c.add(req(1, "w", {4}, 5), 0);
  CHECK(!c.has_ready());
  late = {1};
  CHECK(c.has_ready());
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].names[0] == "w");
  CHECK(c.pending() == 0);
}

TEST_CASE("shape_mismatch_is_an_error_naming_tensor_and_ranks") {
  auto c = make();
  c.add(req(0, "m", {4}), 0);
  c.add(req(1, "m", {5}), 0);
  c.add(req(2, "m", {4}), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Error);
  CHECK(rs[0].error.find("'m'") != std::string::npos);
  CHECK(rs[0].error.find("[4] on rank 0") != std::string::npos);
  CHECK(rs[0].error.find("[5] on rank 1") != std::string::npos);
}

// `rank`'s requests of one call of `names` (Engine::enqueue's group).
static void add_call(Coordinator& c, int rank, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    Request q = req(rank, name);
    q.group_size = static_cast<int32_t>(names.size());
    if (names.size() > 1 && name != names[0]) q.group = names[0];
    c.add(q, 0);
  }
}

TEST_CASE("a_group_whose_size_differs_across_ranks_fails_whole_and_leaves_nothing_pending") {
  auto c = make();
  add_call(c, 0, {"g.0", "g.1", "g.2"});
  add_call(c, 1, {"g.0", "g.1"});
  add_call(c, 2, {"g.0", "g.1", "g.2"});
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);  // the first tensor's error stands for the call; the others are dropped
  CHECK(rs[0].kind == Response::Kind::Error);
  CHECK(rs[0].whole_group);
  CHECK(rs[0].names == std::vector<std::string>{"g.0"});
  CHECK_MESSAGE(rs[0].error.find("mismatched groups: a group of 3 tensors from 'g.0' on rank 0, a group of 2 "
                                 "tensors from 'g.0' on rank 1") != std::string::npos, rs[0].error);
  CHECK(c.pending() == 0);
  CHECK(c.stalled(1000000000, 1).empty());
  // The same names, called alike, run.
  for (int rank : {0, 1, 2}) add_call(c, rank, {"g.0", "g.1"});
  rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Execute);
  CHECK(rs[0].names == std::vector<std::string>{"g.0", "g.1"});  // fused, as a group's tensors are
}

TEST_CASE("a_tensor_alone_on_one_rank_and_in_a_group_on_another_fails_both_calls") {
  auto c = make();
  add_call(c, 0, {"x", "y"});
  add_call(c, 1, {"y"});
  add_call(c, 2, {"x", "y"});
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].names == std::vector<std::string>{"y"});
  CHECK(rs[0].whole_group);
  CHECK_MESSAGE(rs[0].error.find("a call of one tensor on rank 1") != std::string::npos, rs[0].error);
  CHECK(c.pending() == 0);  // ranks 0 and 2's "x", which rank 1 never sends, went with their calls
}

TEST_CASE("a_ready_tensor_that_loses_requests_to_a_failed_call_waits_again") {
  // Rank 2 submits "y" and then "x" alone, ranks 0 and 1 each in a group, which they disagree on: "x" was ready
  // after "y", and must wait again for the two ranks whose requests went with their failed calls.
  auto c = make();
  add_call(c, 0, {"y", "x"});
  add_call(c, 1, {"y", "x", "z"});
  add_call(c, 2, {"y"});
  add_call(c, 2, {"x"});
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].names == std::vector<std::string>{"y"});
  CHECK(c.pending() == 1);  // rank 2's "x"
  CHECK(!c.has_ready());
  add_call(c, 0, {"x"});
  add_call(c, 1, {"x"});
  rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Execute);
  CHECK(c.pending() == 0);
}

TEST_CASE("cached_requests_rebuild_the_signature") {
  auto c = make();
  CHECK(round(c, "k")[0].cache_ids[0] == -1);
  int32_t id = round(c, "k")[0].cache_ids[0];
  REQUIRE(id >= 0);
  CHECK(c.add_cached(1, id, {}, 0));
  CHECK(c.add_cached(2, id, {}, 0));
  c.add(req(0, "k"), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Execute);
  CHECK(!c.add_cached(1, 12345, {}, 0));
}

TEST_CASE("a_removed_sets_cache_entries_go_and_its_late_cached_requests_are_dropped") {
  auto c = make();
  for (int times = 0; times < 2; ++times) {
    for (int rank : {0, 2}) c.add(req(rank, "p", {4}, 1), 0);
    (void)c.take_ready();
  }
  for (int rank : {0, 2}) c.add(req(rank, "p", {4}, 1), 0);
  const int32_t id = c.take_ready()[0].cache_ids[0];
  REQUIRE(id >= 0);
  c.drop_set(1);
  // Rank 2 sent this before it removed the set: dropped, as a full request of the set would be.
  CHECK(c.add_cached(2, id, {}, 0));
  CHECK(c.pending() == 0);
  CHECK(!c.has_ready());
  CHECK(!c.add_cached(2, id + 1, {}, 0));  // an id never given is still an error
}

// A request whose whole input (4 float32, 16 bytes) comes with it: bytes k*16 .. k*16+15 hold `fill`.
static Request carrying(int rank, const std::string& name, char fill) {
  Request r = req(rank, name);
  r.data.assign(16, fill);
  return r;
}

TEST_CASE("an_allreduce_every_member_carried_comes_back_with_their_inputs_in_rank_order") {
  auto c = make();
  round(c, "a");  // uncarried: a carried input is not part of the signature, so the next time is the second
  for (int rank : {2, 0, 1}) c.add(carrying(rank, "a", static_cast<char>('0' + rank)), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Execute);
  const std::string a = std::string(16, '0') + std::string(16, '1') + std::string(16, '2');
  CHECK(std::string(rs[0].carried.begin(), rs[0].carried.end()) == a);
  // Repeats by cache id carry their inputs too; fused, each tensor's block follows the last.
  const int32_t id = rs[0].cache_ids[0];
  REQUIRE(id >= 0);
  CHECK(c.add_cached(1, id, std::vector<char>(16, 'x'), 0));
  CHECK(c.add_cached(2, id, std::vector<char>(16, 'y'), 0));
  c.add(carrying(0, "a", 'w'), 0);
  for (int rank : {0, 1, 2}) c.add(carrying(rank, "b", static_cast<char>('0' + rank)), 0);
  rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].names == std::vector<std::string>{"a", "b"});
  CHECK(std::string(rs[0].carried.begin(), rs[0].carried.end()) ==
        std::string(16, 'w') + std::string(16, 'x') + std::string(16, 'y') + a);
}

TEST_CASE("a_fused_group_carries_only_within_the_carry_limit") {
  auto c = Coordinator([](int32_t) -> const std::vector<int>* { return &kAll; }, 1 << 20, 1 << 20, 16, 96);
  for (const char* n : {"a", "b"})
    for (int rank : {0, 1, 2}) c.add(carrying(rank, n, 'z'), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].carried.size() == 96);  // 2 tensors x 3 members x 16 bytes: at the limit
  for (const char* n : {"c", "d", "e"})
    for (int rank : {0, 1, 2}) c.add(carrying(rank, n, 'z'), 0);
  rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].names.size() == 3);
  CHECK(rs[0].carried.empty());  // 144 bytes: a collective instead
}

TEST_CASE("an_allreduce_carried_by_some_members_only_runs_as_a_collective") {
  auto c = make();
  c.add(carrying(0, "p", 'a'), 0);
  c.add(req(1, "p"), 0);  // this rank's settings carry nothing
  c.add(carrying(2, "p", 'c'), 0);
  c.add(carrying(0, "short", 'a'), 0);
  Request bad = carrying(1, "short", 'b');
  bad.data.resize(15);  // not the whole input
  c.add(bad, 0);
  c.add(carrying(2, "short", 'c'), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);  // fused: with one tensor not carried, the group is not
  CHECK(rs[0].names.size() == 2);
  CHECK(rs[0].carried.empty());
}

TEST_CASE("ready_tensors_are_fused_in_one_response") {
  auto c = make();
  for (const char* n : {"a", "b", "c"})
    for (int r = 0; r < 3; ++r) c.add(req(r, n), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].names.size() == 3);
}

TEST_CASE("stalled_lists_missing_ranks") {
  auto c = make();
  c.add(req(0, "s"), 0);
  c.add(req(2, "s"), 0);
  auto st = c.stalled(2000000, 1000000);
  REQUIRE(st.size() == 1);
  CHECK(st[0].key.name == "s");
  CHECK(st[0].missing_ranks == std::vector<int>{1});
  CHECK(c.stalled(2500000, 1000000).empty());  // not repeated within the check interval
}

TEST_CASE("gpu_and_host_tensors_under_one_name_are_a_mismatch") {
  auto c = make();
  Request gpu = req(1, "d");
  gpu.spec.memory = Memory::Cuda;
  c.add(req(0, "d"), 0);
  c.add(gpu, 0);
  c.add(req(2, "d"), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Error);
  CHECK(rs[0].error.find("mismatched devices: a host tensor on rank 0, a GPU tensor on rank 1") != std::string::npos);
}

TEST_CASE("holding_ready_tensors_is_worth_it_only_while_more_could_fuse_with_them") {
  auto c = Coordinator([](int32_t) -> const std::vector<int>* { return &kPair; }, 1000, 400, 16, 4096);
  auto ready = [&](const std::string& name, int64_t floats) {
    for (int rank : kPair) c.add(req(rank, name, {floats}), 0);
  };
  ready("a", 50);  // 200 bytes: small, and the buffer has room
  CHECK(c.has_ready());
  CHECK(c.worth_holding());
  ready("b", 150);  // 600 bytes: too big to fuse
  CHECK(!c.worth_holding());
  c.take_ready();
  CHECK(c.worth_holding());  // nothing ready: nothing rules it out
  for (const char* name : {"c", "d", "e", "f"}) ready(name, 50);
  CHECK(c.worth_holding());  // 800 of 1000 bytes
  ready("g", 50);
  CHECK(!c.worth_holding());  // a full buffer
  c.take_ready();
  auto no_fusion = Coordinator([](int32_t) -> const std::vector<int>* { return &kPair; }, 0, 400, 16, 4096);
  for (int rank : kPair) no_fusion.add(req(rank, "h", {1}), 0);
  CHECK(!no_fusion.worth_holding());
}

TEST_CASE("the_same_name_in_two_process_sets_is_two_tensors") {
  // Sets {0} and {1} of a 2-rank job, each rank reducing "x" in its own: two responses, none mixed up.
  static const std::vector<int> k0 = {0}, k1 = {1};
  Coordinator c([](int32_t id) -> const std::vector<int>* { return id == 1 ? &k0 : id == 2 ? &k1 : nullptr; },
                1 << 20, 1 << 20, 16, 4096);
  for (int step = 0; step < 3; ++step) {
    c.add(req(0, "x", {4}, 1), 0);
    c.add(req(1, "x", {4}, 2), 0);
    auto rs = c.take_ready();
    CHECK(rs.size() == 2);
    for (const auto& r : rs) CHECK((r.kind == Response::Kind::Execute && r.names == std::vector<std::string>{"x"}));
    REQUIRE(rs.size() == 2);
    CHECK(rs[0].spec.process_set != rs[1].spec.process_set);
    CHECK(c.pending() == 0);
  }
}

TEST_CASE("a_rank_that_submits_a_name_twice_gets_an_error_not_a_crash") {
  auto c = make();
  c.add(req(0, "d"), 0);
  c.add(req(0, "d"), 0);
  c.add(req(1, "d"), 0);
  c.add(req(2, "d"), 0);  // four requests for three members
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Error);
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].error.find("rank 0 submitted it twice") != std::string::npos);
  CHECK(c.pending() == 0);
  CHECK(!c.has_ready());
}

TEST_CASE("dropping_a_process_set_forgets_its_pending_and_later_requests") {
  auto c = make();
  c.add(req(0, "p", {4}, 1), 0);
  c.add(req(0, "g"), 0);
  c.drop_set(1);
  CHECK(c.pending() == 1);
  c.add(req(2, "p", {4}, 1), 0);  // sent before that rank removed the set: dropped too
  CHECK(c.pending() == 1);
  CHECK(!c.has_ready());
  c.add(req(1, "g"), 0);
  c.add(req(2, "g"), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].names[0] == "g");
}

TEST_CASE("a_sets_members_are_looked_up_once_for_many_tensors_and_not_before_the_set_is_known") {
  // The lookup takes the process-set table's lock: once per set, not per request; but a set not yet
  // known is asked for again.
  int lookups = 0;
  std::vector<int> late;
  Coordinator c([&](int32_t id) -> const std::vector<int>* {
    ++lookups;
    return id == 0 ? &kAll : id == 5 && !late.empty() ? &late : nullptr;
  }, 1 << 20, 1 << 20, 16, 4096);
  for (int i = 0; i < 10; ++i)
    for (int rank : kAll) c.add(req(rank, "t" + std::to_string(i)), 0);
  CHECK(c.take_ready().size() == 1);  // fused
  CHECK(lookups == 1);
  c.add(req(1, "w", {4}, 5), 0);
  CHECK(!c.has_ready());
  const int before = lookups;
  late = {1};
  CHECK(c.has_ready());
  CHECK(lookups > before);
  CHECK(c.take_ready().size() == 1);
}

static Request join_req(int rank, int set = 0) {
  Request r = req(rank, "join", {1}, set);
  r.spec.op = OpType::Join;
  r.spec.dtype = DataType::Int32;
  return r;
}

TEST_CASE("joined_ranks_make_the_others_tensors_ready_and_stand_in_for_them") {
  auto c = make();
  c.add(req(0, "x", {4, 2}), 0);
  c.add(req(1, "x", {4, 2}), 0);
  CHECK(!c.has_ready());
  c.add(join_req(2), 0);  // a tensor pending before the join is ready with it
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Execute);
  CHECK(rs[0].names == std::vector<std::string>{"x"});
  CHECK(rs[0].stand_in_counts == std::vector<int64_t>{8});
  for (const char* name : {"y", "z"}) {  // and later ones at once, fused, with a count per tensor
    Request a = req(0, name, {name[0] == 'y' ? 3 : 5}), b = req(1, name, {name[0] == 'y' ? 3 : 5});
    c.add(a, 0);
    c.add(b, 0);
  }
  rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].names == std::vector<std::string>{"y", "z"});
  CHECK(rs[0].stand_in_counts == std::vector<int64_t>{3, 5});
  CHECK(rs[0].carried.empty());  // the joined rank carried nothing: the members run a collective
  Request barrier = req(0, "b", {0});
  barrier.spec.op = OpType::Barrier;
  c.add(barrier, 0);
  barrier.rank = 1;
  c.add(barrier, 0);
  rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].kind == Response::Kind::Execute);
  CHECK(rs[0].stand_in_counts == std::vector<int64_t>{0});
}

TEST_CASE("the_join_completes_once_every_member_joined_with_the_last_one_as_its_root") {
  auto c = make();
  c.add(join_req(1), 0);
  c.add(join_req(0), 0);
  CHECK(!c.has_ready());
  c.add(req(2, "x"), 0);  // the last rank's own work goes on alone, then it joins
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].stand_in_counts == std::vector<int64_t>{4});
  c.add(join_req(2), 0);
  rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].spec.op == OpType::Join);
  CHECK(rs[0].kind == Response::Kind::Execute);
  CHECK(rs[0].spec.root_rank == 2);
  CHECK(rs[0].stand_in_counts.empty());
  for (int rank : {0, 1}) c.add(req(rank, "after"), 0);  // nobody has joined any more: all three are needed
  CHECK(!c.has_ready());
  c.add(req(2, "after"), 0);
  rs = c.take_ready();
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].stand_in_counts.empty());
}

TEST_CASE("what_a_joined_rank_cannot_stand_in_for_is_an_error_for_the_others") {
  auto c = make();
  c.add(join_req(0), 0);
  auto submit = [&](Request q) {
    for (int rank : {1, 2}) {
      q.rank = rank;
      c.add(q, 0);
    }
    auto rs = c.take_ready();
    REQUIRE(rs.size() == 1);
    CHECK(rs[0].kind == Response::Kind::Error);
    CHECK(rs[0].stand_in_counts.empty());
    return rs[0].error;
  };
  Request g = req(1, "g", {2, 2});
  g.spec.op = OpType::Allgather;
  CHECK(submit(g) == "allgather of tensor 'g': not supported while rank 0 has joined; until every rank has joined, "
                     "only allreduces and barriers go on");
  Request scaled = req(1, "scaled");
  scaled.spec.reduce = ReduceOp::Max;
  scaled.spec.prescale = 2.0;
  CHECK(submit(scaled).find("Max with a prescale factor") != std::string::npos);
  scaled.spec.reduce = ReduceOp::Sum;  // zeros stay zeros: a Sum may scale
  scaled.spec.memory = Memory::Cuda;   // the joined rank stands in on its GPU
  for (int rank : {1, 2}) {
    scaled.rank = rank;
    c.add(scaled, 0);
  }
  auto rs = c.take_ready();
  CHECK(rs[0].kind == Response::Kind::Execute);
  CHECK(rs[0].stand_in_counts == std::vector<int64_t>{4});
}

TEST_CASE("a_pending_join_is_no_stall_and_counts_in_its_own_process_set_only") {
  auto c = make();
  c.add(join_req(0, 1), 0);  // process set 1: ranks 0 and 2
  c.add(req(1, "global"), 0);
  auto stalls = c.stalled(120'000'000, 60'000'000);
  REQUIRE(stalls.size() == 1);
  CHECK(stalls[0].key.name == "global");
  c.add(req(2, "global"), 0);
  CHECK(!c.has_ready());  // rank 0 joined set 1, not the global set
  c.add(req(0, "global"), 0);
  c.add(req(2, "in.set", {4}, 1), 0);
  auto rs = c.take_ready();
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].stand_in_counts.empty());
  CHECK(rs[1].names[0] == "in.set");
  CHECK(rs[1].stand_in_counts == std::vector<int64_t>{4});
}
