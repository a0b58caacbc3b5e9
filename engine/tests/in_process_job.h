// Several engines in one process, one per rank, connected without MPI: an in-process transport
// carries their control messages (requests, responses, stop notices, timeline batches) and an
// in-process data plane runs their float32 sum allreduces, so the engine's loop, negotiation, stop
// protocol and stall checks are tested as they run on real ranks, each engine on its own thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine.h"

namespace hvd::testing {

// The mailboxes of the job's engines: what one rank sends, the destination polls.
class Mailboxes {
 public:
  explicit Mailboxes(int size) : boxes_(size) {}
  void post(int dest, Message m);
  std::optional<Message> take(int rank);
  bool pending(int rank, int tag) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::deque<Message>> boxes_;
};

class InProcessTransport final : public Transport {
 public:
  InProcessTransport(std::shared_ptr<Mailboxes> boxes, int rank) : boxes_(std::move(boxes)), rank_(rank) {}
  void send(int dest, int tag, std::vector<char> bytes) override;
  std::optional<Message> poll() override { return boxes_->take(rank_); }
  bool pending(int tag) const override { return boxes_->pending(rank_, tag); }
  void reap() override {}
  bool idle() const override { return true; }

 private:
  std::shared_ptr<Mailboxes> boxes_;
  int rank_;
};

// Where the members of a collective meet: the k-th response each member runs in a process set is one
// collective, so each member's k-th must name the same tensors.
class MeetingPoint {
 public:
  // Adds `input` (this member's float32 buffers, concatenated) to round (set, k); once every one of
  // `members` has come, returns their sum, or an error when their responses differ. Returns Aborted if
  // `abandoned` turns true while waiting.
  Status meet(int32_t set, uint64_t k, int members, const std::vector<std::string>& names,
              const std::vector<float>& input, std::vector<float>* sum, const std::function<bool()>& abandoned);

 private:
  struct Round {
    std::vector<std::string> names;
    std::vector<float> sum;
    int arrived = 0, left = 0;
    bool mismatch = false;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int32_t, uint64_t>, Round> rounds_;
};

// A rank's data plane: float32 sum allreduces through the meeting point; other ops only meet.
class InProcessDataPlane final : public DataPlane {
 public:
  InProcessDataPlane(std::shared_ptr<MeetingPoint> meeting, std::function<bool()> abandoned)
      : meeting_(std::move(meeting)), abandoned_(std::move(abandoned)) {}
  Status run(const Response& r, std::vector<TensorEntry*>& entries, const ProcessSet& set,
             const Span& span) override;
  void release_set(int32_t id) override {}
  // The names of each response this rank ran, in order.
  std::vector<std::vector<std::string>> ran() const;

 private:
  std::shared_ptr<MeetingPoint> meeting_;
  std::function<bool()> abandoned_;
  std::map<int32_t, uint64_t> rounds_;  // responses run so far, per process set
  mutable std::mutex mu_;
  std::vector<std::vector<std::string>> ran_;
};

// `size` engines with `config`, started in rank order; destroyed (shut down) in reverse order.
class InProcessJob {
 public:
  InProcessJob(int size, const Config& config);
  ~InProcessJob();
  Engine& operator[](int rank) { return *engines_[rank]; }
  int size() const { return static_cast<int>(engines_.size()); }
  InProcessDataPlane& data_plane(int rank) { return *planes_[rank]; }
  // Delivers a message to `dest` as if `source` had sent it (for malformed messages).
  void inject(int source, int dest, int tag, std::vector<char> bytes);

 private:
  std::shared_ptr<Mailboxes> boxes_;
  std::shared_ptr<MeetingPoint> meeting_;
  std::vector<InProcessDataPlane*> planes_;
  std::vector<std::unique_ptr<Engine>> engines_;
};

// An allreduce (float32 sum) of `data` into `out` on the global set.
TensorEntry allreduce(const std::string& name, const std::vector<float>& data, std::vector<float>* out);
// Waits for `h` and returns its status; an Internal error if it has not completed within a minute (a hang).
Status finish(const std::shared_ptr<Handle>& h);
// Waits until `done` is true, polling; false if it is not within a minute (a hang, not a slow machine).
bool eventually(const std::function<bool()>& done);

}  // namespace hvd::testing
