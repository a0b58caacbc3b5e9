#include "gpu/gpu_collectives.h"

#include <chrono>
#include <thread>

#include "clock.h"
#include "gpu/nccl_mapping.h"
#include "gpu/ready_event.h"
#include "log.h"

namespace hvd::gpu {
namespace {

int64_t row_bytes(const Request& q) {
  int64_t n = static_cast<int64_t>(dtype_size(q.spec.dtype));
  for (size_t i = 1; i < q.shape.size(); ++i) n *= q.shape[i];
  return n;
}

const char* nccl_label(OpType op) {
  switch (op) {
    case OpType::Allreduce: return "nccl_allreduce";
    case OpType::Allgather: return "nccl_allgather";
    case OpType::Broadcast: return "nccl_broadcast";
    case OpType::Alltoall: return "nccl_alltoall";
    case OpType::Reducescatter: return "nccl_reducescatter";
    case OpType::Barrier: break;
  }
  return "nccl";
}

bool in_place_op(OpType op) { return op == OpType::Allreduce || op == OpType::Broadcast; }

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

Status GpuCollectives::prepare(int device) {
  const CudaApi& api = rt_.cuda();
  if (device_ == device) return cuda_status(api.cudaSetDevice(device), "cudaSetDevice");
  if (device_ >= 0)
    return Status::Error(Status::Code::Invalid, "GPU tensors of one rank must be on one device: cuda:" +
                                                    std::to_string(device_) + " and cuda:" + std::to_string(device));
  Status s = cuda_status(api.cudaSetDevice(device), "cudaSetDevice");
  if (s.ok()) s = cuda_status(api.cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  for (auto& ev : marks_)
    if (s.ok()) s = cuda_status(api.cudaEventCreateWithFlags(&ev, cudaEventDefault), "cudaEventCreate");
  if (!s.ok()) return s;
  if (batch_copies_) {
    std::string why;
    kernel_ = CopyKernel::load(&why);
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
  queue_error_ = Status::Ok();
  // Every member has the same response, so every one returns this error before any collective.
  if (std::string why = scaling_error(r.spec); !why.empty()) return Status::Error(Status::Code::Invalid, why);
  const int device = es[0]->device;
  Status local = prepare(device);
  for (auto* e : es)
    if (e->device != device && local.ok())
      local = Status::Error(Status::Code::Invalid, "GPU tensors of one rank must be on one device");
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
  return run_nccl(c, r, es, *sc, local, span);
}

void GpuCollectives::begin(const std::vector<TensorEntry*>& es) {
  mark(kStart);
  bool waited = false;
  for (auto* e : es) {
    if (!e->ready) continue;
    queued(cuda_status(rt_.cuda().cudaStreamWaitEvent(stream_, e->ready->event(), 0),
                       "waiting for the producer's stream (cudaStreamWaitEvent)"));
    waited = true;
  }
  if (waited) mark(kReady);
  else same(kReady, kStart);
}

void GpuCollectives::mark(Mark m) {
  at_[m] = m;
  queued(cuda_status(rt_.cuda().cudaEventRecord(marks_[m], stream_), "cudaEventRecord"));
}

void GpuCollectives::copy(const BatchedCopy& b) {
  if (kernel_ && b.kind() == cudaMemcpyDeviceToDevice && b.size() > 1) {
    std::string error = kernel_->launch(b.dsts(), b.srcs(), b.sizes(), stream_);
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
  const int64_t start = now_us();
  int64_t next_check = start + 1000;
  while (true) {
    cudaError_t e = api.cudaEventQuery(marks_[at_[m]]);
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
  float ms = 0;
  if (rt_.cuda().cudaEventElapsedTime(&ms, marks_[at_[m]], marks_[at_[last]]) != cudaSuccess)
    rt_.cuda().cudaGetLastError();
  return end_us - static_cast<int64_t>(ms * 1000.0f);
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

Status GpuCollectives::run_nccl(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es,
                                SetCommunicator& sc, const Status& local, const Span& span) {
  const NcclApi& nc = rt_.nccl();
  const int n = static_cast<int>(c.set.ranks.size());
  const int me = c.set.rank_in_set(c.global_rank);
  const ncclComm_t comm = sc.comm();
  TensorEntry& e0 = *es[0];
  const Request& q = e0.request;
  const size_t esz = dtype_size(r.spec.dtype);
  Status s = local;

  // 1. Sizes, results and buffers, before anything runs on the device.
  NcclReduction red;
  if (r.spec.op == OpType::Allreduce || r.spec.op == OpType::Reducescatter) {
    red = nccl_reduction(r.spec, n, rt_.status().nccl.version);
    if (!red.error.empty() && s.ok()) s = Status::Error(Status::Code::Invalid, red.error);
  }
  std::vector<void*> outs;
  std::vector<int64_t> counts, displs;  // bytes per member (allgather, alltoall: received)
  std::vector<int64_t> send_counts, send_displs;
  std::vector<int64_t> offsets;  // allreduce: each tensor's place in the fusion buffer
  int64_t total = 0;
  bool copies = false;
  switch (r.spec.op) {
    case OpType::Allreduce:
      for (auto* e : es) outs.push_back(output_for(*e, e->request.num_bytes(), e->request.shape, &s));
      copies = es.size() > 1;
      total = copies ? fusion_layout(es, &offsets) : e0.request.num_bytes();
      if (copies && s.ok()) s = cuda_status(fusion_->reserve(total), "allocating the device fusion buffer");
      break;
    case OpType::Allgather: {
      std::vector<int64_t> shape = q.shape;
      shape[0] = 0;
      for (int64_t rw : r.rows) {
        displs.push_back(total);
        counts.push_back(rw * row_bytes(q));
        total += counts.back();
        shape[0] += rw;
      }
      outs.push_back(output_for(e0, total, shape, &s));
      break;
    }
    case OpType::Broadcast:
      outs.push_back(output_for(e0, q.num_bytes(), q.shape, &s));
      break;
    case OpType::Alltoall: {
      std::vector<int64_t> send_rows = e0.splits, recv_rows(n);
      if (send_rows.empty()) send_rows.assign(n, q.shape[0] / n);
      MPI_Alltoall(send_rows.data(), 1, MPI_INT64_T, recv_rows.data(), 1, MPI_INT64_T, c.set.comm);
      int64_t sent = 0, rows = 0;
      for (int i = 0; i < n; ++i) {
        send_displs.push_back(sent);
        send_counts.push_back(send_rows[i] * row_bytes(q));
        sent += send_counts.back();
        displs.push_back(total);
        counts.push_back(recv_rows[i] * row_bytes(q));
        total += counts.back();
        rows += recv_rows[i];
      }
      std::vector<int64_t> shape = q.shape;
      shape[0] = rows;
      e0.handle->received_splits = recv_rows;
      outs.push_back(output_for(e0, total, shape, &s));
      if ((!nc.ncclSend || !nc.ncclRecv) && s.ok())
        s = Status::Error(Status::Code::Internal, "alltoall on GPU tensors needs NCCL 2.7 or newer");
      break;
    }
    case OpType::Reducescatter: {
      const int64_t rows = q.shape.empty() ? 1 : q.shape[0];
      const int64_t row = row_bytes(q);
      for (int i = 0; i < n; ++i) {
        displs.push_back(total);
        counts.push_back((rows / n + (i < rows % n ? 1 : 0)) * row);
        total += counts.back();
      }
      std::vector<int64_t> shape = q.shape;
      shape[0] = rows / n + (me < rows % n ? 1 : 0);
      outs.push_back(output_for(e0, counts[me], shape, &s));
      copies = rows % n != 0;  // uneven blocks: allreduce into the fusion buffer, keep ours
      if (copies && s.ok()) s = cuda_status(fusion_->reserve(q.num_bytes()), "allocating the device fusion buffer");
      break;
    }
    case OpType::Barrier:
      s = Status::Error(Status::Code::Internal, "barrier has no GPU form");
      break;
  }
  s = agree(c.set, s);
  if (!s.ok()) return s;
  BatchedCopy fuse_in(cudaMemcpyDeviceToDevice), fuse_out(cudaMemcpyDeviceToDevice);
  if (r.spec.op == OpType::Allreduce && copies) fused_copies(fusion_->data(), offsets, es, outs, &fuse_in, &fuse_out);

  // 2. The work, in order on the engine's stream.
  auto reduce = [&](const void* in, void* out, size_t count, bool scatter) -> ncclResult_t {
    if (count == 0) return ncclSuccess;
    ncclRedOp_t op = red.op;
    if (red.pre_mul_sum) {
      auto scalar = scalar_bytes(r.spec.dtype, red.factor);
      ncclResult_t res = nc.ncclRedOpCreatePreMulSum(&op, scalar.data(), red.type, ncclScalarHostImmediate, comm);
      if (res != ncclSuccess) return res;
    }
    ncclResult_t res = scatter ? nc.ncclReduceScatter(in, out, count, red.type, op, comm, stream_)
                               : nc.ncclAllReduce(in, out, count, red.type, op, comm, stream_);
    if (red.pre_mul_sum) nc.ncclRedOpDestroy(op, comm);
    return res;
  };
  const char* label = nccl_label(r.spec.op);
  begin(es);
  ncclResult_t res = ncclSuccess;
  switch (r.spec.op) {
    case OpType::Allreduce:
      if (copies) {
        copy(fuse_in);
        mark(kCopiedIn);
        res = reduce(fusion_->data(), fusion_->data(), total / esz, false);
        mark(kReduced);
        copy(fuse_out);
      } else {
        same(kCopiedIn, kReady);
        res = reduce(e0.input, outs[0], q.num_elements(), false);
        mark(kReduced);
      }
      break;
    case OpType::Allgather: {
      same(kCopiedIn, kReady);
      bool equal = true;
      for (int64_t b : counts) equal &= b == counts[0];
      if (equal && counts[0] > 0) {
        res = nc.ncclAllGather(e0.input, outs[0], counts[0], ncclInt8, comm, stream_);
      } else if (!equal) {
        nc.ncclGroupStart();
        for (int i = 0; i < n && res == ncclSuccess; ++i) {
          char* dst = static_cast<char*>(outs[0]) + displs[i];
          const void* src = i == me ? e0.input : dst;
          if (counts[i] > 0) res = nc.ncclBroadcast(src, dst, counts[i], ncclInt8, i, comm, stream_);
        }
        ncclResult_t end = nc.ncclGroupEnd();
        if (res == ncclSuccess) res = end;
      }
      mark(kReduced);
      break;
    }
    case OpType::Broadcast:
      same(kCopiedIn, kReady);
      if (q.num_bytes() > 0)
        res = nc.ncclBroadcast(e0.input, outs[0], q.num_bytes(), ncclInt8, c.set.rank_in_set(r.spec.root_rank), comm,
                               stream_);
      mark(kReduced);
      break;
    case OpType::Alltoall: {
      char* out = static_cast<char*>(outs[0]);
      const char* in = static_cast<const char*>(e0.input);
      copy(out + displs[me], in + send_displs[me], counts[me], cudaMemcpyDeviceToDevice);
      mark(kCopiedIn);
      nc.ncclGroupStart();
      for (int i = 0; i < n && res == ncclSuccess; ++i) {
        if (i == me) continue;
        if (send_counts[i] > 0) res = nc.ncclSend(in + send_displs[i], send_counts[i], ncclInt8, i, comm, stream_);
        if (res == ncclSuccess && counts[i] > 0)
          res = nc.ncclRecv(out + displs[i], counts[i], ncclInt8, i, comm, stream_);
      }
      ncclResult_t end = nc.ncclGroupEnd();
      if (res == ncclSuccess) res = end;
      mark(kReduced);
      break;
    }
    case OpType::Reducescatter:
      same(kCopiedIn, kReady);
      if (copies) {
        res = reduce(e0.input, fusion_->data(), q.num_elements(), false);
        mark(kReduced);
        copy(outs[0], fusion_->data() + displs[me], counts[me], cudaMemcpyDeviceToDevice);
      } else {
        res = reduce(e0.input, outs[0], counts[me] / static_cast<int64_t>(esz), true);
        mark(kReduced);
      }
      break;
    case OpType::Barrier:
      break;
  }
  if (copies) mark(kDone);  // copies out after kReduced; otherwise nothing was queued after it
  else same(kDone, kReduced);
  if (res != ncclSuccess) {
    sc.abort();  // peers may be inside the collective: abort rather than leave them waiting
    return nccl_status(res, label);
  }
  s = wait_done(kDone, &sc);
  if (!s.ok()) return s;

  // 3. Timeline spans, from the device's own timestamps.
  const int64_t end = now_us();
  const char* op = op_name(r.spec.op);
  bool waited = false;
  for (auto* e : es) waited |= static_cast<bool>(e->ready);
  if (waited) span(Phase::WaitForData, op, start_of(kStart, kDone, end), start_of(kReady, kDone, end));
  if (copies || r.spec.op == OpType::Alltoall)
    span(Phase::MemcpyIn, op, start_of(kReady, kDone, end), start_of(kCopiedIn, kDone, end));
  span(Phase::Collective, label, start_of(kCopiedIn, kDone, end), start_of(kReduced, kDone, end));
  if (copies) span(Phase::MemcpyOut, op, start_of(kReduced, kDone, end), end);
  return Status::Ok();
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
  bool waited = false;
  for (auto* e : es) waited |= static_cast<bool>(e->ready);
  if (waited) span(Phase::WaitForData, op, start_of(kStart, kCopiedIn, t), start_of(kReady, kCopiedIn, t));
  span(Phase::MemcpyIn, op, start_of(kReady, kCopiedIn, t), t);

  // The host collective, exactly as for host tensors.
  switch (r.spec.op) {
    case OpType::Allreduce: s = run_allreduce(c, r, hp); break;
    case OpType::Allgather: s = run_allgather(c, r, host[0]); break;
    case OpType::Broadcast: s = run_broadcast(c, r, host[0]); break;
    case OpType::Alltoall: s = run_alltoall(c, r, host[0]); break;
    case OpType::Reducescatter: s = run_reducescatter(c, r, host[0]); break;
    case OpType::Barrier: s = run_barrier(c); break;
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
