#include "log_format.h"

#include <cstdio>

namespace hvd {

std::string label(const Response& r) {
  return r.names.size() == 1 ? r.names[0]
                             : r.names[0] + " (+" + std::to_string(r.names.size() - 1) + " fused)";
}

std::string describe(const Request& q) {
  std::string s = std::string(dtype_name(q.spec.dtype)) + " [";
  for (size_t i = 0; i < q.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(q.shape[i]);
  return s + "]";
}

std::string size_text(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  char buf[32];
  if (bytes < (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  return buf;
}

}  // namespace hvd
