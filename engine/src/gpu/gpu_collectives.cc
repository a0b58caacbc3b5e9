#include "gpu/gpu_collectives.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "clock.h"
#include "gpu/nccl_mapping.h"
#include "gpu/ready_event.h"
#include "log.h"

namespace hvd::gpu {
namespace {

bool in_place_op(OpType op) { return op == OpType::Allreduce || op == OpType::Broadcast; }

// An op of fewer bytes than this, with no producer still running, times its phases by the host's clock as it
// queues them (the engine's stream is idle when an op begins, so the device starts each phase about then), not
// by timing events: recording one cost 1.7 us on an H200, against 0.3 us for the one event without timing that
// then tells when the op is done.
constexpr int64_t kDeviceTimingBytes = 1 << 20;

}  // namespace

GpuCollectives::GpuCollectives(const Runtime& rt, CommOptions options, std::function<bool()> abandoned)
    : rt_(rt), options_(options), abandoned_(std::move(abandoned)), batch_copies_(options.batch_copies) {}

// None goes on to a collective alone, so a failure on one rank (say, an allocation) is an error
// on all of them instead of a hang.
Status GpuCollectives::agree(const ProcessSet& set, const Status& local) {
  if (set.ranks.size() == 1) return local;
  int mine = local.ok(), all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, set.comm);
  if (!local.ok()) return local;
  if (!all) return Status::Error(Status::Code::Internal, "another rank of process set " + std::to_string(set.id) +
                                                             " could not prepare this GPU collective");
  return Status::Ok();
}

GpuCollectives::~GpuCollectives() {
  {
    std::lock_guard<std::mutex> g(sets_mu_);
    sets_.clear();
  }
  if (device_ < 0) return;
  const CudaApi& api = rt_.cuda();
  int prev = -1;
  api.cudaGetDevice(&prev);
  api.cudaSetDevice(device_);
  if (stream_) api.cudaStreamSynchronize(stream_);
  kernel_.reset();
  fusion_.reset();
  staging_.reset();
  for (auto ev : marks_)
    if (ev) api.cudaEventDestroy(ev);
  if (done_) api.cudaEventDestroy(done_);
  if (stream_) api.cudaStreamDestroy(stream_);
  if (prev >= 0) api.cudaSetDevice(prev);
}

void GpuCollectives::release_set(int32_t id) {
  std::lock_guard<std::mutex> g(sets_mu_);
  sets_.erase(id);
}

Status GpuCollectives::cuda_status(cudaError_t e, const char* what) const {
  if (e == cudaSuccess) return Status::Ok();
  rt_.cuda().cudaGetLastError();
  return Status::Error(Status::Code::Internal, std::string(what) + ": " + rt_.cuda_error(e));
}

Status GpuCollectives::nccl_status(ncclResult_t r, const char* what) const {
  if (r == ncclSuccess) return Status::Ok();
  return Status::Error(Status::Code::Internal, std::string(what) + ": " + rt_.nccl_error(r));
}

