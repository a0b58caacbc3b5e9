#include "output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace hvd {

OutputFile create_output_file(const std::string& path, const char* what) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error(std::string("cannot write the ") + what + " '" + path + "': " +
                             (err == ELOOP ? "it is a symbolic link" : std::strerror(err)));
  }
  FILE* f = ::fdopen(fd, "w");
  if (!f) {
    ::close(fd);
    throw std::runtime_error(std::string("cannot write the ") + what + " '" + path + "'");
  }
  return OutputFile(f);
}

}  // namespace hvd
