#include "ring.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "collectives.h"

namespace hvd {
namespace {

std::vector<int64_t> firsts(const std::vector<int64_t>& counts) {  // each block's first element
  std::vector<int64_t> first(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) first[i] = first[i - 1] + counts[i - 1];
  return first;
}

// One reduce-scatter around the ring, of blocks that start at blocks[i] and are counts[i] (an int) long.
// At step k a rank passes its running sum of block me-k-1 to the next rank, and adds its own input to
// the running sum of block me-k-2 that the previous rank passed it; after n-1 steps that block is its own.
Status ring_pass(MPI_Comm comm, int me, const std::vector<const char*>& blocks, char* out,
                 const std::vector<int>& counts, MPI_Datatype type, MPI_Op op, size_t element_size,
                 std::vector<char>& scratch) {
  const int n = static_cast<int>(counts.size());
  const bool in_place = out == blocks[me];
  const int before = (me + n - 1) % n, after = (me + 1) % n;
  const size_t block = static_cast<size_t>(*std::max_element(counts.begin(), counts.end())) * element_size;
  if (scratch.size() < 2 * block) scratch.resize(2 * block);
  char* spare[2] = {scratch.data(), scratch.data() + block};
  const char* send = blocks[before];  // step 0 passes this rank's own input of that block
  int send_count = counts[before];
  for (int k = 0; k < n - 1; ++k) {
    const int b = (me + 2 * n - k - 2) % n;
    const bool last = k == n - 2;
    char* recv = last && !in_place ? out : spare[k % 2];
    Status s = mpi_status(MPI_Sendrecv(send, send_count, type, after, 0, recv, counts[b], type, before, 0, comm,
                                       MPI_STATUS_IGNORE), "MPI_Sendrecv");
    if (!s.ok()) return s;
    // The running sum absorbs this rank's block; in place, the last one goes into the block itself.
    s = last && in_place ? mpi_status(MPI_Reduce_local(recv, out, counts[b], type, op), "MPI_Reduce_local")
                         : mpi_status(MPI_Reduce_local(blocks[b], recv, counts[b], type, op), "MPI_Reduce_local");
    if (!s.ok()) return s;
    send = recv;
    send_count = counts[b];
  }
  return Status::Ok();
}

}  // namespace

Status ring_reduce_scatter(MPI_Comm comm, int me, const char* in, char* out, const std::vector<int64_t>& counts,
                           MPI_Datatype type, MPI_Op op, size_t element_size, int64_t max_count,
                           std::vector<char>& scratch) {
  const int n = static_cast<int>(counts.size());
  const std::vector<int64_t> first = firsts(counts);
  if (n == 1) {
    if (out != in && counts[0] > 0) std::memcpy(out, in, static_cast<size_t>(counts[0]) * element_size);
    return Status::Ok();
  }
  // Slice j of every block is its elements [j * max_count, (j + 1) * max_count): every rank makes the same
  // number of passes, some with empty slices.
  const int64_t largest = *std::max_element(counts.begin(), counts.end());
  const int64_t passes = std::max<int64_t>(1, (largest + max_count - 1) / max_count);
  std::vector<const char*> blocks(n);
  std::vector<int> slice(n);
  for (int64_t j = 0; j < passes; ++j) {
    const int64_t from = j * max_count;
    for (int i = 0; i < n; ++i) {
      blocks[i] = in + (first[i] + from) * static_cast<int64_t>(element_size);
      slice[i] = static_cast<int>(std::clamp<int64_t>(counts[i] - from, 0, max_count));
    }
    Status s = ring_pass(comm, me, blocks, out + from * static_cast<int64_t>(element_size), slice, type, op, element_size, scratch);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status ring_allreduce(MPI_Comm comm, int me, int n, const char* in, char* out, int count, MPI_Datatype type,
                      MPI_Op op, size_t element_size, std::vector<char>& scratch,
                      const std::function<void(char* block, int64_t count)>& finish) {
  std::vector<int64_t> counts(n);
  for (int i = 0; i < n; ++i) counts[i] = count / n + (i < count % n ? 1 : 0);
  const std::vector<int64_t> first = firsts(counts);
  Status s = ring_reduce_scatter(comm, me, in, out + first[me] * element_size, counts, type, op, element_size, INT_MAX, scratch);
  if (s.ok()) finish(out + first[me] * element_size, counts[me]);
  // Each rank passes on the reduced block it got last, starting with its own.
  const int before = (me + n - 1) % n, after = (me + 1) % n;
  for (int k = 0; k < n - 1 && s.ok(); ++k) {
    const int give = (me + n - k) % n, take = (me + 2 * n - k - 1) % n;
    s = mpi_status(MPI_Sendrecv(out + first[give] * element_size, static_cast<int>(counts[give]), type, after, 1,
                                out + first[take] * element_size, static_cast<int>(counts[take]), type, before, 1, comm,
                                MPI_STATUS_IGNORE),
                   "MPI_Sendrecv");
  }
  return s;
}

}  // namespace hvd
