#include "control_channel.h"

namespace hvd {

ControlChannel::~ControlChannel() {
  // Sends still in flight keep their buffers for the life of the process: MPI may yet read them.
  static std::list<Inflight> unfinished;
  unfinished.splice(unfinished.end(), inflight_);
}

void ControlChannel::send(int dest, int tag, std::vector<char> bytes) {
  inflight_.push_back({MPI_REQUEST_NULL, std::move(bytes)});
  auto& f = inflight_.back();
  MPI_Isend(f.bytes.data(), static_cast<int>(f.bytes.size()), MPI_BYTE, dest, tag, comm_, &f.req);
}

std::optional<Message> ControlChannel::poll() {
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
  m.tag = st.MPI_TAG;
  m.bytes.resize(count);
  MPI_Recv(m.bytes.data(), count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm_, MPI_STATUS_IGNORE);
  return m;
}

bool ControlChannel::pending(int tag) const {
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, MPI_STATUS_IGNORE);
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
