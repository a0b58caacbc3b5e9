// What an engine runs on: its place in the job, the transport to the other ranks' engine threads, and
// the data plane that runs its collectives. mpi_wiring.h makes them over MPI; the engine's C++ tests
// make them in one process.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "config.h"
#include "data_plane.h"
#include "transport.h"

namespace hvd {

struct Topology {
  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  bool homogeneous = true;  // every host runs as many of the job's ranks (Horovod's is_homogeneous)
  int host_cores = 1;       // the cores this host's ranks may use together (thread_placement.h)
};

struct EngineWiring {
  Topology topology;
  std::unique_ptr<Transport> transport;
  // Makes the data plane once the engine exists: `abandoned` is true when an abort must cut a running
  // collective short (this rank's abort, or a peer's notice that has arrived).
  std::function<std::unique_ptr<DataPlane>(const Config&, std::function<bool()> abandoned)> make_data_plane;
  MPI_Comm data_comm = MPI_COMM_NULL;  // the global process set's communicator
  MPI_Comm admin = MPI_COMM_NULL;      // new process sets' parent; MPI_COMM_NULL: sets get no communicator
  std::vector<int64_t> origins_us;     // rank 0: each rank's trace origin, on that rank's own clock
  std::function<void(bool)> mpi_yield;  // MPI's yield-when-idle switch (mpi_yield.h); empty: none to turn
};

}  // namespace hvd