Status GpuCollectives::prepare(int device, int current) {
  const CudaApi& api = rt_.cuda();
  if (device_ == device)
    return device == current ? Status::Ok() : cuda_status(api.cudaSetDevice(device), "cudaSetDevice");
  if (device_ >= 0)
    return Status::Error(Status::Code::Invalid, "GPU tensors of one rank must be on one device: cuda:" +
                                                    std::to_string(device_) + " and cuda:" + std::to_string(device));
  Status s = cuda_status(api.cudaSetDevice(device), "cudaSetDevice");
  if (s.ok()) s = cuda_status(api.cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  for (auto& ev : marks_)
    if (s.ok()) s = cuda_status(api.cudaEventCreateWithFlags(&ev, cudaEventDefault), "cudaEventCreate");
  if (s.ok()) s = cuda_status(api.cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  if (!s.ok()) return s;
  if (batch_copies_) {
    std::string why;
    kernel_ = CopyKernel::load(api, &why);
    if (!kernel_) log::write(log::Level::Info, "GPU fusion copies go through the CUDA runtime: no copy kernel: " + why);
  }
  fusion_ = std::make_unique<GrowableBuffer>(api, GrowableBuffer::Kind::Device);
  staging_ = std::make_unique<GrowableBuffer>(api, GrowableBuffer::Kind::Pinned);
  device_ = device;
  return s;
}

SetCommunicator* GpuCollectives::communicator(CollectiveContext& c, int device, const Status& local, Status* s) {
  {
    std::lock_guard<std::mutex> g(sets_mu_);
    auto it = sets_.find(c.set.id);
    if (it != sets_.end()) return it->second.get();
  }
  auto sc = SetCommunicator::create(rt_, c.set, c.global_rank, device, options_, local, s);
  if (!sc) return nullptr;
  std::lock_guard<std::mutex> g(sets_mu_);
  return (sets_[c.set.id] = std::move(sc)).get();
}

Status GpuCollectives::run(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es, const Span& span) {
  if (!rt_.cuda_ready())
    return Status::Error(Status::Code::Internal, "GPU tensor, but the CUDA runtime is not usable: " +
                                                     rt_.status().device_error + rt_.status().cuda.error);
  // A step runs on the engine thread or on a waiter's (progress.h): the caller's current device stays its own.
  const CudaApi& api = rt_.cuda();
  int caller = -1;
  if (api.cudaGetDevice(&caller) != cudaSuccess) {
    api.cudaGetLastError();
    caller = -1;
  }
  Status s = run_on_device(c, r, es, span, caller);
  if (caller >= 0 && caller != device_) api.cudaSetDevice(caller);  // prepare() made device_ current
  return s;
}

Status GpuCollectives::run_on_device(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es,
                                     const Span& span, int current) {
  queue_error_ = Status::Ok();
  // Every member has the same response, so every one returns this error before any collective.
  if (std::string why = scaling_error(r.spec); !why.empty()) return Status::Error(Status::Code::Invalid, why);
  const int device = es[0]->device;
  Status local = device < 0 ? Status::Error(Status::Code::Invalid, "rank " + std::to_string(c.global_rank) +
                                                " joined before any GPU operation of its own, so it has no GPU "
                                                "to stand in on; run one before join (broadcast_parameters, say)")
                            : prepare(device, current);
  for (auto* e : es)
    if (e->device != device && local.ok())
      local = Status::Error(Status::Code::Invalid, "GPU tensors of one rank must be on one device");
  for (auto* e : es)
    if (e->stand_in && local.ok()) local = upload_stand_in(*e);
  Status s;
  SetCommunicator* sc = communicator(c, device, local, &s);
  if (!sc) return s;
  if (sc->broken()) {
    return Status::Error(Status::Code::Internal, "the NCCL communicator of process set " + std::to_string(c.set.id) +
                                                     " was aborted by an earlier failure");
  }
  if (sc->staged()) return run_staged(c, r, es, local, span);
  if (r.spec.op == OpType::Allreduce && sc->hierarchy()) {
    // A pre-multiplied (or plain) reduction splits into the three steps exactly; ncclAvg, which
    // divides inside each step (integer averages), and errors take the flat path.
    NcclReduction red = nccl_reduction(r.spec, static_cast<int>(c.set.ranks.size()), rt_.status().nccl.version);
    if (red.error.empty() && red.op != ncclAvg) return run_hierarchical(c, r, es, *sc, red, local, span);
  }
  switch (r.spec.op) {
    case OpType::Allreduce: return nccl_allreduce(c, r, es, *sc, local, span);
    case OpType::Allgather: return nccl_allgather(c, r, *es[0], *sc, local, span);
    case OpType::Broadcast: return nccl_broadcast(c, r, *es[0], *sc, local, span);
    case OpType::Alltoall: return nccl_alltoall(c, r, *es[0], *sc, local, span);
    case OpType::Reducescatter: return nccl_reducescatter(c, r, *es[0], *sc, local, span);
    case OpType::Barrier: case OpType::Join: break;
  }
  return agree(c.set, Status::Error(Status::Code::Internal, std::string(op_name(r.spec.op)) + " has no GPU form"));
}

void GpuCollectives::begin(const std::vector<TensorEntry*>& es) {
  // Each producer stream's newest event stands for the older ones of that stream; a stream that has passed
  // it is done with every tensor of this op that it made.
  std::vector<const ReadyEvent*> newest;
  int64_t bytes = 0;
  for (auto* e : es) {
    bytes += e->request.num_bytes();
    const ReadyEvent* r = e->ready.get();
    if (!r) continue;
    auto same = std::find_if(newest.begin(), newest.end(), [r](const ReadyEvent* n) { return n->same_stream(*r); });
    if (same == newest.end()) newest.push_back(r);
    else if (r->after(**same)) *same = r;
  }
  auto done = [this](const ReadyEvent* r) { return rt_.cuda().cudaEventQuery(r->event()) == cudaSuccess; };
  newest.erase(std::remove_if(newest.begin(), newest.end(), done), newest.end());
  waited_ = !newest.empty();
  device_times_ = waited_ || bytes >= kDeviceTimingBytes;
  mark(kStart);
  for (const ReadyEvent* r : newest)
    queued(cuda_status(rt_.cuda().cudaStreamWaitEvent(stream_, r->event(), 0),
                       "waiting for the producer's stream (cudaStreamWaitEvent)"));
  if (waited_) mark(kReady);
  else same(kReady, kStart);
}

void GpuCollectives::mark(Mark m) {
  at_[m] = m;
  if (device_times_) queued(cuda_status(rt_.cuda().cudaEventRecord(marks_[m], stream_), "cudaEventRecord"));
  else host_at_[m] = now_us();
}

bool GpuCollectives::kernel_copies(const BatchedCopy& b) const {
  return kernel_ && b.kind() == cudaMemcpyDeviceToDevice && b.size() > 1;
}

void GpuCollectives::ready_copies(const std::vector<const BatchedCopy*>& batches) {
  if (!kernel_) return;
  std::vector<const BatchedCopy*> kernels;
  for (const BatchedCopy* b : batches)
    if (kernel_copies(*b)) kernels.push_back(b);
  // Even with none: what an earlier op made ready and did not launch goes (its batches are gone).
  std::string error = kernel_->ready(kernels, stream_);
  if (!error.empty()) queued(Status::Error(Status::Code::Internal, error));
}

void GpuCollectives::copy(const BatchedCopy& b) {
  if (kernel_copies(b)) {
    std::string error = kernel_->launch(b, stream_);
    if (!error.empty()) queued(Status::Error(Status::Code::Internal, error));
    return;
  }
  const bool was = batch_copies_;
  queued(cuda_status(b.issue(rt_.cuda(), stream_, device_, &batch_copies_), "cudaMemcpyAsync"));
  if (was && !batch_copies_)
    log::warning("the CUDA runtime refused a batched copy (cudaMemcpyBatchAsync); GPU tensors are copied one "
                 "by one from now on");
}

int64_t GpuCollectives::fusion_layout(const std::vector<TensorEntry*>& es, std::vector<int64_t>* offsets) {
  int64_t end = 0;
  for (auto* e : es) {
    offsets->push_back(end);
    end += (e->request.num_bytes() + 15) / 16 * 16;
  }
  return end;
}

void GpuCollectives::fused_copies(char* buf, const std::vector<int64_t>& offsets, const std::vector<TensorEntry*>& es,
                                  const std::vector<void*>& outs, BatchedCopy* in, BatchedCopy* out) {
  in->reserve(es.size());
  out->reserve(es.size());
  for (size_t i = 0; i < es.size(); ++i) {
    const size_t bytes = es[i]->request.num_bytes();
    in->add(buf + offsets[i], es[i]->input, bytes);
    out->add(outs[i], buf + offsets[i], bytes);
  }
}

void GpuCollectives::copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes > 0) queued(cuda_status(rt_.cuda().cudaMemcpyAsync(dst, src, bytes, kind, stream_), "cudaMemcpyAsync"));
}

