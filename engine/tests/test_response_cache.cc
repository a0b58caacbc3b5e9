#include <doctest/doctest.h>
#include "response_cache.h"

using namespace hvd;

static Request req(const std::string& name, std::vector<int64_t> shape, int32_t set = 0) {
  Request r;
  r.name = name;
  r.shape = std::move(shape);
  r.spec.process_set = set;
  return r;
}

// The id the coordinator gives `r`'s signature, at the name's second time if need be.
static int32_t assigned(ResponseCache& c, const Request& r) {
  int32_t id = c.assign(r);
  return id >= 0 ? id : c.assign(r);
}

TEST_CASE("assign_is_stable_and_lookup_matches_signature") {
  ResponseCache coord, worker;
  CHECK(coord.assign(req("w", {2, 3})) == -1);  // the name's first time
  int32_t id = coord.assign(req("w", {2, 3}));
  CHECK(id >= 0);
  CHECK(coord.assign(req("w", {2, 3})) == id);
  worker.learn(id, req("w", {2, 3}));
  CHECK(worker.lookup(req("w", {2, 3})) == id);
  CHECK(worker.lookup(req("w", {3, 3})) == -1);  // changed shape: send in full
  CHECK(worker.lookup(req("other", {2, 3})) == -1);
  CHECK(coord.get(id)->name == "w");
  CHECK(coord.get(999) == nullptr);
}

TEST_CASE("new_signature_for_a_name_gets_a_new_id_and_the_old_one_is_forgotten") {
  ResponseCache c;
  int32_t a = assigned(c, req("w", {2}));
  int32_t b = c.assign(req("w", {4}));  // the name is known: its new signature takes an id at once
  CHECK(a != b);
  REQUIRE(c.get(a) == nullptr);
  CHECK(c.get(b)->shape[0] == 4);
}

TEST_CASE("a_name_whose_shape_changes_every_step_keeps_one_entry") {
  ResponseCache coord, worker;
  for (int64_t rows = 1; rows < 200; ++rows) {
    int32_t id = assigned(coord, req("gather", {rows, 3}));
    worker.learn(id, req("gather", {rows, 3}));
    CHECK(worker.lookup(req("gather", {rows, 3})) == id);
  }
  REQUIRE(coord.size() == 1);
  CHECK(worker.size() == 1);
}

TEST_CASE("the_same_name_in_two_process_sets_has_two_ids") {
  ResponseCache c;
  int32_t a = assigned(c, req("loss", {1}, 1));
  int32_t b = assigned(c, req("loss", {1}, 2));
  CHECK(a != b);
  CHECK(c.assign(req("loss", {1}, 1)) == a);
  CHECK(c.assign(req("loss", {1}, 2)) == b);
  CHECK(c.size() == 2);
}

TEST_CASE("capacity_bounds_new_names") {
  ResponseCache c(2);
  CHECK(assigned(c, req("a", {1})) >= 0);
  CHECK(assigned(c, req("b", {1})) >= 0);
  CHECK(assigned(c, req("c", {1})) == -1);
  CHECK(c.assign(req("a", {1})) >= 0);
}

TEST_CASE("names_used_once_take_no_ids_and_leave_room_for_names_that_repeat") {
  // Unnamed ops' automatic names never repeat: however many come, a name used twice later still gets an id.
  ResponseCache c(4);
  for (int n = 0; n < 1000; ++n) CHECK(c.assign(req("allreduce.noname.0." + std::to_string(n), {1})) == -1);
  CHECK(c.size() == 0);
  CHECK(c.assign(req("w", {1})) == -1);
  const int32_t id = c.assign(req("w", {1}));
  CHECK(id >= 0);
  CHECK(c.assign(req("w", {1})) == id);
  // Only the last `capacity` names seen once are remembered: one seen again after more new names than
  // that counts as new.
  c.assign(req("v", {1}));
  for (int n = 0; n < 4; ++n) c.assign(req("once." + std::to_string(n), {1}));
  CHECK(c.assign(req("v", {1})) == -1);
  CHECK(c.assign(req("v", {1})) >= 0);
  CHECK(c.size() == 2);
}

TEST_CASE("no_capacity_caches_nothing") {
  ResponseCache c(0);
  for (int n = 0; n < 3; ++n) CHECK(c.assign(req("w", {1})) == -1);
  CHECK(c.size() == 0);
}

TEST_CASE("a_removed_sets_entries_are_dropped_and_leave_their_room") {
  ResponseCache c(2);
  const int32_t a = assigned(c, req("w", {1}, 1));
  const int32_t b = assigned(c, req("w", {1}, 2));
  CHECK(assigned(c, req("x", {1}, 3)) == -1);  // full
  CHECK(c.drop_set(1) == std::vector<int32_t>{a});
  CHECK(c.get(a) == nullptr);
  CHECK(c.get(b) != nullptr);
  CHECK(c.lookup(req("w", {1}, 1)) == -1);
  CHECK(assigned(c, req("x", {1}, 3)) >= 0);  // the room is free again
  CHECK(c.drop_set(1).empty());
}
