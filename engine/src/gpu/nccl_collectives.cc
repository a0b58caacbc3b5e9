// The NCCL form of each collective, for GPU tensors of one rank's device (GpuCollectives).
#include "clock.h"
#include "gpu/gpu_collectives.h"
#include "gpu/nccl_mapping.h"

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
    case OpType::Barrier: case OpType::Join: break;
  }
  return "nccl";
}

}  // namespace

ncclResult_t GpuCollectives::nccl_reduce(const NcclReduction& red, DataType dtype, const void* in, void* out,
                                         size_t count, bool scatter, ncclComm_t comm) {
  if (count == 0) return ncclSuccess;
  const NcclApi& nc = rt_.nccl();
  ncclRedOp_t op = red.op;
  if (red.pre_mul_sum) {
    auto scalar = scalar_bytes(dtype, red.factor);
    ncclResult_t res = nc.ncclRedOpCreatePreMulSum(&op, scalar.data(), red.type, ncclScalarHostImmediate, comm);
    if (res != ncclSuccess) return res;
  }
  ncclResult_t res = scatter ? nc.ncclReduceScatter(in, out, count, red.type, op, comm, stream_)
                             : nc.ncclAllReduce(in, out, count, red.type, op, comm, stream_);
  if (red.pre_mul_sum) nc.ncclRedOpDestroy(op, comm);
  return res;
}

Status GpuCollectives::finish_nccl(const Response& r, SetCommunicator& sc, ncclResult_t res, bool copies,
                                   bool copied_in, const Span& span) {
  const char* label = nccl_label(r.spec.op);
  if (copies) mark(kDone);  // copies out after kReduced; otherwise nothing was queued after it
  else same(kDone, kReduced);
  if (res != ncclSuccess) {
    sc.abort();  // peers may be inside the collective: abort rather than leave them waiting
    return nccl_status(res, label);
  }
  Status s = wait_done(kDone, &sc);
  if (!s.ok()) return s;
  const int64_t end = now_us();
  const char* op = op_name(r.spec.op);
  if (waited_) span(Phase::WaitForData, op, start_of(kStart, kDone, end), start_of(kReady, kDone, end));
  if (copied_in) span(Phase::MemcpyIn, op, start_of(kReady, kDone, end), start_of(kCopiedIn, kDone, end));
  span(Phase::Collective, label, start_of(kCopiedIn, kDone, end), start_of(kReduced, kDone, end));
  if (copies) span(Phase::MemcpyOut, op, start_of(kReduced, kDone, end), end);
  return Status::Ok();
}

Status GpuCollectives::nccl_allreduce(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es,
                                      SetCommunicator& sc, const Status& local, const Span& span) {
  const int n = static_cast<int>(c.set.ranks.size());
  TensorEntry& e0 = *es[0];
  Status s = local;
  NcclReduction red = nccl_reduction(r.spec, n, rt_.status().nccl.version);
  if (!red.error.empty() && s.ok()) s = Status::Error(Status::Code::Invalid, red.error);
  std::vector<void*> outs;
  for (auto* e : es) outs.push_back(output_for(*e, e->request.num_bytes(), e->request.shape, &s));
  const bool copies = es.size() > 1;  // fused: through the fusion buffer
  std::vector<int64_t> offsets;       // each tensor's place in the fusion buffer
  const int64_t total = copies ? fusion_layout(es, &offsets) : e0.request.num_bytes();
  if (copies && s.ok()) s = cuda_status(fusion_->reserve(total), "allocating the device fusion buffer");
  s = agree(c.set, s);
  if (!s.ok()) return s;
  BatchedCopy fuse_in(cudaMemcpyDeviceToDevice), fuse_out(cudaMemcpyDeviceToDevice);
  if (copies) {
    fused_copies(fusion_->data(), offsets, es, outs, &fuse_in, &fuse_out);
    ready_copies({&fuse_in, &fuse_out});
  }

  begin(es);
  ncclResult_t res;
  if (copies) {
    copy(fuse_in);
    mark(kCopiedIn);
    const int64_t element_size = static_cast<int64_t>(dtype_size(r.spec.dtype));
    res = nccl_reduce(red, r.spec.dtype, fusion_->data(), fusion_->data(), total / element_size, false, sc.comm());
    mark(kReduced);
    copy(fuse_out);
  } else {
    same(kCopiedIn, kReady);
    res = nccl_reduce(red, r.spec.dtype, e0.input, outs[0], e0.request.num_elements(), false, sc.comm());
    mark(kReduced);
  }
  return finish_nccl(r, sc, res, copies, copies, span);
}

