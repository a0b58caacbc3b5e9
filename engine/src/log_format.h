// How engine log lines name responses, requests and sizes.
#pragma once

#include <cstdint>
#include <string>

#include "types.h"

namespace hvd {

// "grad.3", or "grad.3 (+11 fused)" for a fused response.
std::string label(const Response& r);
// "float32 [4, 3]": a request's dtype and shape.
std::string describe(const Request& q);
// "512 B", "4.0 KiB", "1.25 MiB".
std::string size_text(int64_t bytes);

}  // namespace hvd
