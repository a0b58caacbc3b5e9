// Where the engine thread runs: HOROVOD_THREAD_AFFINITY's core for this local rank, and how many
// cores this host's ranks may use (waiters poll only where each local rank can have one).
#pragma once

#include <mpi.h>

#include <vector>

namespace hvd {

// The cores this process may run on.
int usable_cores();

// The cores the ranks of `local` (one host's) may run on together: the union of their affinities, so ranks
// bound each to its own core (mpiexec --bind-to core, srun --cpu-bind) count every one. Collective on `local`.
int host_cores(MPI_Comm local);

// Pins the calling thread to the core `cores` names for `local_rank`. A list too short for the host's
// ranks, or a core this process may not use, leaves it unpinned with a warning: a rank must not fail
// (and leave its peers waiting) over placement.
void pin_thread(const std::vector<int>& cores, int local_rank, int local_size);

}  // namespace hvd
