#include "control_channel.h"

#include <climits>
#include <mutex>

#include "wire.h"

namespace hvd {
namespace {

// MPI tags are kind + kKinds * (epoch mod kEpochs): below 32768, the least MPI_TAG_UB MPI promises.
constexpr int kKinds = 8, kEpochs = 4096;

// Sends that had not completed when their engine stopped (a peer that stopped first had not read them):
// MPI may still read their buffers, so they live here until they complete, checked by later engines (whose
// channel on the same communicator receives those messages and drops them by their epoch).
std::mutex g_unfinished_mu;
std::list<std::pair<MPI_Request, std::vector<char>>> g_unfinished;

void reap_unfinished() {
  std::lock_guard<std::mutex> g(g_unfinished_mu);
  for (auto it = g_unfinished.begin(); it != g_unfinished.end();) {
    int done = 0;
    MPI_Test(&it->first, &done, MPI_STATUS_IGNORE);
    it = done ? g_unfinished.erase(it) : std::next(it);
  }
}

}  // namespace

ControlChannel::ControlChannel(MPI_Comm comm, int epoch) : comm_(comm), epoch_(epoch % kEpochs) {
  reap_unfinished();
}

ControlChannel::~ControlChannel() {
  reap();
  std::lock_guard<std::mutex> g(g_unfinished_mu);
  for (auto& f : inflight_) g_unfinished.emplace_back(f.req, std::move(f.bytes));
}

int ControlChannel::mpi_tag(int tag) const { return tag + kKinds * epoch_; }

void ControlChannel::send(int dest, int tag, std::vector<char> bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    throw WireError("engine message of " + std::to_string(bytes.size()) + " bytes is too long to send");
  inflight_.push_back({MPI_REQUEST_NULL, std::move(bytes)});
  auto& f = inflight_.back();
  MPI_Isend(f.bytes.data(), static_cast<int>(f.bytes.size()), MPI_BYTE, dest, mpi_tag(tag), comm_, &f.req);
}

std::optional<Message> ControlChannel::poll() {
  while (true) {
    int flag = 0;
    MPI_Status st;
    // Open MPI's probe matches what has already been taken in, then takes in what has arrived: a message
    // that arrived while this thread slept shows on the second probe, not a sleep later.
    for (int i = 0; i < 2 && !flag; ++i) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &st);
    if (!flag) return std::nullopt;
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    Message m;
    m.source = st.MPI_SOURCE;
    m.tag = st.MPI_TAG % kKinds;
    m.bytes.resize(count);
    MPI_Recv(m.bytes.data(), count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm_, MPI_STATUS_IGNORE);
    if (st.MPI_TAG / kKinds == epoch_) return m;  // else an earlier engine's: dropped
  }
}

bool ControlChannel::pending(int tag) const {
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, mpi_tag(tag), comm_, &flag, MPI_STATUS_IGNORE);
  return flag != 0;
}

void ControlChannel::reap() {
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    int done = 0;
    MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
    it = done ? inflight_.erase(it) : std::next(it);
  }
}

}  // namespace hvd
