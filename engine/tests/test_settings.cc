#include <doctest/doctest.h>
#include <set>
#include <string>

#include "settings.h"
#include "status.h"
#include "timeline.h"
#include "types.h"

using namespace hvd;

TEST_CASE("settings_have_unique_names_and_defaults_that_read_back_as_themselves") {
  std::set<std::string> names;
  for (const Setting& s : settings()) {
    CHECK(names.insert(s.name).second);
    Config c;
    if (!s.default_value().empty()) s.read(c, s.default_value());
    CHECK(s.show(c) == s.default_value());
  }
  CHECK(names.count("HOROVOD_FUSION_THRESHOLD") == 1);
  CHECK(names.count("HOROVOD_LOG_LEVEL") == 1);
}

TEST_CASE("settings_defaults_come_from_config") {
  auto default_of = [](const std::string& name) {
    for (const Setting& s : settings())
      if (name == s.name) return s.default_value();
    return std::string("missing");
  };
  CHECK(default_of("HOROVOD_FUSION_THRESHOLD") == std::to_string(Config{}.fusion_threshold));
  CHECK(default_of("HOROVOD_CYCLE_TIME") == "1");
  CHECK(default_of("HOROVOD_STALL_CHECK_DISABLE") == "0");  // stall checks on
  CHECK(default_of("HOROVOD_BATCH_D2D_MEMCOPIES") == "1");
  CHECK(default_of("HOROVOD_LOG_LEVEL") == "warning");
  CHECK(default_of("HOROVOD_TIMELINE") == "");
}

TEST_CASE("enum_lists_give_names_counts_and_validity") {
  CHECK(enum_count<ReduceOp>() == 6);
  CHECK(static_cast<int>(ReduceOp::Average) == 0);  // Horovod's numbering
  CHECK(static_cast<int>(ReduceOp::Product) == 5);
  CHECK(std::string(enum_name(ReduceOp::Product)) == "Product");
  CHECK(std::string(op_name(OpType::Reducescatter)) == "reducescatter");
  CHECK(std::string(dtype_name(DataType::BFloat16)) == "bfloat16");
  CHECK(std::string(phase_name(Phase::WaitForData)) == "WAIT_FOR_DATA");
  CHECK(std::string(enum_name(Status::Code::Internal)) == "Internal");
  CHECK(enum_valid(Phase::WaitForData));
  CHECK(!enum_valid(static_cast<Phase>(enum_count<Phase>())));
  CHECK(std::string(enum_name(static_cast<OpType>(200))) == "unknown");
  OpSpec spec;
  spec.reduce = static_cast<ReduceOp>(enum_count<ReduceOp>());
  CHECK(!spec.valid());
  spec.reduce = ReduceOp::Adasum;  // Horovod's number, no engine op
  CHECK(!spec.valid());
}
