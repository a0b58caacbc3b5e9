// How an engine thread reaches the other ranks' engine threads: the control messages (requests,
// responses, stop notices, timeline batches). ControlChannel carries them over MPI; the engine's
// C++ tests connect several engines in one process with an in-process transport.
#pragma once

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

class Transport {
 public:
  virtual ~Transport() = default;
  // Never blocks, so two ranks sending to each other cannot deadlock. Throws WireError for a message
  // the transport cannot carry.
  virtual void send(int dest, int tag, std::vector<char> bytes) = 0;
  // The next message that has arrived, if any.
  virtual std::optional<Message> poll() = 0;
  // Whether a message with `tag` has arrived, left for poll() to take (any thread).
  virtual bool pending(int tag) const = 0;
  // Frees the buffers of sends that have completed.
  virtual void reap() = 0;
  // No send is still in flight.
  virtual bool idle() const = 0;
};

}  // namespace hvd
