// Large result buffers on transparent huge pages, as numpy asks for its large arrays. Where the kernel gives
// huge pages only to memory that asks for them (transparent_hugepage "madvise", the default of many
// distributions), a new buffer past glibc's largest mmap threshold (32 MiB) comes fresh from the system and
// its first writes fault it in 4 KiB at a time: a 64 MiB result cost more to fault in than to reduce.
#pragma once

#include <cstddef>

namespace hvd {

// Buffers of this size and more are worth the advice (numpy's threshold).
constexpr size_t kHugePagesFrom = size_t{4} << 20;

// Asks for huge pages for the whole ones inside [data, data + bytes), before anything is written there.
// Advice only: a kernel without transparent huge pages changes nothing.
void advise_huge_pages(void* data, size_t bytes);

}  // namespace hvd
