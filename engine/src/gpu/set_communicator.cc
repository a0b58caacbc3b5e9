#include "gpu/set_communicator.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "log.h"

namespace hvd::gpu {
namespace {

// What each member tells the others before a communicator is made.
struct MemberInfo {
  char gpu[192];        // "host|PCI bus id": two members with the same one share a GPU
  uint8_t ok;           // this rank's GPU setup worked
  uint8_t nccl;         // NCCL is loaded here
  uint8_t force_staging;
  uint8_t pad[5];
};

std::string gpu_key(const Runtime& rt, int device) {
  char host[128] = {0};
  ::gethostname(host, sizeof(host) - 1);
  char bus[64] = {0};
  if (rt.cuda().cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess) {
    rt.cuda().cudaGetLastError();
    std::snprintf(bus, sizeof(bus), "device %d", device);
  }
  return std::string(host) + "|" + bus;
}

}  // namespace

std::unique_ptr<SetCommunicator> SetCommunicator::create(const Runtime& rt, const ProcessSet& set, int global_rank,
                                                         int device, const CommOptions& options,
                                                         const Status& local, Status* error) {
  const bool force_staging = options.force_staging;
  const int n = static_cast<int>(set.ranks.size());
  const int me = set.rank_in_set(global_rank);
  MemberInfo mine{};
  std::snprintf(mine.gpu, sizeof(mine.gpu), "%s", gpu_key(rt, device).c_str());
  mine.ok = local.ok();
  mine.nccl = rt.nccl_ready();
  mine.force_staging = force_staging;
  std::vector<MemberInfo> all(n);
  MPI_Allgather(&mine, sizeof(MemberInfo), MPI_BYTE, all.data(), sizeof(MemberInfo), MPI_BYTE, set.comm);

  std::string reason;
  std::map<std::string, std::vector<int>> by_gpu;
  for (int i = 0; i < n; ++i) {
    if (!all[i].ok) {
      *error = local.ok() ? Status::Error(Status::Code::Internal, "GPU setup failed on rank " +
                                                                      std::to_string(set.ranks[i]))
                          : local;
      return nullptr;
    }
    by_gpu[all[i].gpu].push_back(set.ranks[i]);
    if (all[i].force_staging && reason.empty()) reason = "JUPYTER_HVD_GPU_STAGING=1";
    if (!all[i].nccl && reason.empty()) reason = "NCCL is not available on rank " + std::to_string(set.ranks[i]);
  }
  for (const auto& kv : by_gpu) {
    if (kv.second.size() < 2 || !reason.empty()) continue;
    reason = "ranks";
    for (size_t k = 0; k < kv.second.size(); ++k) reason += (k ? ", " : " ") + std::to_string(kv.second[k]);
    reason += " share one GPU (" + kv.first + ") and NCCL needs a GPU per rank";
  }

  auto sc = std::make_unique<SetCommunicator>(rt, device);
  if (reason.empty()) {
    const NcclApi& nc = rt.nccl();
    struct {
      ncclUniqueId id;
      int32_t ok;
    } root{};
    if (me == 0) root.ok = nc.ncclGetUniqueId(&root.id) == ncclSuccess;
    MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, set.comm);
    int ok = 0;
    std::string why;
    if (root.ok) {
      ncclResult_t res = nc.ncclCommInitRank(&sc->comm_, n, root.id, me);
      ok = res == ncclSuccess;
      if (!ok) {
        why = rt.nccl_error(res);
        sc->comm_ = nullptr;
      }
    } else {
      why = "ncclGetUniqueId failed on rank " + std::to_string(set.ranks[0]);
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, set.comm);
    if (!all_ok) {
      if (sc->comm_) rt.nccl().ncclCommDestroy(sc->comm_);
      sc->comm_ = nullptr;
      reason = "NCCL could not make a communicator" + (why.empty() ? std::string() : ": " + why);
    }
  }
  if (reason.empty() && options.hierarchical)
    sc->hierarchy_ = HostHierarchy::create(rt, set, global_rank, options.ranks_per_host);
  if (!reason.empty()) {
    sc->staged_reason_ = reason;
    if (me == 0 && !force_staging)
      log::warning("process set " + std::to_string(set.id) + ": " + reason +
                   "; its GPU tensors go through host memory and MPI instead (slower)");
  }
  return sc;
}

void SetCommunicator::abort() {
  if (comm_ && !broken_) rt_.nccl().ncclCommAbort(comm_);
  if (hierarchy_) hierarchy_->abort();
  broken_ = true;
}

SetCommunicator::~SetCommunicator() {
  if (comm_ && !broken_) rt_.nccl().ncclCommDestroy(comm_);
}

}  // namespace hvd::gpu
