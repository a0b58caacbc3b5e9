// The data phase for GPU tensors: NCCL on the engine's own CUDA stream, after waiting for each
// tensor's producer stream; small allreduces fused through a device buffer, copied in and out by
// one kernel launch (copy_kernel.h) or, without it, the runtime's copies; host staging through
// the MPI collectives where NCCL cannot run; hierarchical allreduce (hierarchical.h) for sets
// across hosts when asked for.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "collectives.h"
#include "gpu/batched_copy.h"
#include "gpu/copy_kernel.h"
#include "gpu/device_memory.h"
#include "gpu/gpu_runtime.h"
#include "gpu/nccl_mapping.h"
#include "gpu/set_communicator.h"

namespace hvd::gpu {

class GpuCollectives {
 public:
  // A timeline span with its own op label (e.g. "nccl_allreduce") and end.
  using Span = std::function<void(Phase, const char* op, int64_t start_us, int64_t end_us)>;

  // `abandoned` is polled while waiting on the GPU: true when an abort must cut the op short.
  GpuCollectives(const Runtime& rt, CommOptions options, std::function<bool()> abandoned);
  ~GpuCollectives();
  GpuCollectives(const GpuCollectives&) = delete;
  GpuCollectives& operator=(const GpuCollectives&) = delete;

  // Runs one negotiated response whose tensors are on this rank's GPU, on the thread running the engine's
  // step (the engine thread or a waiter's), whose current device it leaves as it was.
  Status run(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es, const Span& span);
  // Drops the communicator of a removed process set (any thread; no op of that set in flight).
  void release_set(int32_t id);

 private:
  enum Mark { kStart, kReady, kCopiedIn, kReduced, kDone, kMarks };

