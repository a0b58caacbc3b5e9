#include "mpi_wiring.h"

#include <stdexcept>

#include "clock.h"
#include "clock_sync.h"
#include "comm_pool.h"
#include "control_channel.h"
#include "mpi_data_plane.h"
#include "mpi_yield.h"
#include "thread_placement.h"

namespace hvd {
namespace {

// Engines started in this process so far: with the other ranks' count, the new engine's epoch.
int g_engines_started = 0;

}  // namespace

EngineWiring mpi_wiring(MPI_Comm comm) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    throw std::runtime_error("MPI was initialised without MPI_THREAD_MULTIPLE support");
  EngineWiring w;
  const EngineComms comms = engine_comms(comm);
  w.data_comm = comms.data;
  w.admin = comms.admin;
  Topology& t = w.topology;
  MPI_Comm_rank(w.admin, &t.rank);
  MPI_Comm_size(w.admin, &t.size);
  MPI_Comm local, cross;
  MPI_Comm_split_type(w.admin, MPI_COMM_TYPE_SHARED, t.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &t.local_rank);
  MPI_Comm_size(local, &t.local_size);
  // The engine's communicators outlive it (comm_pool.h), so each engine on them takes a new epoch: every
  // rank's count of engines agrees unless some started engines on other communicators, and the largest
  // is one none of them has used on these. The same MAX tells whether every host runs as many ranks (the
  // largest local size, and minus the smallest).
  int agreed[3] = {g_engines_started, t.local_size, -t.local_size};
  MPI_Allreduce(MPI_IN_PLACE, agreed, 3, MPI_INT, MPI_MAX, w.admin);
  const int epoch = agreed[0];
  g_engines_started = epoch + 1;
  t.homogeneous = agreed[1] == -agreed[2];
  t.host_cores = host_cores(local);
  MPI_Comm_split(w.admin, t.local_rank, t.rank, &cross);
  MPI_Comm_rank(cross, &t.cross_rank);
  MPI_Comm_size(cross, &t.cross_size);
  const int64_t clock_offset_us = clock_offset_to_rank0(local, cross, t.local_rank);
  MPI_Comm_free(&local);
  MPI_Comm_free(&cross);
  w.transport = std::make_unique<ControlChannel>(comms.ctrl, epoch);
  // A common time origin for the trace: now on rank 0's clock, and where that is on each rank's own clock.
  int64_t origin_us = now_us();
  MPI_Bcast(&origin_us, 1, MPI_INT64_T, 0, w.admin);
  origin_us -= clock_offset_us;
  if (t.rank == 0) w.origins_us.resize(t.size);
  MPI_Gather(&origin_us, 1, MPI_INT64_T, w.origins_us.data(), 1, MPI_INT64_T, 0, w.admin);
  w.mpi_yield = mpi_yield_switch();
  const int rank = t.rank;
  w.make_data_plane = [rank](const Config& config, std::function<bool()> abandoned) -> std::unique_ptr<DataPlane> {
    return std::make_unique<MpiDataPlane>(config, rank, std::move(abandoned));
  };
  return w;
}

}  // namespace hvd
