#include <doctest/doctest.h>
#include "fusion_planner.h"

using namespace hvd;

static Response single(const std::string& name, DataType t = DataType::Float32, OpType op = OpType::Allreduce) {
  Response r;
  r.spec.op = op;
  r.spec.dtype = t;
  r.names = {name};
  r.cache_ids = {-1};
  return r;
}

TEST_CASE("fuses_compatible_allreduces_up_to_threshold") {
  std::vector<Response> in = {single("a"), single("b"), single("c")};
  auto out = plan_fusion(in, {40, 40, 40}, 100, 1 << 20);
  CHECK(out.size() == 2);
  CHECK(out[0].names == std::vector<std::string>{"a", "b"});
  CHECK(out[1].names == std::vector<std::string>{"c"});
}

TEST_CASE("zero_threshold_disables_fusion") {
  auto out = plan_fusion({single("a"), single("b")}, {4, 4}, 0, 1 << 20);
  CHECK(out.size() == 2);
}

TEST_CASE("does_not_mix_dtypes_ops_or_scaling_and_keeps_order") {
  Response scaled = single("s");
  scaled.spec.postscale = 0.5;
  std::vector<Response> in = {single("a"), single("h", DataType::Float16), single("g", DataType::Float32, OpType::Broadcast),
                              single("b"), scaled};
  auto out = plan_fusion(in, {4, 4, 4, 4, 4}, 1 << 20, 1 << 20);
  CHECK(out.size() == 4);
  CHECK(out[0].names == std::vector<std::string>{"a", "b"});
  CHECK(out[1].names[0] == "h");
  CHECK(out[2].names[0] == "g");
  CHECK(out[3].names[0] == "s");
}

TEST_CASE("oversized_tensor_goes_alone") {
  auto out = plan_fusion({single("big"), single("small")}, {1000, 4}, 100, 1 << 20);
  REQUIRE(out.size() == 2);
  CHECK(out[0].names.size() == 1);
}

TEST_CASE("large_tensors_run_alone_small_ones_fuse_around_them") {
  std::vector<Response> in = {single("s1"), single("big"), single("s2")};
  auto out = plan_fusion(in, {8, 5000, 8}, 1 << 20, 1024);
  CHECK(out.size() == 2);
  CHECK(out[0].names == std::vector<std::string>{"s1", "s2"});
  CHECK(out[1].names == std::vector<std::string>{"big"});
}

TEST_CASE("a_group_stays_carried_only_while_every_tensor_is") {
  auto carried = [](const std::string& name, char fill) {
    Response r = single(name);
    r.carried.assign(8, fill);
    return r;
  };
  auto out = plan_fusion({carried("a", 'a'), carried("b", 'b')}, {4, 4}, 1 << 20, 1 << 20);
  REQUIRE(out.size() == 1);
  CHECK(std::string(out[0].carried.begin(), out[0].carried.end()) == "aaaaaaaabbbbbbbb");
  out = plan_fusion({carried("a", 'a'), single("b"), carried("c", 'c')}, {4, 4, 4}, 1 << 20, 1 << 20);
  REQUIRE(out.size() == 1);
  CHECK(out[0].names.size() == 3);
  CHECK(out[0].carried.empty());
}