void GpuCollectives::queued(Status s) {
  if (queue_error_.ok() && !s.ok()) queue_error_ = std::move(s);
}

Status GpuCollectives::wait_done(Mark m, SetCommunicator* sc) {
  const CudaApi& api = rt_.cuda();
  cudaEvent_t done = marks_[at_[m]];
  if (!device_times_) {  // no event at `m`: one now, after all that was queued
    done = done_;
    queued(cuda_status(api.cudaEventRecord(done_, stream_), "cudaEventRecord"));
  }
  const int64_t start = now_us();
  int64_t next_check = start + 1000;
  while (true) {
    cudaError_t e = api.cudaEventQuery(done);
    if (e == cudaSuccess) return queue_error_;  // work that could not be queued fails the op
    if (e != cudaErrorNotReady) return cuda_status(e, "GPU collective");
    int64_t now = now_us();
    if (now >= next_check) {
      next_check = now + 1000;
      if (sc && !sc->staged() && rt_.nccl().ncclCommGetAsyncError) {
        for (ncclComm_t comm : {sc->comm(), sc->hierarchy() ? sc->hierarchy()->local() : nullptr}) {
          ncclResult_t async = ncclSuccess;
          if (comm) rt_.nccl().ncclCommGetAsyncError(comm, &async);
          if (async != ncclSuccess && async != ncclInProgress) {
            sc->abort();
            return nccl_status(async, "NCCL");
          }
        }
      }
      if (abandoned_ && abandoned_()) {
        if (sc) sc->abort();
        return Status::Error(Status::Code::Aborted, "an abort stopped this GPU collective while it ran");
      }
    }
    if (now - start < 2000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

int64_t GpuCollectives::start_of(Mark m, Mark last, int64_t end_us) const {
  if (at_[m] == at_[last]) return end_us;
  if (!device_times_) return host_at_[at_[m]];
  float ms = 0;
  if (rt_.cuda().cudaEventElapsedTime(&ms, marks_[at_[m]], marks_[at_[last]]) != cudaSuccess)
    rt_.cuda().cudaGetLastError();
  return end_us - static_cast<int64_t>(ms * 1000.0f);
}

Status GpuCollectives::upload_stand_in(TensorEntry& e) {
  const size_t bytes = static_cast<size_t>(e.request.num_bytes());
  cudaError_t err;
  auto mem = device_alloc(rt_.cuda(), bytes, &err);
  if (err != cudaSuccess) return cuda_status(err, "cudaMalloc for a joined rank's stand-in");
  copy(mem.get(), e.input, bytes, cudaMemcpyHostToDevice);  // the host buffer lives until the op is done
  e.input = e.output = mem.get();
  e.handle->device_output = std::move(mem);
  return queue_error_;
}

void* GpuCollectives::output_for(TensorEntry& e, size_t bytes, std::vector<int64_t> shape, Status* s) {
  e.handle->output_shape = std::move(shape);
  e.handle->device = device_;
  if (e.output) return e.output;
  cudaError_t err;
  auto mem = device_alloc(rt_.cuda(), bytes, &err);
  if (err != cudaSuccess) {
    if (s->ok()) *s = cuda_status(err, ("cudaMalloc of " + std::to_string(bytes) + " result bytes").c_str());
    return nullptr;
  }
  e.handle->device_output = mem;
  e.handle->device_output_bytes = bytes;
  return mem.get();
}

Status GpuCollectives::run_staged(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es,
                                  const Status& local, const Span& span) {
  const char* op = op_name(r.spec.op);
  int64_t total = 0;
  for (auto* e : es) total += e->request.num_bytes();
  Status s = local;
  if (s.ok()) s = cuda_status(staging_->reserve(total), "allocating pinned host memory for staging");
  s = agree(c.set, s);
  if (!s.ok()) return s;

  // Device to host: every input into the pinned staging buffer.
  begin(es);
  std::vector<TensorEntry> host(es.size());
  std::vector<TensorEntry*> hp;
  BatchedCopy in(cudaMemcpyDeviceToHost), out(cudaMemcpyHostToDevice);
  int64_t off = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    TensorEntry& h = host[i];
    h.request = es[i]->request;
    h.splits = es[i]->splits;
    h.handle = std::make_shared<Handle>();
    char* p = staging_->data() + off;
    h.input = p;
    if (in_place_op(r.spec.op)) h.output = p;
    in.add(p, es[i]->input, h.request.num_bytes());
    off += h.request.num_bytes();
    hp.push_back(&h);
  }
  copy(in);
  mark(kCopiedIn);
  s = wait_done(kCopiedIn, nullptr);
  s = agree(c.set, s);
  if (!s.ok()) return s;
  int64_t t = now_us();
  if (waited_) span(Phase::WaitForData, op, start_of(kStart, kCopiedIn, t), start_of(kReady, kCopiedIn, t));
  span(Phase::MemcpyIn, op, start_of(kReady, kCopiedIn, t), t);

  // The host collective, exactly as for host tensors.
  switch (r.spec.op) {
    case OpType::Allreduce: s = run_allreduce(c, r, hp); break;
    case OpType::Allgather: s = run_allgather(c, r, host[0]); break;
    case OpType::Broadcast: s = run_broadcast(c, r, host[0]); break;
    case OpType::Alltoall: s = run_alltoall(c, r, host[0]); break;
    case OpType::Reducescatter: s = run_reducescatter(c, r, host[0]); break;
    case OpType::Barrier: s = run_barrier(c); break;
    case OpType::Join: s = Status::Error(Status::Code::Internal, "a join has no data phase"); break;
  }
  if (!s.ok()) return s;

  // Host to device: the results into the callers' outputs or new device allocations.
  mark(kReduced);
  for (size_t i = 0; i < es.size(); ++i) {
    const TensorEntry& h = host[i];
    const bool same = in_place_op(r.spec.op);
    const void* src = same ? h.input : h.handle->output.data();
    size_t bytes = same ? h.request.num_bytes() : h.handle->output.size();
    es[i]->handle->received_splits = h.handle->received_splits;
    void* dst = output_for(*es[i], bytes, same ? h.request.shape : h.handle->output_shape, &s);
    if (!s.ok()) return s;
    out.add(dst, src, bytes);
  }
  copy(out);
  mark(kDone);
  s = wait_done(kDone, nullptr);
  if (!s.ok()) return s;
  span(Phase::MemcpyOut, op, start_of(kReduced, kDone, now_us()), now_us());
  return Status::Ok();
}

}  // namespace hvd::gpu
