// Files the engine writes at a path the user gave (the timeline, the autotune log): created, or emptied,
// but never through a symbolic link, whose target could be any file the user may write (a link planted
// in a shared /tmp, say).
#pragma once

#include <cstdio>
#include <memory>
#include <string>

namespace hvd {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using OutputFile = std::unique_ptr<FILE, FileCloser>;

// Throws std::runtime_error naming the path and the reason when it cannot be written.
OutputFile create_output_file(const std::string& path, const char* what);

}  // namespace hvd
