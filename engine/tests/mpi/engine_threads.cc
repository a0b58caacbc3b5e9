// The engine on real MPI ranks, driven from C++ by several threads at once: every op, process sets added
// and removed, the timeline switched on and off, metrics and events read meanwhile, an abort, and new
// engines after each. What the Python tests do, with no Python in the process, so ThreadSanitizer
// (make test-tsan) and AddressSanitizer (make test-asan) see only the engine, the simulator and MPI.
//
//   hvdrun -np 2 build/engine/engine_threads [rounds=40]
//
// Prints "engine_threads: ok" on rank 0 and exits 0 when every result was right.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "engine.h"

namespace {

int g_rank = 0, g_size = 1;
std::atomic<int> g_failures{0};

void expect(bool ok, const std::string& what) {
  if (ok) return;
  if (g_failures++ < 20) std::fprintf(stderr, "engine_threads rank %d: %s\n", g_rank, what.c_str());
}

// Waits for `h` (a hang is a failure: the test's timeout ends it); returns its status.
hvd::Status finish(const std::shared_ptr<hvd::Handle>& h) {
  while (!h->wait_for(std::chrono::milliseconds(100))) {
  }
  return h->status();
}

hvd::TensorEntry entry(hvd::OpType op, const std::string& name, std::vector<int64_t> shape, const void* in,
                       void* out, int32_t set = 0) {
  hvd::TensorEntry e;
  e.request.spec.op = op;
  e.request.spec.reduce = hvd::ReduceOp::Sum;
  e.request.spec.dtype = hvd::DataType::Float32;
  e.request.spec.process_set = set;
  e.request.name = name;
  e.request.shape = std::move(shape);
  e.input = in;
  e.output = out;
  return e;
}

// One thread's share of a round: an allreduce (fused with the other threads'), an allgather of rows that
// differ per rank, a broadcast, an alltoall and a reducescatter on the global set; an allreduce on the
// single-member `set` where this rank is in it; then a blocking call's allreduce (its waiter runs it, or hands
// it back to the engine thread when the other threads' operations are in flight).
void work(hvd::Engine& engine, int thread, int round, int32_t set, bool in_set) {
  const std::string tag = std::to_string(thread) + "." + std::to_string(round % 5);  // names repeat: cache hits
  const int n = g_size;
  const float me = static_cast<float>(g_rank + 1);

  std::vector<float> x(7 + thread, me), sum(x.size());
  auto ar = engine.enqueue(entry(hvd::OpType::Allreduce, "ar." + tag, {static_cast<int64_t>(x.size())}, x.data(),
                                 sum.data()));
  std::vector<float> rows(static_cast<size_t>(g_rank + 1) * 3, me);
  auto ag = engine.enqueue(entry(hvd::OpType::Allgather, "ag." + tag, {g_rank + 1, 3}, rows.data(), nullptr));
  std::vector<float> b(5, me);
  hvd::TensorEntry be = entry(hvd::OpType::Broadcast, "bc." + tag, {5}, b.data(), b.data());
  be.request.spec.root_rank = round % n;
  auto bc = engine.enqueue(std::move(be));
  std::vector<float> a2a(static_cast<size_t>(n) * 2, me);
  auto aa = engine.enqueue(entry(hvd::OpType::Alltoall, "aa." + tag, {2 * n}, a2a.data(), nullptr));
  std::vector<float> rs(static_cast<size_t>(n) * 4, me);
  auto rsh = engine.enqueue(entry(hvd::OpType::Reducescatter, "rs." + tag, {n, 4}, rs.data(), nullptr));
  std::vector<float> sx(3, me), ssum(3);
  std::shared_ptr<hvd::Handle> sh;
  if (in_set) sh = engine.enqueue(entry(hvd::OpType::Allreduce, "set." + tag, {3}, sx.data(), ssum.data(), set));

  const float total = static_cast<float>(n * (n + 1) / 2);
  expect(finish(ar).ok(), "allreduce failed: " + ar->status().message);
  for (float v : sum) expect(v == total, "allreduce result " + std::to_string(v));
  expect(finish(ag).ok(), "allgather failed: " + ag->status().message);
  expect(ag->output.size() == static_cast<size_t>(n * (n + 1) / 2) * 3 * sizeof(float), "allgather size");
  auto* got = reinterpret_cast<const float*>(ag->output.data());
  for (int r = 0, at = 0; r < n; ++r)
    for (int i = 0; i < (r + 1) * 3; ++i, ++at) expect(got[at] == static_cast<float>(r + 1), "allgather value");
  expect(finish(bc).ok(), "broadcast failed: " + bc->status().message);
  for (float v : b) expect(v == static_cast<float>(round % n + 1), "broadcast value");
  expect(finish(aa).ok(), "alltoall failed: " + aa->status().message);
  auto* recv = reinterpret_cast<const float*>(aa->output.data());
  for (int i = 0; i < 2 * n; ++i) expect(recv[i] == static_cast<float>(i / 2 + 1), "alltoall value");
  expect(finish(rsh).ok(), "reducescatter failed: " + rsh->status().message);
  auto* mine = reinterpret_cast<const float*>(rsh->output.data());
  for (int i = 0; i < 4; ++i) expect(mine[i] == total, "reducescatter value");
  if (sh) {
    expect(finish(sh).ok(), "set allreduce failed: " + sh->status().message);
    for (float v : ssum) expect(v == me, "set allreduce value");  // the set has this rank alone
  }
  std::vector<float> one(1, me);
  std::vector<hvd::TensorEntry> blocking;
  blocking.push_back(entry(hvd::OpType::Allreduce, "blocking." + tag, {1}, one.data(), one.data()));
  auto bh = engine.enqueue(std::move(blocking), /*caller_waits=*/true)[0];
  expect(finish(bh).ok(), "blocking allreduce failed: " + bh->status().message);
  expect(one[0] == total, "blocking allreduce value " + std::to_string(one[0]));
}

hvd::Config config(int life) {
  hvd::Config c = hvd::Config::from_env();
  c.fusion_threshold = life == 0 ? c.fusion_threshold : life == 1 ? 0 : 64;
  c.cache_capacity = life == 2 ? 1 : c.cache_capacity;
  c.cycle_time_ms = life == 1 ? 0 : c.cycle_time_ms;
  c.ring_allreduce_bytes = life == 2 ? 1 : c.ring_allreduce_bytes;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 40;
  char timeline[] = "/tmp/engine_threads.XXXXXX";
  if (g_rank == 0 && mkstemp(timeline) < 0) expect(false, "mkstemp");
  for (int life = 0; life < 3; ++life) {  // a new engine each time, with other settings
    hvd::Engine engine(MPI_COMM_WORLD, config(life));
    std::vector<int> last = {g_size - 1};
    const int32_t set = engine.add_process_set(last);
    std::atomic<bool> done{false};
    // Readers of what the engine publishes, while it runs.
    std::thread reader([&] {
      uint64_t seq = 0, dropped = 0;
      while (!done) {
        auto es = engine.drain_events(seq, 1000, &dropped);
        if (!es.empty()) seq = es.back().seq + 1;
        (void)engine.metrics().responses.load();
        (void)engine.stop_status();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    for (int round = 0; round < rounds; ++round) {
      if (round == rounds / 4) engine.start_timeline(timeline, round % 2 == 0);
      if (round == rounds / 2) engine.stop_timeline();
      std::vector<std::thread> threads;
      for (int t = 0; t < 3; ++t)
        threads.emplace_back(work, std::ref(engine), t, round, set, g_rank == g_size - 1);
      for (auto& t : threads) t.join();
    }
    // Every rank has finished its ops before the set goes and the engine stops.
    std::vector<float> z(1);
    expect(finish(engine.enqueue(entry(hvd::OpType::Barrier, "end", {0}, nullptr, nullptr))).ok(), "barrier");
    engine.remove_process_set(set);
    if (life == 2) {  // an abort from the last rank fails a pending op everywhere
      auto h = engine.enqueue(entry(hvd::OpType::Allreduce, "never." + std::to_string(g_rank), {1}, z.data(),
                                    z.data()));
      if (g_rank == g_size - 1) engine.abort("engine_threads: abort test");
      hvd::Status s = finish(h);
      expect(s.code == hvd::Status::Code::Aborted, "an abort left status " + std::to_string(int(s.code)));
    }
    done = true;
    reader.join();
    engine.shutdown();
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (g_rank == 0) std::remove(timeline);
  int failures = g_failures, all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("engine_threads: %s\n", all ? "FAILED" : "ok");
  MPI_Finalize();
  return all ? 1 : 0;
}
