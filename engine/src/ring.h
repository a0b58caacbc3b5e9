// Reductions around a ring of a communicator's ranks, from point-to-point messages: in each phase a
// rank sends (n-1)/n of the data once, to the next rank, and reduces what the previous one sent.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "status.h"

namespace hvd {

// Rank `me` of `comm` gets in `out` the reduction of block `me` of every rank's `in`, where block i
// is counts[i] elements long. `out` may be `in`'s own block. `op` must be commutative. Blocks of more than
// `max_count` elements go around the ring in slices of at most that many, so every MPI count fits an int.
// `scratch` grows to two slices and is kept by the caller: memory fresh from the system would cost a page
// fault per page.
Status ring_reduce_scatter(MPI_Comm comm, int me, const char* in, char* out, const std::vector<int64_t>& counts,
                           MPI_Datatype type, MPI_Op op, size_t element_size, int64_t max_count,
                           std::vector<char>& scratch);

// Every rank's `out` becomes the reduction of all ranks' `in` (which may be `out`): a ring reduce-scatter,
// then a ring allgather. `finish` (an elementwise step such as an Average's division) runs on each rank's
// own reduced block before the allgather passes it on, so each rank finishes 1/n of the data, while it is
// still in cache.
Status ring_allreduce(MPI_Comm comm, int me, int n, const char* in, char* out, int count, MPI_Datatype type,
                      MPI_Op op, size_t element_size, std::vector<char>& scratch,
                      const std::function<void(char* block, int64_t count)>& finish);

}  // namespace hvd
