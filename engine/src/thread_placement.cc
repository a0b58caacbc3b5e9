#include "thread_placement.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <string>
#include <thread>

#include "log.h"

namespace hvd {

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int host_cores(MPI_Comm local) {
  cpu_set_t mine, all;
  CPU_ZERO(&mine);
  CPU_ZERO(&all);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) return usable_cores();
  static_assert(sizeof(cpu_set_t) % sizeof(unsigned long) == 0, "a cpu_set_t is a whole number of longs");
  MPI_Allreduce(&mine, &all, static_cast<int>(sizeof(cpu_set_t) / sizeof(unsigned long)), MPI_UNSIGNED_LONG,
                MPI_BOR, local);
  return CPU_COUNT(&all);
}

void pin_thread(const std::vector<int>& cores, int local_rank, int local_size) {
  if (static_cast<int>(cores.size()) < local_size) {
    log::warning("HOROVOD_THREAD_AFFINITY lists " + std::to_string(cores.size()) + " cores for " +
                 std::to_string(local_size) + " ranks on this host; the engine thread is not pinned");
    return;
  }
  const int core = cores[local_rank];
  cpu_set_t set;
  CPU_ZERO(&set);
  if (core < CPU_SETSIZE) CPU_SET(core, &set);
  if (core >= CPU_SETSIZE || pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    log::warning("HOROVOD_THREAD_AFFINITY: cannot pin the engine thread to core " + std::to_string(core) +
                 "; it is not pinned");
    return;
  }
  log::write(log::Level::Info, "engine thread pinned to core " + std::to_string(core));
}

}  // namespace hvd
