#include "gpu/dynamic_library.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <utility>

namespace hvd::gpu {
namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

DynamicLibrary::~DynamicLibrary() {
  // Deliberately not dlclose'd: CUDA and NCCL keep threads and atexit handlers inside the
  // library, and unloading them under a live process is a known source of crashes at exit.
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)), path_(std::move(o.path_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& o) noexcept {
  handle_ = std::exchange(o.handle_, nullptr);
  path_ = std::move(o.path_);
  return *this;
}

DynamicLibrary DynamicLibrary::open_first(const std::vector<std::string>& candidates, std::string* error) {
  DynamicLibrary lib;
  std::string tried;
  for (const auto& c : candidates) {
    dlerror();
    void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(e ? e : c + ": not loadable");
      continue;
    }
    lib.handle_ = h;
    lib.path_ = c;
    struct link_map* lm = nullptr;
    if (::dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name) lib.path_ = lm->l_name;
    return lib;
  }
  if (error) *error = candidates.empty() ? "no candidate paths" : tried;
  return lib;
}

void* DynamicLibrary::symbol(const char* name) const { return handle_ ? ::dlsym(handle_, name) : nullptr; }

std::vector<std::string> library_candidates(const std::vector<std::string>& names,
                                            const std::vector<std::string>& dirs,
                                            const std::string& override_path) {
  std::vector<std::string> out;
  if (!override_path.empty()) {
    if (is_dir(override_path)) {
      for (const auto& n : names) out.push_back(override_path + "/" + n);
    } else {
      out.push_back(override_path);
    }
    return out;
  }
  for (const auto& d : dirs)
    for (const auto& n : names)
      if (is_file(d + "/" + n)) out.push_back(d + "/" + n);
  for (const auto& n : names) out.push_back(n);
  return out;
}

}  // namespace hvd::gpu