Status GpuCollectives::nccl_allgather(CollectiveContext& c, const Response& r, TensorEntry& e, SetCommunicator& sc,
                                      const Status& local, const Span& span) {
  const NcclApi& nc = rt_.nccl();
  const int n = static_cast<int>(c.set.ranks.size());
  const int me = c.set.rank_in_set(c.global_rank);
  const Request& q = e.request;
  Status s = local;
  std::vector<int64_t> counts, displs;  // bytes received from each member, and where they go
  int64_t total = 0;
  std::vector<int64_t> shape = q.shape;
  shape[0] = 0;
  for (int64_t rw : r.rows) {
    displs.push_back(total);
    counts.push_back(rw * row_bytes(q));
    total += counts.back();
    shape[0] += rw;
  }
  void* out = output_for(e, total, shape, &s);
  s = agree(c.set, s);
  if (!s.ok()) return s;

  std::vector<TensorEntry*> es{&e};
  begin(es);
  same(kCopiedIn, kReady);
  ncclResult_t res = ncclSuccess;
  bool equal = true;
  for (int64_t b : counts) equal &= b == counts[0];
  if (equal && counts[0] > 0) {
    res = nc.ncclAllGather(e.input, out, counts[0], ncclInt8, sc.comm(), stream_);
  } else if (!equal) {  // rows that differ per member: one broadcast from each
    nc.ncclGroupStart();
    for (int i = 0; i < n && res == ncclSuccess; ++i) {
      char* dst = static_cast<char*>(out) + displs[i];
      const void* src = i == me ? e.input : dst;
      if (counts[i] > 0) res = nc.ncclBroadcast(src, dst, counts[i], ncclInt8, i, sc.comm(), stream_);
    }
    ncclResult_t end = nc.ncclGroupEnd();
    if (res == ncclSuccess) res = end;
  }
  mark(kReduced);
  return finish_nccl(r, sc, res, false, false, span);
}

Status GpuCollectives::nccl_broadcast(CollectiveContext& c, const Response& r, TensorEntry& e, SetCommunicator& sc,
                                      const Status& local, const Span& span) {
  const Request& q = e.request;
  Status s = local;
  void* out = output_for(e, q.num_bytes(), q.shape, &s);
  s = agree(c.set, s);
  if (!s.ok()) return s;

  std::vector<TensorEntry*> es{&e};
  begin(es);
  same(kCopiedIn, kReady);
  ncclResult_t res = ncclSuccess;
  if (q.num_bytes() > 0)
    res = rt_.nccl().ncclBroadcast(e.input, out, q.num_bytes(), ncclInt8, c.set.rank_in_set(r.spec.root_rank),
                                   sc.comm(), stream_);
  mark(kReduced);
  return finish_nccl(r, sc, res, false, false, span);
}

