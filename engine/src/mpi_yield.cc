#include "mpi_yield.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/resource.h>

#include <cstring>
#include <string>

namespace hvd {
namespace {

// The path of the loaded object whose file name starts with `prefix`, or "".
std::string loaded_library(const char* prefix) {
  struct Search {
    const char* prefix;
    std::string path;
  } search{prefix, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const char* name = info->dlpi_name ? std::strrchr(info->dlpi_name, '/') : nullptr;
        if (name && std::strncmp(name + 1, s->prefix, std::strlen(s->prefix)) == 0) {
          s->path = info->dlpi_name;
          return 1;
        }
        return 0;
      },
      &search);
  return search.path;
}

}  // namespace

std::function<void(bool)> mpi_yield_switch() {
  const std::string pal = loaded_library("libopen-pal.so");
  if (pal.empty()) return {};
  void* lib = dlopen(pal.c_str(), RTLD_LAZY | RTLD_NOLOAD);  // a reference to the loaded one, never freed
  if (!lib) return {};
  auto set = reinterpret_cast<void (*)(bool)>(dlsym(lib, "opal_progress_set_yield_when_idle"));
  const auto* yielding = static_cast<const bool*>(dlsym(lib, "opal_progress_yield_when_idle"));
  if (!set || !yielding || *yielding) return {};
  return set;
}

bool CoreContention::sample(int64_t now_us) {
  if (now_us >= next_us_) {
    next_us_ = now_us + kEveryUs;
    rusage u{};
    if (getrusage(RUSAGE_THREAD, &u) == 0) {
      if (switches_ >= 0 && u.ru_nivcsw > switches_) until_us_ = now_us + kHoldUs;
      switches_ = u.ru_nivcsw;
    }
  }
  return now_us < until_us_;
}

}  // namespace hvd
