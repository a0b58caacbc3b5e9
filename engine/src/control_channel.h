// Non-blocking point-to-point messages between engine threads (requests, responses, aborts,
// timeline batches). Sends never block, so two ranks sending to each other cannot deadlock.
#pragma once

#include <mpi.h>

#include <list>
#include <optional>
#include <vector>

namespace hvd {

// kAbort and kShutdown carry the same stop notice; only an abort may cut short a collective
// already running, and the tags let a waiting rank see one without taking it (pending).
enum Tag : int { kRequests = 1, kResponses = 2, kAbort = 3, kTimeline = 4, kShutdown = 5 };

struct Message {
  int source = -1;
  int tag = 0;  // one of Tag
  std::vector<char> bytes;
};

class ControlChannel {
 public:
  // `epoch` tells this engine's messages from those an earlier engine on the same ranks left
  // unread (a peer's last notices can outlive the engine they were meant for): those are dropped.
  ControlChannel(MPI_Comm comm, int epoch);
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Throws WireError for a message too long for one MPI send.
  void send(int dest, int tag, std::vector<char> bytes);
  std::optional<Message> poll();
  // Whether a message with `tag` has arrived, left for poll() to take.
  bool pending(int tag) const;
  // Frees the buffers of sends that have completed.
  void reap();
  bool idle() const { return inflight_.empty(); }

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
