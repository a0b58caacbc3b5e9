#include "check.h"
#include "response_cache.h"

using namespace hvd;

static Request req(const std::string& name, std::vector<int64_t> shape) {
  Request r;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

TEST(assign_is_stable_and_lookup_matches_signature) {
  ResponseCache coord, worker;
  int32_t id = coord.assign(req("w", {2, 3}));
  CHECK(id >= 0 && coord.assign(req("w", {2, 3})) == id);
  worker.learn(id, req("w", {2, 3}));
  CHECK(worker.lookup(req("w", {2, 3})) == id);
  CHECK(worker.lookup(req("w", {3, 3})) == -1);  // changed shape: send in full
  CHECK(worker.lookup(req("other", {2, 3})) == -1);
  CHECK(coord.get(id)->name == "w" && coord.get(999) == nullptr);
}

TEST(new_signature_for_a_name_gets_a_new_id) {
  ResponseCache c;
  int32_t a = c.assign(req("w", {2}));
  int32_t b = c.assign(req("w", {4}));
  CHECK(a != b && c.get(a)->shape[0] == 2 && c.get(b)->shape[0] == 4);
}

TEST(capacity_bounds_new_names) {
  ResponseCache c(2);
  CHECK(c.assign(req("a", {1})) >= 0 && c.assign(req("b", {1})) >= 0);
  CHECK(c.assign(req("c", {1})) == -1);
  CHECK(c.assign(req("a", {1})) >= 0);
}
