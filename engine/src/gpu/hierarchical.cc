#include "gpu/hierarchical.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <string>

#include "clock.h"
#include "gpu/gpu_collectives.h"
#include "log.h"

namespace hvd::gpu {
namespace {

constexpr int64_t kChunk = INT_MAX / 16;  // elements per MPI call, below int count limits

// Host ids of the set's members: the lowest set position among those sharing memory with each.
std::vector<int> host_ids(const ProcessSet& set, int me, int ranks_per_host) {
  if (ranks_per_host > 0) return grouped_hosts(set.ranks, ranks_per_host);
  const int n = static_cast<int>(set.ranks.size());
  MPI_Comm shm;
  MPI_Comm_split_type(set.comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &shm);
  int first = me;
  MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, shm);
  MPI_Comm_free(&shm);
  std::vector<int> ids(n);
  MPI_Allgather(&first, 1, MPI_INT, ids.data(), 1, MPI_INT, set.comm);
  return ids;
}

void warn_once(int set_id, const std::string& why) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  log::warning("process set " + std::to_string(set_id) + ": HOROVOD_HIERARCHICAL_ALLREDUCE=1, but " + why +
               "; its GPU allreduces use flat NCCL instead");
}

// The step across hosts reduces partial results, so scaling is already done: Sum, or the op itself.
ReduceOp cross_op(ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return ReduceOp::Product;
    case ncclMin: return ReduceOp::Min;
    case ncclMax: return ReduceOp::Max;
    default: return ReduceOp::Sum;
  }
}

}  // namespace

std::unique_ptr<HostHierarchy> HostHierarchy::create(const Runtime& rt, const ProcessSet& set, int global_rank,
                                                     int ranks_per_host) {
  const int me = set.rank_in_set(global_rank);
  HostPlan plan = plan_hosts(host_ids(set, me, ranks_per_host), me);
  if (!plan.multi_host) return nullptr;
  if (!plan.homogeneous) {
    if (me == 0) {
      std::string sizes;
      for (int s : plan.host_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(s);
      warn_once(set.id, "its hosts have different numbers of ranks (" + sizes + ")");
    }
    return nullptr;
  }
  auto h = std::make_unique<HostHierarchy>(rt, plan);
  MPI_Comm local_mpi;
  MPI_Comm_split(set.comm, plan.host, me, &local_mpi);
  MPI_Comm_split(set.comm, plan.local_rank, me, &h->cross_);

  const NcclApi& nc = rt.nccl();
  struct {
    ncclUniqueId id;
    int32_t ok;
  } root{};
  if (plan.local_rank == 0) root.ok = nc.ncclGetUniqueId(&root.id) == ncclSuccess;
  MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, local_mpi);
  MPI_Comm_free(&local_mpi);
  int ok = 0;
  std::string why = "ncclGetUniqueId failed";
  if (root.ok) {
    ncclResult_t res = nc.ncclCommInitRank(&h->local_, plan.local_size(), root.id, plan.local_rank);
    ok = res == ncclSuccess;
    if (!ok) {
      why = rt.nccl_error(res);
      h->local_ = nullptr;
    }
  }
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, set.comm);
  if (all_ok) return h;
  if (!ok) warn_once(set.id, "NCCL could not make the host communicator on rank " + std::to_string(global_rank) +
                                 ": " + why);
  return nullptr;
}

void HostHierarchy::abort() {
  if (local_ && !aborted_) rt_.nccl().ncclCommAbort(local_);
  aborted_ = true;
}

