"""Print the include dir and library of the libmpi that mpi4py loads, so the extension links the same one."""
import os
import sys

from mpi4py import MPI  # noqa: F401  (loads libmpi into this process)

with open("/proc/self/maps") as maps:
    libs = {line.split()[-1] for line in maps if "/libmpi.so" in line}
if not libs:
    sys.exit("mpi4py did not load a libmpi shared library")
lib = os.path.realpath(sorted(libs)[0])
prefix = os.path.dirname(os.path.dirname(lib))
for inc in (os.path.join(prefix, "include"), os.path.join(prefix, "include", "openmpi"),
            os.path.join(sys.prefix, "include")):
    if os.path.exists(os.path.join(inc, "mpi.h")):
        print(f"{inc};{lib}", end="")
        break
else:
    sys.exit(f"no mpi.h next to {lib}")
