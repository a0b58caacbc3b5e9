// The engine's settings: every environment variable it reads, in one table with its default, the
// values it accepts and a line of help. Config::from_env reads through the table; jupyter_hvd._C
// exposes it, so hvdrun's flags check their values against it and a test keeps the README's table
// in step with it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config.h"
#include "enum_list.h"

namespace hvd {

#define HVD_SETTING_KINDS(X) \
  X(Integer, "integer") X(Number, "number") X(Flag, "flag") X(Text, "text") X(Choice, "choice") X(List, "list")

struct Setting {
  enum class Kind : uint8_t { HVD_SETTING_KINDS(HVD_ENUM_VALUE) };

  const char* name;
  Kind kind;
  const char* help;
  int64_t min = 0;                   // Integer, Number: the least value accepted
  int64_t max = 0;                   // Integer: the largest (the field's limit); Number: no limit
  std::vector<std::string> choices;  // Choice: the values accepted, in any case
  // Parses `value` into `c`; std::invalid_argument "NAME='value': expected ..." when it is not accepted.
  std::function<void(Config& c, const std::string& value)> read;
  // The value in `c` as the variable would hold it; "" when unset.
  std::function<std::string(const Config& c)> show;

  // The value a job gets when the variable is not set, from Config's own defaults.
  std::string default_value() const { return show(Config{}); }
  // What the variable accepts, as errors say it: "an integer >= 0", "1 (on) or 0 (off)", ...
  std::string accepts() const;
};

template <>
struct EnumNames<Setting::Kind> {
  static constexpr const char* names[] = {HVD_SETTING_KINDS(HVD_ENUM_NAME)};
};

// Every setting, in the order the README lists them.
const std::vector<Setting>& settings();

}  // namespace hvd
