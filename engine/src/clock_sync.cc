#include "clock_sync.h"

#include <limits>

#include "clock.h"

namespace hvd {
namespace {

constexpr int kRoundTrips = 8;
constexpr int kTag = 0;  // `cross` is a communicator of its own: no other message shares it

// Rank 0 answers each other host's local rank 0 in turn, with its clock.
void serve(MPI_Comm cross, int hosts) {
  for (int peer = 1; peer < hosts; ++peer) {
    for (int i = 0; i < kRoundTrips; ++i) {
      int64_t asked = 0;
      MPI_Recv(&asked, 1, MPI_INT64_T, peer, kTag, cross, MPI_STATUS_IGNORE);
      const int64_t now = now_us();
      MPI_Send(&now, 1, MPI_INT64_T, peer, kTag, cross);
    }
  }
}

// Rank 0's clock at the middle of the quickest round trip, minus this clock then.
int64_t measure(MPI_Comm cross) {
  int64_t best_trip = std::numeric_limits<int64_t>::max(), offset = 0;
  for (int i = 0; i < kRoundTrips; ++i) {
    const int64_t sent = now_us();
    int64_t theirs = 0;
    MPI_Send(&sent, 1, MPI_INT64_T, 0, kTag, cross);
    MPI_Recv(&theirs, 1, MPI_INT64_T, 0, kTag, cross, MPI_STATUS_IGNORE);
    const int64_t back = now_us();
    if (back - sent < best_trip) {
      best_trip = back - sent;
      offset = theirs - (sent + back) / 2;
    }
  }
  return offset;
}

}  // namespace

int64_t clock_offset_to_rank0(MPI_Comm local, MPI_Comm cross, int local_rank) {
  int64_t offset = 0;
  if (local_rank == 0) {
    int host = 0, hosts = 1;
    MPI_Comm_rank(cross, &host);
    MPI_Comm_size(cross, &hosts);
    if (host == 0) serve(cross, hosts);
    else offset = measure(cross);
  }
  MPI_Bcast(&offset, 1, MPI_INT64_T, 0, local);
  return offset;
}

}  // namespace hvd
