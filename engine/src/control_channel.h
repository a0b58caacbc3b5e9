// The engine's transport over MPI: non-blocking point-to-point messages between engine threads
// (requests, responses, aborts, timeline batches) on the engine's control communicator.
#pragma once

#include <mpi.h>

#include <list>
#include <optional>
#include <vector>

#include "transport.h"

namespace hvd {

class ControlChannel final : public Transport {
 public:
  // `epoch` tells this engine's messages from those an earlier engine on the same ranks left
  // unread (a peer's last notices can outlive the engine they were meant for): those are dropped.
  ControlChannel(MPI_Comm comm, int epoch);
  ~ControlChannel() override;
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Throws WireError for a message too long for one MPI send.
  void send(int dest, int tag, std::vector<char> bytes) override;
  std::optional<Message> poll() override;
  bool pending(int tag) const override;
  void reap() override;
  bool idle() const override { return inflight_.empty(); }

 private:
  struct Inflight {
    MPI_Request req;
    std::vector<char> bytes;
  };
  int mpi_tag(int tag) const;

  MPI_Comm comm_;
  int epoch_;
  std::list<Inflight> inflight_;
};

}  // namespace hvd
