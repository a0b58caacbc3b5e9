// The per-process engine: one background thread owns all communication. Callers enqueue
// named operations from any thread and wait on handles; rank 0 also coordinates.
//
// Its methods live in files named for their concern: engine.cc (start, stop, process sets),
// enqueue.cc (the caller-side checks), engine_loop.cc (the loop, message dispatch, negotiation and
// execution), stop_protocol.cc (abort and shutdown across ranks), engine_timeline.cc (events, the
// trace file, autotuning's marks). It reaches other ranks through engine_wiring.h's transport and
// data plane, so tests can run several engines in one process without MPI.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "autotuner.h"
#include "config.h"
#include "coordinator.h"
#include "data_plane.h"
#include "engine_wiring.h"
#include "metrics.h"
#include "mpi_yield.h"
#include "process_sets.h"
#include "progress.h"
#include "response_cache.h"
#include "stall_inspector.h"
#include "tensor_entry.h"
#include "timeline.h"
#include "trace_writer.h"
#include "transport.h"

namespace hvd {

// Thrown by enqueue and the process-set calls for problems the caller can fix.
struct InvalidArgument : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

class Engine {
 public:
  // Starts on duplicates of `comm`; MPI must already be initialised with MPI_THREAD_MULTIPLE.
  Engine(MPI_Comm comm, Config config);
  // Starts on `wiring` (mpi_wiring.h, or the tests' in-process transport and data plane).
  Engine(EngineWiring wiring, Config config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Topology& topology() const { return topo_; }
  const Metrics& metrics() const { return metrics_; }

  // Queues operations; each handle completes on the engine thread. A group's entries reach the engine
  // thread at once, so they negotiate and fuse together; when one of them is invalid, none is queued.
  // `caller_waits`: the caller waits for the results at once (a blocking call), so a lone operation's
  // waiter runs its steps and the engine thread is not woken for it (Handle::defer_wake).
  std::vector<std::shared_ptr<Handle>> enqueue(std::vector<TensorEntry> group, bool caller_waits = false);
  std::shared_ptr<Handle> enqueue(TensorEntry entry);
  // This rank's call of an operation failed its own checks (a bad argument) before reaching enqueue: tells the
  // other members of the set, whose operations named `names` then fail on every rank, giving `why`, instead
  // of waiting for this rank. The names stay in flight here until every member has reached them: the handles
  // returned complete then (with that error). None outside a set of two or more, or for a name already in
  // flight on this rank.
  std::vector<std::shared_ptr<Handle>> refuse(const OpSpec& spec, const std::vector<std::string>& names,
                                              const std::string& why);
  // Stops every rank's engine: pending and later operations fail with `reason`.
  void abort(const std::string& reason);
  // Stops this engine (and, as in Horovod, the job's engines) and joins the thread.
  void shutdown();
  // Why the engine stopped; Ok while running.
  Status stop_status() const;

  // Collective over the members of `ranks` (all ranks call it in the same order).
  int32_t add_process_set(std::vector<int> ranks);
  // Every rank calls it. This rank's operations still pending in the set fail, with a message that
  // names the set; the set's communicator is freed on the engine thread, before this returns.
  void remove_process_set(int32_t id);

  // Rank 0 writes the job's events to `path`; `mark_cycles` adds a mark for each engine cycle that ran
  // collectives (Horovod's mark_cycles), on every rank, until stop_timeline().
  void start_timeline(const std::string& path, bool mark_cycles);
  // Rank 0 writes its own events so far, then closes the file; another rank's events that reach it after
  // that are not written (they are sent on every forwarding period).
  void stop_timeline();
  std::vector<Event> drain_events(uint64_t since, size_t max, uint64_t* dropped) const {
    return events_.drain(since, max, dropped);
  }

 private:
  enum class State { Running, Draining, Stopped };

  // Throws InvalidArgument for an entry this rank cannot run; `set` holds the last set looked up (a group's
  // tensors are of one set, whose lookup takes the table's lock), and is replaced for another.
  void check(const TensorEntry& e, std::shared_ptr<const ProcessSet>& set) const;
  // enqueue() once its checks passed: the handles, the names' reservation and the queue.
  std::vector<std::shared_ptr<Handle>> queue(std::vector<TensorEntry> group, bool caller_waits);
  void loop();
  // One pass of the loop, on the engine thread or a waiter's (see progress.h): whether it did work. GPU
  // work runs on either (GpuCollectives::run leaves the thread's current device as it found it).
  Progress::Stepped step(bool by_waiter);
  bool work();                          // step() without its bookkeeping
  void idle(int64_t& next_poll_us);     // the engine thread, between steps that found nothing to do
  void update_mpi_yield(int64_t bytes);
  void on_engine_error(const std::string& what);  // anything a step threw: an abort
  void submit(std::vector<TensorEntry> fresh);
  std::vector<char> carried_input(const TensorEntry& e, const ProcessSet& set, int64_t& budget) const;
  void remove_sets(const std::vector<int32_t>& ids);  // engine thread: what remove_process_set asked
  void free_comms();  // once stopped: the channel, the GPU state and the process sets' communicators
  void dispatch(Message& m);
  bool act_now(int tag);  // after a message of `tag`: stop taking messages this step
  void coordinate(bool got_requests);
  void distribute(std::vector<Response> responses);
  void execute(const Response& r);
  // A response that fails whole calls (Response::whole_group): adds to found_ and entries_ this rank's other
  // entries of the calls of those found_ holds, which fail with them.
  void add_rest_of_calls(int32_t set);
  bool joined(int32_t set) const;  // this rank waits in a join of `set` (OpType::Join)
  TensorEntry stand_in(const Response& r, size_t i) const;
  Status finish_join(const Response& r, std::vector<TensorEntry*>& entries);
  Status run(const Response& r, std::vector<TensorEntry*>& entries, const ProcessSet& set);
  void begin_stop(const Status& s);   // this rank starts a stop (abort or shutdown)
  void finish_stop();                 // fail what is left; the loop ends
  static Status left_unsubmitted(Status s);  // a stop's status as it fails an op some rank never queued
  void periodic(int64_t now);
  void forward_timeline();
  void forward_timeline_locked();  // with timeline_mu_ held
  // Adds a timeline event; `end` defaults to now, and end == start makes it an instant mark.
  void record(Phase p, const std::string& name, const char* op, int64_t start, int64_t bytes, int64_t end = -1);
  void fail(TensorEntry& e, const Status& s);
  void apply(const TunedParams& p);  // rank 0: fusion threshold and cycle time from now on
  void autotune(const Response& r, const std::vector<TensorEntry*>& entries);  // rank 0: a response's measure
  bool abandoned() const;  // a running collective must stop: this rank aborts, or a peer's abort has arrived

  Config config_;
  Topology topo_;
  MPI_Comm admin_ = MPI_COMM_NULL;  // process sets' parent communicator
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<DataPlane> data_plane_;
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  std::unique_ptr<Autotuner> tuner_;          // rank 0, with HOROVOD_AUTOTUNE=1
  ProcessSetTable sets_;
  std::atomic<int32_t> next_set_id_{1};
  ResponseCache cache_;
  Metrics metrics_;
  EventLog events_;
  StallInspector stalls_;
  std::atomic<int> gpu_device_{-1};           // the one CUDA device of this rank's GPU tensors

  // Shared with callers.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TensorEntry> queue_;
  std::unordered_set<TensorKey, TensorKeyHash> live_names_;
  std::vector<int32_t> sets_to_remove_;  // remove_process_set waits on cv_ until the engine thread took them
  uint64_t sets_removed_ = 0, sets_remove_asked_ = 0;
  Status stop_status_;
  bool stop_requested_ = false;
  std::atomic<State> state_{State::Running};
  std::shared_ptr<Progress> progress_;         // the step lock, shared with the handles' waiters
  std::atomic<int64_t> last_work_us_{0};       // when a step last did work

  // Whoever runs a step only (see progress.h).
  std::unordered_map<TensorKey, TensorEntry, TensorKeyHash> table_;
  // execute()'s key to look up in table_, and its lists of the tensors found, reused
  TensorKey probe_;
  std::vector<std::unordered_map<TensorKey, TensorEntry, TensorKeyHash>::iterator> found_;
  std::vector<TensorEntry*> entries_;
  std::vector<Response> exec_queue_;
  std::vector<Response> running_;  // the step's responses, taken from exec_queue_
  std::vector<std::vector<size_t>> per_rank_;  // distribute()'s lists, reused
  bool final_received_ = false;
  int64_t drain_deadline_us_ = 0;
  int64_t last_periodic_us_ = 0;
  int64_t cycle_time_us_ = 0;  // rank 0's: config_.cycle_time_ms, or the autotuner's
  int64_t wait_spin_us_ = 0;   // how long a thread waiting for one of this engine's results polls first
  std::function<void(bool)> mpi_yield_;  // see mpi_yield.h; empty: MPI's choice is left as it is
  CoreContention contention_;            // of the engine thread's core
  bool contended_ = false;               // as the engine thread last sampled it
  std::atomic<bool> in_flight_{false};   // after the last step: see idle()
  bool woken_ = false;                   // under mu_: a waiter handed its operation back (Progress::wake)

  std::mutex timeline_mu_;
  std::unique_ptr<TraceWriter> writer_;  // rank 0
  bool forwarding_ = false;               // other ranks: send events to rank 0
  std::atomic<bool> mark_cycles_{false};
  uint64_t forwarded_seq_ = 0;
  std::vector<int64_t> origins_us_;  // rank 0: each rank's trace origin, on that rank's own clock

  std::thread thread_;
};

}  // namespace hvd
