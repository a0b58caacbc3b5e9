// A shared library opened with dlopen at run time, found by trying candidate paths in order.
#pragma once

#include <string>
#include <vector>

namespace hvd::gpu {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  ~DynamicLibrary();
  DynamicLibrary(DynamicLibrary&& o) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& o) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // Opens the first of `candidates` that loads (a path with '/' is opened as is, a bare name
  // through the system loader's search). On failure `error` says what each try answered.
  static DynamicLibrary open_first(const std::vector<std::string>& candidates, std::string* error);

  explicit operator bool() const { return handle_ != nullptr; }
  // The file the loader actually mapped (resolved through dlinfo), or the name it was opened by.
  const std::string& path() const { return path_; }
  void* symbol(const char* name) const;

 private:
  void* handle_ = nullptr;
  std::string path_;
};

// Candidate files for `names` (e.g. "libnccl.so.2"): each name in each of `dirs` that exists,
// then each bare name for the system loader. An `override_path` (a file or a folder), when
// non-empty, replaces the whole list, so a wrong override is reported instead of ignored.
std::vector<std::string> library_candidates(const std::vector<std::string>& names,
                                            const std::vector<std::string>& dirs,
                                            const std::string& override_path);

}  // namespace hvd::gpu
