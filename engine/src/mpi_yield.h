// Open MPI's yield-when-idle switch (the mpi_yield_when_idle setting), turned at run time.
//
// A rank's engine runs its collectives while the rank computes (gradients reduced during backward), and
// where each rank has about one core, MPI polling for a late peer takes the core the computation needs.
// Open MPI yields it only when told to, and telling it to for good makes each small operation wait for
// the scheduler. So as each collective starts, the engine turns yielding on only where its thread's core
// is contended, no caller drives the engine itself (progress.h) and the collective is not a tiny one
// (YieldInside).
#pragma once

#include <cstdint>
#include <functional>

namespace hvd {

// The switch of the MPI library this process has loaded, or an empty function where it has none (not
// Open MPI) or where it yields already (oversubscribed, or asked to with OMPI_MCA_mpi_yield_when_idle=1):
// that choice is kept.
std::function<void(bool)> mpi_yield_switch();

// Whether a collective of `bytes` lets MPI yield the core while it waits for a peer: only where the engine
// thread's core is `contended`, no caller is `driven`-ing the engine as the collective starts (the caller of
// a lone operation, which spins for it: yielding would make it wait for the scheduler), and it moves at
// least kMinBytes (a flag or a metric, whose caller may wait where the engine cannot see it: MXNet's
// wait_to_read). A caller that sleeps until its results come (gradients in step(), many at once) leaves its
// core to whatever else is runnable: the peer's engine thread that the collective waits for, or the rank's
// own computation. A caller that starts to drive while a collective runs changes only the next one's choice.
struct YieldInside {
  static constexpr int64_t kMinBytes = 1 << 10;
  static bool wanted(bool contended, bool driven, int64_t bytes) {
    return contended && !driven && bytes >= kMinBytes;
  }
};

// Whether another thread has wanted the calling thread's core lately: the thread's involuntary context
// switches (preemptions, and yields that handed the core over) grew within the last kHoldUs. Always
// sampled by the same thread.
class CoreContention {
 public:
  bool sample(int64_t now_us);

 private:
  static constexpr int64_t kEveryUs = 1000, kHoldUs = 200000;
  int64_t next_us_ = 0, until_us_ = 0;
  long switches_ = -1;  // -1 until the first sample, which only takes the count
};

}  // namespace hvd
