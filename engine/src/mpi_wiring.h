// An engine's wiring on real MPI ranks.
#pragma once

#include <mpi.h>

#include "engine_wiring.h"

namespace hvd {

// Collective over `comm` (MPI initialised with MPI_THREAD_MULTIPLE): the engine's communicators
// (comm_pool.h), the topology, the control channel on a new epoch, each rank's trace origin, and the
// MPI and NCCL data plane.
EngineWiring mpi_wiring(MPI_Comm comm);

}  // namespace hvd
