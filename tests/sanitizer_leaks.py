"""The leaks in a LeakSanitizer report that our code made (make test-asan).

A process with CPython, numpy and Open MPI in it ends with leaks that are theirs: CPython does not free
every object at exit, Open MPI and PMIx keep what they set up at init. A leak is ours when the code that
asked for the memory is ours: the first frame of its allocation stack past the allocator itself (malloc,
operator new, strdup, asprintf, libstdc++'s containers) is in the engine, the simulator or _C. The
others are left out, each proven someone else's by that frame.

    python tests/sanitizer_leaks.py LOG...   # prints our leaks; exit status 1 if there is one
"""
import re
import sys

OURS = ("/engine/src/", "/engine/sim/", "/engine/tests/", "/csrc/", "_C.cpython", "libjhvd_sim", "hvd::", "jhvd::")
# Frames that only carry out an allocation someone else asked for.
ALLOCATOR = re.compile(r"__interceptor_|\bmalloc\b|\bcalloc\b|\brealloc\b|operator new|\bstrn?dup\b|asprintf|"
                       r"posix_memalign|aligned_alloc|/usr/include/c\+\+/|libstdc\+\+|__gnu_cxx|std::")
LEAK = re.compile(r"^(Direct|Indirect) leak of .*allocated from:$")


def leaks(text: str) -> list:
    """Every leak of the report: its header line and its frames."""
    found, current = [], None
    for line in text.splitlines():
        line = line.strip()
        if LEAK.match(line):
            current = [line]
            found.append(current)
        elif current is not None and line.startswith("#"):
            current.append(line)
        else:
            current = None
    return found


def ours(leak: list) -> bool:
    """Whether the code that asked for this memory is ours."""
    for frame in leak[1:]:
        if any(mark in frame for mark in OURS):
            return True
        if not ALLOCATOR.search(frame):
            return False
    return False


def our_leaks(text: str) -> list:
    return ["\n    ".join(leak) for leak in leaks(text) if ours(leak)]


def main(paths: list) -> int:
    found = [leak for path in paths for leak in our_leaks(open(path, errors="replace").read())]
    for leak in found:
        print(leak)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
