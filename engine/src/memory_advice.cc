#include "memory_advice.h"

#include <sys/mman.h>

#include <cstdint>
#include <fstream>

namespace hvd {
namespace {

// The size of a transparent huge page, as the kernel says (2 MiB on x86-64).
uintptr_t huge_page_bytes() {
  static const uintptr_t bytes = [] {
    uintptr_t b = 0;
    std::ifstream("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") >> b;
    return b ? b : uintptr_t{2} << 20;
  }();
  return bytes;
}

}  // namespace

void advise_huge_pages(void* data, size_t bytes) {
  const uintptr_t huge = huge_page_bytes(), at = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (at + huge - 1) & ~(huge - 1), end = (at + bytes) & ~(huge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace hvd