HostHierarchy::~HostHierarchy() {
  if (local_ && !aborted_) rt_.nccl().ncclCommDestroy(local_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (cross_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&cross_);
}

Status GpuCollectives::run_hierarchical(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es,
                                        SetCommunicator& sc, const NcclReduction& red, const Status& local,
                                        const Span& span) {
  const NcclApi& nc = rt_.nccl();
  const HostHierarchy& h = *sc.hierarchy();
  const size_t element_size = dtype_size(r.spec.dtype);
  Status s = local;

  // 1. Results and buffers: the fused inputs on the device, padded to a multiple of the host's
  // member count so that it cuts into equal shards (the padding is reduced too, and never read);
  // this member's shard in pinned host memory.
  std::vector<void*> outs;
  for (auto* e : es) outs.push_back(output_for(*e, e->request.num_bytes(), e->request.shape, &s));
  std::vector<int64_t> offsets;
  const int64_t total = fusion_layout(es, &offsets);
  const ShardPlan sp = plan_shards(total / static_cast<int64_t>(element_size), h.plan().local_size(), h.plan().local_rank);
  const size_t shard_bytes = static_cast<size_t>(sp.shard) * element_size;
  if (s.ok()) s = cuda_status(fusion_->reserve(sp.padded * element_size), "allocating the device fusion buffer");
  if (s.ok()) s = cuda_status(staging_->reserve(shard_bytes), "allocating pinned host memory for staging");
  s = agree(c.set, s);
  if (!s.ok()) return s;
  char* buf = fusion_->data();
  char* shard = buf + sp.offset * static_cast<int64_t>(element_size);
  char* host = staging_->data();
  BatchedCopy in(cudaMemcpyDeviceToDevice), out(cudaMemcpyDeviceToDevice);
  fused_copies(buf, offsets, es, outs, &in, &out);
  ready_copies({&in, &out});

  // 2. Within the host: inputs into the buffer, reduce-scatter (scaling folded in as on the flat
  // path), this member's reduced shard to the host.
  begin(es);
  copy(in);
  mark(kCopiedIn);
  ncclResult_t res = ncclSuccess;
  if (sp.shard > 0) {
    ncclRedOp_t op = red.op;
    if (red.pre_mul_sum) {
      auto scalar = scalar_bytes(r.spec.dtype, red.factor);
      res = nc.ncclRedOpCreatePreMulSum(&op, scalar.data(), red.type, ncclScalarHostImmediate, h.local());
    }
    if (res == ncclSuccess) {
      res = nc.ncclReduceScatter(buf, shard, sp.shard, red.type, op, h.local(), stream_);
      if (red.pre_mul_sum) nc.ncclRedOpDestroy(op, h.local());
    }
  }
  mark(kReduced);
  copy(host, shard, shard_bytes, cudaMemcpyDeviceToHost);
  mark(kDone);
  if (res != ncclSuccess) {
    sc.abort();
    return nccl_status(res, "nccl_reducescatter");
  }
  s = wait_done(kDone, &sc);
  s = agree(c.set, s);
  if (!s.ok()) return s;
  int64_t end = now_us();
  const char* op = op_name(r.spec.op);
  if (waited_) span(Phase::WaitForData, op, start_of(kStart, kDone, end), start_of(kReady, kDone, end));
  span(Phase::MemcpyIn, op, start_of(kReady, kDone, end), start_of(kCopiedIn, kDone, end));
  span(Phase::Collective, "nccl_reducescatter", start_of(kCopiedIn, kDone, end), start_of(kReduced, kDone, end));
  const int64_t cross_start = start_of(kReduced, kDone, end);

  // 3. Across hosts: the shard among the members with this local rank, one per host.
  MPI_Datatype type = c.reductions.type(r.spec.dtype);
  MPI_Op mpi_op = c.reductions.op(r.spec.dtype, cross_op(red.op));
  for (int64_t first = 0; first < sp.shard; first += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, sp.shard - first));
    int rc = MPI_Allreduce(MPI_IN_PLACE, host + first * static_cast<int64_t>(element_size), n, type, mpi_op, h.cross());
    if (rc != MPI_SUCCESS)
      return Status::Error(Status::Code::Internal,
                           "MPI_Allreduce across hosts failed (code " + std::to_string(rc) + ")");
  }

  // 4. Within the host again: the shard back to the device, allgather, results out.
  mark(kStart);
  copy(shard, host, shard_bytes, cudaMemcpyHostToDevice);
  mark(kReady);
  if (sp.shard > 0) res = nc.ncclAllGather(shard, buf, sp.shard, red.type, h.local(), stream_);
  mark(kReduced);
  copy(out);
  mark(kDone);
  if (res != ncclSuccess) {
    sc.abort();
    return nccl_status(res, "nccl_allgather");
  }
  s = wait_done(kDone, &sc);
  if (!s.ok()) return s;
  end = now_us();
  span(Phase::Collective, "mpi_allreduce", cross_start, start_of(kReady, kDone, end));
  span(Phase::Collective, "nccl_allgather", start_of(kReady, kDone, end), start_of(kReduced, kDone, end));
  span(Phase::MemcpyOut, op, start_of(kReduced, kDone, end), end);
  return Status::Ok();
}

}  // namespace hvd::gpu
