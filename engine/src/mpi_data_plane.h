// The engine's data plane on real ranks: host tensors through the MPI collectives (collectives.h),
// GPU tensors through NCCL (gpu/gpu_collectives.h), with the buffers they keep between responses.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "config.h"
#include "data_plane.h"
#include "reduction.h"

namespace hvd {
namespace gpu {
class GpuCollectives;
}

class MpiDataPlane final : public DataPlane {
 public:
  // `abandoned` is polled while a GPU collective waits: true when an abort must cut it short.
  MpiDataPlane(const Config& config, int global_rank, std::function<bool()> abandoned);
  ~MpiDataPlane() override;
  MpiDataPlane(const MpiDataPlane&) = delete;
  MpiDataPlane& operator=(const MpiDataPlane&) = delete;

  Status run(const Response& r, std::vector<TensorEntry*>& entries, const ProcessSet& set,
             const Span& span) override;
  void release_set(int32_t id) override;

 private:
  const int global_rank_;
  const int64_t sync_reduce_bytes_, ring_allreduce_bytes_, max_count_;
  Reductions reductions_;
  std::vector<char> fusion_buffer_;
  std::vector<char> ring_buffer_;  // the ring collectives' blocks in flight, kept between calls
  std::unique_ptr<gpu::GpuCollectives> gpu_;  // GPU tensors; touches CUDA only once one arrives
};

}  // namespace hvd
