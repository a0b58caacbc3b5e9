#include "config.h"

#include <cstdlib>

#include "settings.h"

namespace hvd {

Config Config::from_env() {
  Config c;
  for (const Setting& s : settings()) {
    const char* v = std::getenv(s.name);
    if (v && *v) s.read(c, v);
  }
  return c;
}

}  // namespace hvd
