#include "mpi_data_plane.h"

#include "clock.h"
#include "collectives.h"
#include "gpu/gpu_collectives.h"

namespace hvd {

MpiDataPlane::MpiDataPlane(const Config& config, int global_rank, std::function<bool()> abandoned)
    : global_rank_(global_rank),
      sync_reduce_bytes_(config.sync_reduce_bytes),
      ring_allreduce_bytes_(config.ring_allreduce_bytes),
      max_count_(config.test_mpi_max_count) {
  gpu::CommOptions options;
  options.force_staging = config.gpu_staging;
  options.hierarchical = config.hierarchical_allreduce;
  options.ranks_per_host = config.test_ranks_per_host;
  options.batch_copies = config.gpu_batch_copies;
  gpu_ = std::make_unique<gpu::GpuCollectives>(gpu::runtime(), options, std::move(abandoned));
}

MpiDataPlane::~MpiDataPlane() = default;

Status MpiDataPlane::run(const Response& r, std::vector<TensorEntry*>& entries, const ProcessSet& set,
                         const Span& span) {
  CollectiveContext c{set, global_rank_, reductions_, fusion_buffer_, ring_buffer_,
                      [&](Phase p, int64_t start) { span(p, op_name(r.spec.op), start, now_us()); },
                      sync_reduce_bytes_, ring_allreduce_bytes_, max_count_};
  if (r.spec.memory == Memory::Cuda) return gpu_->run(c, r, entries, span);
  switch (r.spec.op) {
    case OpType::Allreduce: return run_allreduce(c, r, entries);
    case OpType::Allgather: return run_allgather(c, r, *entries[0]);
    case OpType::Broadcast: return run_broadcast(c, r, *entries[0]);
    case OpType::Alltoall: return run_alltoall(c, r, *entries[0]);
    case OpType::Reducescatter: return run_reducescatter(c, r, *entries[0]);
    case OpType::Barrier: return run_barrier(c);
    case OpType::Join: break;  // Engine::finish_join: no data phase
  }
  return Status::Error(Status::Code::Internal, std::string("no data phase for ") + op_name(r.spec.op));
}

void MpiDataPlane::release_set(int32_t id) { gpu_->release_set(id); }

}  // namespace hvd
