// Reductions around a ring of a communicator's ranks, from point-to-point messages: in each phase a
// rank sends (n-1)/n of the data once, to the next rank, and reduces what the previous one sent.
#pragma once

#include <mpi.h>

#include <vector>

#include "status.h"

namespace hvd {

// Rank `me` of `comm` gets in `out` the reduction of block `me` of every rank's `in`, where block i
// is counts[i] elements long. `out` may be `in`'s own block. `op` must be commutative. `scratch` grows to
// two blocks and is kept by the caller: memory fresh from the system would cost a page fault per page.
Status ring_reduce_scatter(MPI_Comm comm, int me, const char* in, char* out, const std::vector<int>& counts,
                           MPI_Datatype type, MPI_Op op, size_t element_size, std::vector<char>& scratch);

// Every rank's `out` becomes the reduction of all ranks' `in` (which may be `out`): a ring reduce-scatter,
// then a ring allgather.
Status ring_allreduce(MPI_Comm comm, int me, int n, const char* in, char* out, int count, MPI_Datatype type,
                      MPI_Op op, size_t element_size, std::vector<char>& scratch);

}  // namespace hvd
