// The engine's allreduce against MPI_Allreduce called directly, from C++ with no Python in the way.
//
//   hvdrun -np 2 build/engine/engine_allreduce_bench [bytes=4194304] [rounds=5] [calls=300] [tensors=1] [in|out]
//
// Rounds alternate the two sides on the same float32 buffers: `tensors` of `bytes` each, enqueued as one
// group (a grouped allreduce) against MPI_Allreduce tensor by tensor; in place, or with `out` from each
// buffer into a preallocated output of its own. Rank 0 prints, per round, the
// p10/p50/p90 of each side's per-call time in microseconds, the mean time the engine spent inside the
// collective itself (its COLLECTIVE span), and the mean time from enqueue to the collective's start
// (negotiation: the request to rank 0 and the response back), both from the engine's own metrics.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "config.h"
#include "engine.h"

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

template <typename F>
std::vector<double> time_calls(int calls, F&& call) {
  std::vector<double> us;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < calls; ++i) {
    auto t = Clock::now();
    call();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int64_t bytes = argc > 1 ? std::atoll(argv[1]) : 4 << 20;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const int calls = argc > 3 ? std::atoi(argv[3]) : 300;
  const int tensors = argc > 4 ? std::max(std::atoi(argv[4]), 1) : 1;
  const int64_t count = std::max<int64_t>(bytes / 4, 1);
  const bool out_of_place = argc > 5 && std::string(argv[5]) == "out";
  std::vector<std::vector<float>> bufs(static_cast<size_t>(tensors), std::vector<float>(static_cast<size_t>(count), 1.f));
  std::vector<std::vector<float>> outs = out_of_place ? bufs : std::vector<std::vector<float>>();
  auto out_of = [&](size_t i) { return out_of_place ? outs[i].data() : bufs[i].data(); };
  {
    hvd::Engine engine(MPI_COMM_WORLD, hvd::Config::from_env());
    auto through_engine = [&] {
      std::vector<hvd::TensorEntry> group(bufs.size());
      for (size_t i = 0; i < bufs.size(); ++i) {
        hvd::TensorEntry& e = group[i];
        e.request.spec.op = hvd::OpType::Allreduce;
        e.request.spec.reduce = hvd::ReduceOp::Sum;
        e.request.spec.dtype = hvd::DataType::Float32;
        e.request.name = "bench." + std::to_string(i);
        e.request.shape = {count};
        e.input = bufs[i].data();
        e.output = out_of(i);
      }
      auto handles = engine.enqueue(std::move(group), /*caller_waits=*/true);
      for (auto it = handles.rbegin(); it != handles.rend(); ++it)
        while (!(*it)->wait_for(std::chrono::milliseconds(50))) {
        }
    };
    auto direct = [&] {
      for (size_t i = 0; i < bufs.size(); ++i)
        MPI_Allreduce(out_of_place ? bufs[i].data() : MPI_IN_PLACE, out_of(i), static_cast<int>(count), MPI_FLOAT,
                      MPI_SUM, MPI_COMM_WORLD);
    };
    time_calls(std::min(calls, 20), through_engine);  // warm-up: the response cache, the buffer's pages
    if (rank == 0)
      std::printf("%d tensor(s) of %lld bytes %s, %d calls per side and round (us)\n", tensors,
                  static_cast<long long>(bytes), out_of_place ? "out of place" : "in place", calls);
    for (int r = 0; r < rounds; ++r) {
      auto mpi = time_calls(calls, direct);
      const hvd::Metrics& m = engine.metrics();
      const int64_t collective = m.collective_us.load(), negotiate = m.negotiate_us.load();
      auto ours = time_calls(calls, through_engine);
      double span = static_cast<double>(m.collective_us.load() - collective) / calls;
      double asked = static_cast<double>(m.negotiate_us.load() - negotiate) / calls / tensors;  // per tensor
      if (rank == 0)
        std::printf("MPI p10/p50/p90 %7.1f %7.1f %7.1f   engine %7.1f %7.1f %7.1f   in the collective %7.1f"
                    "   negotiating %7.1f\n",
                    percentile(mpi, .1), percentile(mpi, .5), percentile(mpi, .9), percentile(ours, .1),
                    percentile(ours, .5), percentile(ours, .9), span, asked);
    }
    engine.shutdown();
  }
  MPI_Finalize();
  return 0;
}
