// The registered process sets: their global ranks and, on members, their communicator.
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace hvd {

struct ProcessSet {
  int32_t id = 0;
  std::vector<int> ranks;      // global ranks, sorted
  MPI_Comm comm = MPI_COMM_NULL;  // MPI_COMM_NULL on ranks outside the set
  int rank_in_set(int global_rank) const;
};

class ProcessSetTable {
 public:
  void add(std::shared_ptr<const ProcessSet> ps);
  std::shared_ptr<const ProcessSet> remove(int32_t id);
  std::shared_ptr<const ProcessSet> get(int32_t id) const;
  // Whether a registered set leaves out global rank `rank`.
  bool any_without(int rank) const;
  // Empties the table, returning every set (the engine frees their communicators when it stops).
  std::vector<std::shared_ptr<const ProcessSet>> take_all();

 private:
  mutable std::mutex mu_;
  std::map<int32_t, std::shared_ptr<const ProcessSet>> sets_;
};

}  // namespace hvd
