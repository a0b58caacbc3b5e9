// How far each host's monotonic clock is from rank 0's. Hosts boot at different times, so their monotonic
// clocks (which the timeline uses) differ by hours; a trace that puts every rank's events on one axis needs
// each rank's offset.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace hvd {

// Rank 0's clock minus this rank's, in microseconds. Collective over the ranks of `local` (this host's ranks,
// local rank 0 first) and, among local rank 0s, over `cross` (one rank per host, rank 0 first). Exactly 0 on
// rank 0's host, which shares its clock; each other host's local rank 0 measures it in round trips to rank 0
// (the one that took least time counts, as in NTP) and tells its host's other ranks.
int64_t clock_offset_to_rank0(MPI_Comm local, MPI_Comm cross, int local_rank);

}  // namespace hvd
