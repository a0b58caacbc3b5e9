#include <stdexcept>
#include <string>

#include <doctest/doctest.h>
#include "log.h"

using namespace hvd;

TEST_CASE("log_levels_parse_in_any_case_and_a_bad_one_names_the_choices") {
  CHECK(log::parse_level("trace") == log::Level::Trace);
  CHECK(log::parse_level("DEBUG") == log::Level::Debug);
  CHECK(log::parse_level("Info") == log::Level::Info);
  CHECK(log::parse_level("warning") == log::Level::Warning);
  CHECK(log::parse_level("fatal") == log::Level::Fatal);
  std::string what;
  try {
    log::parse_level("verbose");
  } catch (const std::invalid_argument& e) {
    what = e.what();
  }
  CHECK(what == "HOROVOD_LOG_LEVEL='verbose': expected one of trace, debug, info, warning, error, fatal");
}

TEST_CASE("log_threshold_drops_lower_levels") {
  log::configure(log::Level::Info, 0, false);
  CHECK(!log::enabled(log::Level::Debug));
  CHECK(log::enabled(log::Level::Info));
  CHECK(log::enabled(log::Level::Error));
  log::configure(log::Level::Trace, 0, false);
  CHECK(log::enabled(log::Level::Trace));
  log::configure(log::Level::Warning, -1, true);  // as before any engine started
  CHECK(!log::enabled(log::Level::Info));
  CHECK(log::enabled(log::Level::Warning));
}

TEST_CASE("log_lines_name_the_rank_and_the_time_unless_hidden") {
  CHECK(log::format_line(log::Level::Warning, 3, "", "stall detected") ==
        "[jupyter_hvd rank 3] WARNING: stall detected");
  CHECK(log::format_line(log::Level::Debug, 0, "2026-11-23 04:05:06.000001", "x") ==
        "[jupyter_hvd 2026-11-23 04:05:06.000001 rank 0] DEBUG: x");
  CHECK(log::format_line(log::Level::Info, -1, "", "no engine yet") == "[jupyter_hvd] INFO: no engine yet");
}