  // run() with the thread's current device `current` (-1: unknown).
  Status run_on_device(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es, const Span& span,
                       int current);
  // This rank's GPU `device` made current (where `current` is another), its stream, events and buffers made on
  // first use.
  Status prepare(int device, int current);
  // A joined rank's stand-in (TensorEntry::stand_in) from its host buffer into device memory, queued on
  // the stream ahead of the op.
  Status upload_stand_in(TensorEntry& e);
  SetCommunicator* communicator(CollectiveContext& c, int device, const Status& local, Status* s);
  // In nccl_collectives.cc, one per op: sizes, results and buffers first (every member agrees that it
  // has them), then the work queued in order on the engine's stream, then the timeline spans from the
  // device's own timestamps.
  Status nccl_allreduce(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es, SetCommunicator& sc,
                        const Status& local, const Span& span);
  Status nccl_allgather(CollectiveContext& c, const Response& r, TensorEntry& e, SetCommunicator& sc,
                        const Status& local, const Span& span);
  Status nccl_broadcast(CollectiveContext& c, const Response& r, TensorEntry& e, SetCommunicator& sc,
                        const Status& local, const Span& span);
  Status nccl_alltoall(CollectiveContext& c, const Response& r, TensorEntry& e, SetCommunicator& sc,
                       const Status& local, const Span& span);
  Status nccl_reducescatter(CollectiveContext& c, const Response& r, TensorEntry& e, SetCommunicator& sc,
                            const Status& local, const Span& span);
  // An allreduce (or, with `scatter`, a reduce-scatter) of `count` elements queued on the stream.
  ncclResult_t nccl_reduce(const NcclReduction& red, DataType dtype, const void* in, void* out, size_t count,
                           bool scatter, ncclComm_t comm);
  // After an op's work was queued: its completion (an NCCL call that failed aborts the communicator,
  // since peers may be inside the collective) and its spans; `copies`: results copied out after
  // kReduced; `copied_in`: a copy-in phase between kReady and kCopiedIn.
  Status finish_nccl(const Response& r, SetCommunicator& sc, ncclResult_t res, bool copies, bool copied_in,
                     const Span& span);
  // In hierarchical.cc: reduce-scatter within the host, MPI across hosts, allgather within the host.
  Status run_hierarchical(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es, SetCommunicator& sc,
                          const NcclReduction& red, const Status& local, const Span& span);
  Status run_staged(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es, const Status& local,
                    const Span& span);
  // Every member learns whether every member is ready, so a failure on one is an error on all.
  static Status agree(const ProcessSet& set, const Status& local);
  // Queueing work on the stream: a call that fails is remembered (queued), and fails the op
  // once the work that was queued is done (wait_done).
  // kStart, a wait for each producer stream still running the work that made a tensor (waited_),
  // then kReady (kStart when none waited); whether the op's marks are device events (device_times_).
  void begin(const std::vector<TensorEntry*>& es);
  // A timing event recorded on the stream at `m`, or where the op is timed on the host, the host's clock now.
  void mark(Mark m);
  // `m` is the same point as `as`: nothing was queued between them, so no event is recorded.
  void same(Mark m, Mark as) { at_[m] = at_[as]; }
  // Device-to-device batches go through the copy kernel when it is loaded, others through the runtime.
  void copy(const BatchedCopy& b);
  bool kernel_copies(const BatchedCopy& b) const;
  // The copy kernel's launches for `batches` (an op's copies in and out) made ready, their tables
  // uploaded, before the op's device work begins; copy() then queues them (CopyKernel::ready).
  void ready_copies(const std::vector<const BatchedCopy*>& batches);
  // Where each tensor starts in the fusion buffer, 16-byte aligned for the kernel's widest loads (a
  // multiple of every element size, so the gaps are reduced like the data, and never read); the end.
  static int64_t fusion_layout(const std::vector<TensorEntry*>& es, std::vector<int64_t>* offsets);
  // The copies of `es` into the fusion buffer `buf` and of the results out to `outs`: listed before
  // the device work starts, so that none of this host work holds up the stream between the copies.
  static void fused_copies(char* buf, const std::vector<int64_t>& offsets, const std::vector<TensorEntry*>& es,
                           const std::vector<void*>& outs, BatchedCopy* in, BatchedCopy* out);
  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);  // nothing for 0 bytes
  void queued(Status s);
  Status wait_done(Mark m, SetCommunicator* sc);
  // Start time (engine clock) of `m`, given that `last` completed at `end_us`.
  int64_t start_of(Mark m, Mark last, int64_t end_us) const;
  // The device result for `e`: its own output, or a new allocation handed to its handle.
  void* output_for(TensorEntry& e, size_t bytes, std::vector<int64_t> shape, Status* s);
  Status cuda_status(cudaError_t e, const char* what) const;
  Status nccl_status(ncclResult_t r, const char* what) const;

  const Runtime& rt_;
  CommOptions options_;
  std::function<bool()> abandoned_;
  int device_ = -1;
  bool batch_copies_;  // CommOptions::batch_copies, until the runtime refuses a batch
  std::unique_ptr<CopyKernel> kernel_;  // loaded in prepare() when batch_copies
  Status queue_error_;  // the first call of the current op that could not queue its work
  bool waited_ = false;  // whether the current op's stream waits for a producer's (begin)
  bool device_times_ = true;  // whether the current op's marks are timing events, or host times (begin)
  cudaStream_t stream_ = nullptr;
  std::array<cudaEvent_t, kMarks> marks_{};
  std::array<Mark, kMarks> at_{};  // the mark whose event stands for each one in the current op
  std::array<int64_t, kMarks> host_at_{};  // engine clock at each mark, where the op is timed on the host
  cudaEvent_t done_ = nullptr;  // without timing: recorded when an op timed on the host waits to be done
  std::unique_ptr<GrowableBuffer> fusion_, staging_;
  std::mutex sets_mu_;
  std::map<int32_t, std::unique_ptr<SetCommunicator>> sets_;
};

}  // namespace hvd::gpu