Status GpuCollectives::nccl_alltoall(CollectiveContext& c, const Response& r, TensorEntry& e, SetCommunicator& sc,
                                     const Status& local, const Span& span) {
  const NcclApi& nc = rt_.nccl();
  const int n = static_cast<int>(c.set.ranks.size());
  const int me = c.set.rank_in_set(c.global_rank);
  const Request& q = e.request;
  Status s = local;
  std::vector<int64_t> send_rows = e.splits, recv_rows(n);
  if (send_rows.empty()) send_rows.assign(n, q.shape[0] / n);
  MPI_Alltoall(send_rows.data(), 1, MPI_INT64_T, recv_rows.data(), 1, MPI_INT64_T, c.set.comm);
  std::vector<int64_t> counts, displs, send_counts, send_displs;  // bytes per member, received and sent
  int64_t total = 0, sent = 0, rows = 0;
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
  e.handle->received_splits = recv_rows;
  char* out = static_cast<char*>(output_for(e, total, shape, &s));
  if ((!nc.ncclSend || !nc.ncclRecv) && s.ok())
    s = Status::Error(Status::Code::Internal, "alltoall on GPU tensors needs NCCL 2.7 or newer");
  s = agree(c.set, s);
  if (!s.ok()) return s;

  std::vector<TensorEntry*> es{&e};
  begin(es);
  const char* in = static_cast<const char*>(e.input);
  copy(out + displs[me], in + send_displs[me], counts[me], cudaMemcpyDeviceToDevice);
  mark(kCopiedIn);
  ncclResult_t res = ncclSuccess;
  nc.ncclGroupStart();
  for (int i = 0; i < n && res == ncclSuccess; ++i) {
    if (i == me) continue;
    if (send_counts[i] > 0) res = nc.ncclSend(in + send_displs[i], send_counts[i], ncclInt8, i, sc.comm(), stream_);
    if (res == ncclSuccess && counts[i] > 0)
      res = nc.ncclRecv(out + displs[i], counts[i], ncclInt8, i, sc.comm(), stream_);
  }
  ncclResult_t end = nc.ncclGroupEnd();
  if (res == ncclSuccess) res = end;
  mark(kReduced);
  return finish_nccl(r, sc, res, false, true, span);
}

Status GpuCollectives::nccl_reducescatter(CollectiveContext& c, const Response& r, TensorEntry& e,
                                          SetCommunicator& sc, const Status& local, const Span& span) {
  const int n = static_cast<int>(c.set.ranks.size());
  const int me = c.set.rank_in_set(c.global_rank);
  const Request& q = e.request;
  Status s = local;
  NcclReduction red = nccl_reduction(r.spec, n, rt_.status().nccl.version);
  if (!red.error.empty() && s.ok()) s = Status::Error(Status::Code::Invalid, red.error);
  const int64_t rows = q.shape.empty() ? 1 : q.shape[0];
  const int64_t row = row_bytes(q);
  std::vector<int64_t> counts, displs;  // each member's block of the result, in bytes
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    displs.push_back(total);
    counts.push_back((rows / n + (i < rows % n ? 1 : 0)) * row);
    total += counts.back();
  }
  std::vector<int64_t> shape = q.shape;
  shape[0] = rows / n + (me < rows % n ? 1 : 0);
  void* out = output_for(e, counts[me], shape, &s);
  const bool copies = rows % n != 0;  // uneven blocks: allreduce into the fusion buffer, keep ours
  if (copies && s.ok()) s = cuda_status(fusion_->reserve(q.num_bytes()), "allocating the device fusion buffer");
  s = agree(c.set, s);
  if (!s.ok()) return s;

  std::vector<TensorEntry*> es{&e};
  begin(es);
  same(kCopiedIn, kReady);
  ncclResult_t res;
  if (copies) {
    res = nccl_reduce(red, r.spec.dtype, e.input, fusion_->data(), q.num_elements(), false, sc.comm());
    mark(kReduced);
    copy(out, fusion_->data() + displs[me], counts[me], cudaMemcpyDeviceToDevice);
  } else {
    const int64_t element_size = static_cast<int64_t>(dtype_size(r.spec.dtype));
    res = nccl_reduce(red, r.spec.dtype, e.input, out, counts[me] / element_size, true, sc.comm());
    mark(kReduced);
  }
  return finish_nccl(r, sc, res, copies, copies, span);
}

}  // namespace hvd::gpu
