// A simulated NCCL (libjhvd_sim_nccl.so) for the simulated CUDA device of sim_cudart.cc, with the
// calls the engine makes. It lets CI run the engine's GPU code path without a GPU
// (JUPYTER_HVD_NCCL_LIB names it); it proves the engine's logic, not NCCL's behaviour.
//
// Ranks are MPI processes (MPI is initialised with MPI_THREAD_MULTIPLE before any call). A
// communicator is an MPI communicator over its members, made from MPI_COMM_WORLD without a
// collective over it. Each call is checked at once (buffers inside device memory of the
// communicator's device, types, ops, ranks), then runs in order on its CUDA stream, as a host
// function: non-blocking MPI into the simulator's own buffers, polled so that ncclCommAbort from
// another thread stops it, then the results into the caller's buffers. Reductions gather every
// rank's input and reduce it in rank order, so results are deterministic. The calls of a group
// (ncclGroupStart/End) run as one host function that posts all their transfers before waiting.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "half.h"
#include "sim_cudart.h"

using ncclResult_t = int;

struct ncclUniqueId {
  char internal[128];
};

namespace {

constexpr ncclResult_t ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
                       ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7;
enum DataType { ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64, ncclFloat16, ncclFloat32,
                ncclFloat64, ncclBfloat16, kNumTypes };
constexpr size_t kTypeSize[kNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
enum RedOp { ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, ncclNumOps };
constexpr int kPreMulSum = ncclNumOps;  // a Call's op for any ncclRedOpCreatePreMulSum op
constexpr int ncclScalarHostImmediate = 1;

constexpr int kVersion = 23203;  // 2.32.3
constexpr uint32_t kIdMagic = 0x6a687664;
// Tags on MPI_COMM_WORLD while a communicator is made: a member's hello, the root's answer, and
// MPI_Comm_create_group, each in a span of its own, chosen by the id's counter.
constexpr int kTagBase = 0x6a00, kTagSpan = 0x400;
constexpr int kP2pTag = 1;                  // ncclSend/ncclRecv, on the communicator's own MPI communicator
constexpr size_t kChunk = size_t{1} << 30;  // bytes per MPI call: below INT_MAX, a multiple of every type's size

// What an ncclUniqueId holds: the world rank of the process that made it, and which one it was.
struct IdBody {
  uint32_t magic;
  int32_t root;
  uint64_t counter;
};

struct CustomOp {
  int type;
  std::vector<char> scalar;  // one value of `type`
};

}  // namespace

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int nranks = 0, rank = 0, device = 0;
  std::atomic<bool> aborted{false};
  std::atomic<ncclResult_t> async_error{ncclSuccess};
  std::mutex mu;  // guards the members below
  std::condition_variable cv;
  int outstanding = 0;  // calls enqueued on a stream and not yet finished
  std::map<int, CustomOp> ops;
  int next_op = ncclNumOps;
};

namespace {

// Communicators by handle; a destroyed or aborted one is gone, while its queued calls keep it alive.
struct Registry {
  std::mutex mu;
  std::map<ncclComm*, std::shared_ptr<ncclComm>> comms;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: stream threads may outlive static destruction
  return *r;
}

// One call, from its arguments to its results.
enum class Kind { AllReduce, Broadcast, AllGather, ReduceScatter, Send, Recv };
struct Call {
  Kind kind;
  std::shared_ptr<ncclComm> comm;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;  // the call's count in bytes
  int type = 0, op = ncclSum;
  std::vector<char> scalar;  // for kPreMulSum
  int peer = 0;              // Broadcast: the root; Send, Recv: the peer
  std::vector<char> in, out;  // what MPI reads and writes
};

// The calls of one stream operation: one call, or a group's.
struct Task {
  std::vector<std::unique_ptr<Call>> calls;
};

// ncclGroupStart/End of this thread: the calls collected, and the first error among them.
struct Group {
  int depth = 0;
  cudaStream_t stream = nullptr;
  ncclResult_t error = ncclSuccess;
  std::vector<std::unique_ptr<Call>> calls;
};
thread_local Group tl_group;

// Says why a call is refused and returns `r`; inside a group, the group fails too.
__attribute__((format(printf, 2, 3))) ncclResult_t refuse(ncclResult_t r, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  jhvd_sim_vreport("sim-nccl", fmt, ap);
  va_end(ap);
  if (tl_group.depth > 0 && tl_group.error == ncclSuccess) tl_group.error = r;
  return r;
}

bool mpi_running() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

// The communicator a handle names, taken out of the registry when `take`; null, after refusing
// `name`, for a handle that is null, destroyed or aborted.
std::shared_ptr<ncclComm> find_comm(const char* name, ncclComm* handle, bool take = false) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  auto it = r.comms.find(handle);
  if (it == r.comms.end()) {
    refuse(ncclInvalidArgument, "%s: %p is not a communicator (null, destroyed or aborted)", name,
           static_cast<void*>(handle));
    return nullptr;
  }
  auto comm = it->second;
  if (take) r.comms.erase(it);
  return comm;
}

// Calls f(offset, length) for each chunk of `bytes`.
template <typename F>
void for_chunks(size_t bytes, F f) {
  for (size_t off = 0; off < bytes; off += kChunk) f(off, static_cast<int>(std::min(kChunk, bytes - off)));
}

// ---- Reductions ----

struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};

// A stored value (T) as the reduction computes with it: 16-bit floats in float, rounded back
// after each step.
template <typename T>
struct Num {
  static T load(T v) { return v; }
  static T store(T v) { return v; }
};
template <>
struct Num<Half> {
  static float load(Half h) { return hvd::half_to_float(h.bits); }
  static Half store(float f) { return {hvd::float_to_half(f)}; }
};
template <>
struct Num<BFloat> {
  static float load(BFloat h) { return hvd::bf16_to_float(h.bits); }
  static BFloat store(float f) { return {hvd::float_to_bf16(f)}; }
};

// Integer sums and products wrap around, as on a GPU.
template <typename A>
A add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename A>
A mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename A>
A combine(int op, A a, A b) {
  switch (op) {
    case ncclProd: return mul(a, b);
    case ncclMax: return a < b ? b : a;
    case ncclMin: return b < a ? b : a;
    default: return add(a, b);  // Sum, Avg, PreMulSum
  }
}

// dst[i] = the reduction over ranks r of blocks[r * block_bytes + i], in rank order.
template <typename T>
void reduce_typed(const Call& c, const char* blocks, size_t block_bytes, char* dst) {
  using N = Num<T>;
  const int n = c.comm->nranks;
  auto at = [&](const char* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  };
  const auto factor = c.op == kPreMulSum ? N::load(at(c.scalar.data())) : decltype(N::load(T{})){};
  for (size_t i = 0; i < block_bytes / sizeof(T); ++i) {
    T acc{};
    for (int r = 0; r < n; ++r) {
      T x = at(blocks + r * block_bytes + i * sizeof(T));
      if (c.op == kPreMulSum) x = N::store(mul(N::load(x), factor));
      acc = r == 0 ? x : N::store(combine(c.op, N::load(acc), N::load(x)));
    }
    if (c.op == ncclAvg) acc = N::store(static_cast<decltype(N::load(acc))>(N::load(acc) / n));
    std::memcpy(dst + i * sizeof(T), &acc, sizeof(T));
  }
}

void reduce_blocks(const Call& c, const char* blocks, size_t block_bytes, char* dst) {
  switch (c.type) {
    case ncclInt8: return reduce_typed<int8_t>(c, blocks, block_bytes, dst);
    case ncclUint8: return reduce_typed<uint8_t>(c, blocks, block_bytes, dst);
    case ncclInt32: return reduce_typed<int32_t>(c, blocks, block_bytes, dst);
    case ncclUint32: return reduce_typed<uint32_t>(c, blocks, block_bytes, dst);
    case ncclInt64: return reduce_typed<int64_t>(c, blocks, block_bytes, dst);
    case ncclUint64: return reduce_typed<uint64_t>(c, blocks, block_bytes, dst);
    case ncclFloat16: return reduce_typed<Half>(c, blocks, block_bytes, dst);
    case ncclFloat32: return reduce_typed<float>(c, blocks, block_bytes, dst);
    case ncclFloat64: return reduce_typed<double>(c, blocks, block_bytes, dst);
    case ncclBfloat16: return reduce_typed<BFloat>(c, blocks, block_bytes, dst);
  }
}

// Reduces every rank's `bytes`, gathered chunk by chunk (see post), into dst.
void reduce_gathered(const Call& c, size_t bytes, char* dst) {
  const size_t n = static_cast<size_t>(c.comm->nranks);
  for_chunks(bytes, [&](size_t off, int len) { reduce_blocks(c, c.out.data() + n * off, len, dst + off); });
}

// ---- Running calls on a stream ----

// Posts a call's transfers. An allgather, chunk by chunk: rank r's part of the chunk at `off`
// lands at out[n * off + r * len].
void post(Call& c, std::vector<MPI_Request>& reqs) {
  const ncclComm& m = *c.comm;
  const size_t n = static_cast<size_t>(m.nranks);
  const char* send = static_cast<const char*>(c.send);
  auto req = [&] { return &reqs.emplace_back(); };
  switch (c.kind) {
    case Kind::AllReduce:
    case Kind::AllGather:
    case Kind::ReduceScatter: {
      const size_t mine = c.kind == Kind::ReduceScatter ? n * c.bytes : c.bytes;
      c.in.assign(send, send + mine);
      c.out.resize(n * mine);
      for_chunks(mine, [&](size_t off, int len) {
        MPI_Iallgather(c.in.data() + off, len, MPI_BYTE, c.out.data() + n * off, len, MPI_BYTE, m.mpi, req());
      });
      break;
    }
    case Kind::Broadcast:
      if (m.rank == c.peer) c.out.assign(send, send + c.bytes);
      else c.out.resize(c.bytes);
      for_chunks(c.bytes, [&](size_t off, int len) {
        MPI_Ibcast(c.out.data() + off, len, MPI_BYTE, c.peer, m.mpi, req());
      });
      break;
    case Kind::Send:
      c.in.assign(send, send + c.bytes);
      for_chunks(c.bytes, [&](size_t off, int len) {
        MPI_Isend(c.in.data() + off, len, MPI_BYTE, c.peer, kP2pTag, m.mpi, req());
      });
      break;
    case Kind::Recv:
      c.out.resize(c.bytes);
      for_chunks(c.bytes, [&](size_t off, int len) {
        MPI_Irecv(c.out.data() + off, len, MPI_BYTE, c.peer, kP2pTag, m.mpi, req());
      });
      break;
  }
}

// Writes a call's results, once its transfers are done.
void finish(Call& c) {
  const size_t n = static_cast<size_t>(c.comm->nranks);
  char* recv = static_cast<char*>(c.recv);
  switch (c.kind) {
    case Kind::AllReduce:
      reduce_gathered(c, c.bytes, recv);
      break;
    case Kind::ReduceScatter: {
      std::vector<char> all(n * c.bytes);
      reduce_gathered(c, n * c.bytes, all.data());
      std::memcpy(recv, all.data() + c.comm->rank * c.bytes, c.bytes);
      break;
    }
    case Kind::AllGather:
      for_chunks(c.bytes, [&](size_t off, int len) {
        for (size_t r = 0; r < n; ++r) std::memcpy(recv + r * c.bytes + off, c.out.data() + n * off + r * len, len);
      });
      break;
    case Kind::Broadcast:
    case Kind::Recv:
      std::memcpy(recv, c.out.data(), c.bytes);
      break;
    case Kind::Send:
      break;
  }
}

// Runs a task's calls. False when it gave up (a communicator was aborted, or MPI failed) with
// transfers that may still be pending, so their buffers must stay.
bool execute(Task& t) {
  auto aborted = [&] {
    return std::any_of(t.calls.begin(), t.calls.end(), [](const auto& c) { return c->comm->aborted.load(); });
  };
  if (aborted()) return true;
  std::vector<MPI_Request> reqs;
  for (auto& c : t.calls) post(*c, reqs);
  while (true) {
    int done = 0;
    if (MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      for (auto& c : t.calls) c->comm->async_error = ncclSystemError;
      return false;
    }
    if (done) break;
    if (aborted()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  for (auto& c : t.calls) finish(*c);
  return true;
}

void settle(Task& t) {
  for (auto& c : t.calls) {
    std::lock_guard<std::mutex> g(c->comm->mu);
    --c->comm->outstanding;
    c->comm->cv.notify_all();
  }
}

// The host function of a task, on its stream's thread.
void run_task(void* arg) {
  std::unique_ptr<Task> t(static_cast<Task*>(arg));
  const bool clean = execute(*t);
  settle(*t);
  if (!clean) t.release();  // MPI may still write into its buffers
}

ncclResult_t enqueue(std::vector<std::unique_ptr<Call>> calls, cudaStream_t stream) {
  auto t = std::make_unique<Task>();
  t->calls = std::move(calls);
  for (auto& c : t->calls) {
    std::lock_guard<std::mutex> g(c->comm->mu);
    ++c->comm->outstanding;
  }
  if (cudaLaunchHostFunc(stream, run_task, t.get()) != cudaSuccess) {
    settle(*t);
    return refuse(ncclUnhandledCudaError, "cudaLaunchHostFunc failed on stream %p", static_cast<void*>(stream));
  }
  t.release();  // run_task owns it now
  return ncclSuccess;
}

// Runs a checked call on `stream`, or adds it to this thread's group.
ncclResult_t submit(std::unique_ptr<Call> c, cudaStream_t stream) {
  Group& g = tl_group;
  if (g.depth == 0) {
    std::vector<std::unique_ptr<Call>> one;
    one.push_back(std::move(c));
    return enqueue(std::move(one), stream);
  }
  if (!g.calls.empty() && g.stream != stream)
    return refuse(ncclInvalidUsage, "the calls of a group must use one stream (%p, then %p)",
                  static_cast<void*>(g.stream), static_cast<void*>(stream));
  g.stream = stream;
  g.calls.push_back(std::move(c));
  return ncclSuccess;
}

// ---- Checking calls ----

// A call on `comm` with a valid communicator, data type and stream; null after refusing.
std::unique_ptr<Call> make_call(const char* name, Kind kind, ncclComm* comm, int type, size_t count,
                                cudaStream_t stream) {
  auto c = std::make_unique<Call>();
  c->kind = kind;
  c->comm = find_comm(name, comm);
  if (!c->comm) return nullptr;
  if (type < 0 || type >= kNumTypes) {
    refuse(ncclInvalidArgument, "%s: data type %d", name, type);
    return nullptr;
  }
  int device = -1;
  if (cudaStreamGetDevice(stream, &device) != cudaSuccess) {
    refuse(ncclInvalidArgument, "%s: stream %p is not a CUDA stream", name, static_cast<void*>(stream));
    return nullptr;
  }
  if (device != c->comm->device) {
    refuse(ncclInvalidArgument, "%s: the stream is on cuda:%d, the communicator on cuda:%d", name, device,
           c->comm->device);
    return nullptr;
  }
  c->type = type;
  c->bytes = count * kTypeSize[type];
  return c;
}

bool check_buffer(const char* name, const char* what, const void* p, size_t bytes, const Call& c) {
  if (jhvd_sim_in_device_memory(p, bytes, c.comm->device)) return true;
  refuse(ncclInvalidArgument, "%s: %s [%p, +%zu bytes) is not inside a device allocation of cuda:%d", name, what, p,
         bytes, c.comm->device);
  return false;
}

bool check_rank(const char* name, const char* what, int r, const Call& c) {
  if (r >= 0 && r < c.comm->nranks) return true;
  refuse(ncclInvalidArgument, "%s: %s %d of a communicator of %d", name, what, r, c.comm->nranks);
  return false;
}

// Sets the call's op: a built-in one, or a PreMulSum op of the communicator for this data type.
bool set_op(const char* name, int op, Call& c) {
  if (op >= 0 && op < ncclNumOps) {
    c.op = op;
    return true;
  }
  std::lock_guard<std::mutex> g(c.comm->mu);
  auto it = c.comm->ops.find(op);
  if (it == c.comm->ops.end() || it->second.type != c.type) {
    refuse(ncclInvalidArgument, "%s: op %d is not an op of this communicator for data type %d", name, op, c.type);
    return false;
  }
  c.op = kPreMulSum;
  c.scalar = it->second.scalar;
  return true;
}

// Submits a checked call; a call with no data is checked, but does nothing.
ncclResult_t submit_if_data(std::unique_ptr<Call> c, cudaStream_t stream) {
  return c->bytes ? submit(std::move(c), stream) : ncclSuccess;
}

}  // namespace

// ---- The API ----

JHVD_SIM_API ncclResult_t ncclGetVersion(int* version) {
  if (!version) return ncclInvalidArgument;
  *version = kVersion;
  return ncclSuccess;
}

JHVD_SIM_API const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}

JHVD_SIM_API ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<uint64_t> counter{0};
  if (!id) return refuse(ncclInvalidArgument, "ncclGetUniqueId: null id");
  if (!mpi_running()) return refuse(ncclSystemError, "ncclGetUniqueId: MPI is not running");
  IdBody body{kIdMagic, 0, counter++};
  MPI_Comm_rank(MPI_COMM_WORLD, &body.root);
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &body, sizeof(body));
  return ncclSuccess;
}

// Blocking and collective over the nranks callers: each member tells the id's root (rank 0)
// its world rank, rank, device and host; the root answers everyone with the world ranks in rank
// order (and whether two members share a device); then the members make an MPI communicator.
JHVD_SIM_API ncclResult_t ncclCommInitRank(ncclComm** out, int nranks, ncclUniqueId id, int rank) {
  struct Member {
    int world, rank, device;
    uint64_t host;
  };
  IdBody body;
  std::memcpy(&body, id.internal, sizeof(body));
  if (!out || body.magic != kIdMagic || nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument, "ncclCommInitRank: bad arguments (rank %d of %d, or not an ncclUniqueId)", rank,
                  nranks);
  if (!mpi_running()) return refuse(ncclSystemError, "ncclCommInitRank: MPI is not running");
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  Member me{0, rank, 0, std::hash<std::string>()(host)};
  MPI_Comm_rank(MPI_COMM_WORLD, &me.world);
  cudaGetDevice(&me.device);
  if (rank == 0 && body.root != me.world)
    return refuse(ncclInvalidUsage, "ncclCommInitRank: rank 0 is world rank %d, but world rank %d made the id",
                  me.world, body.root);

  const int tag = kTagBase + static_cast<int>(body.counter % kTagSpan);
  std::vector<int> worlds(nranks + 1);  // then 1 when no two members share a device
  if (rank == 0) {
    std::vector<Member> members(nranks);
    members[0] = me;
    for (int i = 1; i < nranks; ++i) {
      Member m;
      MPI_Recv(&m, sizeof(m), MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (m.rank > 0 && m.rank < nranks) members[m.rank] = m;
    }
    worlds[nranks] = 1;
    for (int i = 0; i < nranks; ++i) {
      worlds[i] = members[i].world;
      for (int j = 0; j < i; ++j)
        if (members[j].host == members[i].host && members[j].device == members[i].device) worlds[nranks] = 0;
    }
    for (int i = 1; i < nranks; ++i)
      MPI_Send(worlds.data(), nranks + 1, MPI_INT, members[i].world, tag + kTagSpan, MPI_COMM_WORLD);
  } else {
    MPI_Send(&me, sizeof(me), MPI_BYTE, body.root, tag, MPI_COMM_WORLD);
    MPI_Recv(worlds.data(), nranks + 1, MPI_INT, body.root, tag + kTagSpan, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (!worlds[nranks])
    return refuse(ncclInvalidUsage, "ncclCommInitRank: duplicate GPU detected (two members on one device of a host)");

  auto comm = std::make_shared<ncclComm>();
  comm->nranks = nranks;
  comm->rank = rank;
  comm->device = me.device;
  MPI_Group world_group, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, nranks, worlds.data(), &group);
  const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag + 2 * kTagSpan, &comm->mpi);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  if (rc != MPI_SUCCESS) return refuse(ncclSystemError, "ncclCommInitRank: MPI_Comm_create_group failed (%d)", rc);
  MPI_Comm_set_errhandler(comm->mpi, MPI_ERRORS_RETURN);
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  r.comms[comm.get()] = comm;
  *out = comm.get();
  return ncclSuccess;
}

// Waits for the communicator's queued calls, then frees it (collective, like MPI_Comm_free).
JHVD_SIM_API ncclResult_t ncclCommDestroy(ncclComm* handle) {
  auto comm = find_comm("ncclCommDestroy", handle, true);
  if (!comm) return ncclInvalidArgument;
  std::unique_lock<std::mutex> lk(comm->mu);
  comm->cv.wait(lk, [&] { return comm->outstanding == 0; });
  if (mpi_running()) MPI_Comm_free(&comm->mpi);
  return ncclSuccess;
}

// Stops the communicator's calls without waiting for peers; its MPI communicator is left, since
// freeing it would be collective.
JHVD_SIM_API ncclResult_t ncclCommAbort(ncclComm* handle) {
  auto comm = find_comm("ncclCommAbort", handle, true);
  if (!comm) return ncclInvalidArgument;
  comm->aborted = true;
  return ncclSuccess;
}

JHVD_SIM_API ncclResult_t ncclCommGetAsyncError(ncclComm* handle, ncclResult_t* error) {
  auto comm = find_comm("ncclCommGetAsyncError", handle);
  if (!comm || !error) return ncclInvalidArgument;
  *error = comm->async_error;
  return ncclSuccess;
}

JHVD_SIM_API ncclResult_t ncclCommCount(ncclComm* handle, int* count) {
  auto comm = find_comm("ncclCommCount", handle);
  if (!comm || !count) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

JHVD_SIM_API ncclResult_t ncclCommUserRank(ncclComm* handle, int* rank) {
  auto comm = find_comm("ncclCommUserRank", handle);
  if (!comm || !rank) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

JHVD_SIM_API ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, ncclComm* comm,
                                        cudaStream_t stream) {
  const char* name = "ncclAllReduce";
  auto c = make_call(name, Kind::AllReduce, comm, type, count, stream);
  if (!c || !set_op(name, op, *c)) return ncclInvalidArgument;
  if (c->bytes && (!check_buffer(name, "sendbuff", send, c->bytes, *c) ||
                   !check_buffer(name, "recvbuff", recv, c->bytes, *c)))
    return ncclInvalidArgument;
  c->send = send;
  c->recv = recv;
  return submit_if_data(std::move(c), stream);
}

JHVD_SIM_API ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, int type, int root,
                                        ncclComm* comm, cudaStream_t stream) {
  const char* name = "ncclBroadcast";
  auto c = make_call(name, Kind::Broadcast, comm, type, count, stream);
  if (!c || !check_rank(name, "root", root, *c)) return ncclInvalidArgument;
  const bool is_root = c->comm->rank == root;
  if (c->bytes && ((is_root && !check_buffer(name, "sendbuff", send, c->bytes, *c)) ||
                   !check_buffer(name, "recvbuff", recv, c->bytes, *c)))
    return ncclInvalidArgument;
  c->send = send;
  c->recv = recv;
  c->peer = root;
  return submit_if_data(std::move(c), stream);
}

JHVD_SIM_API ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, int type, ncclComm* comm,
                                        cudaStream_t stream) {
  const char* name = "ncclAllGather";
  auto c = make_call(name, Kind::AllGather, comm, type, count, stream);
  if (!c) return ncclInvalidArgument;
  if (c->bytes && (!check_buffer(name, "sendbuff", send, c->bytes, *c) ||
                   !check_buffer(name, "recvbuff", recv, c->bytes * c->comm->nranks, *c)))
    return ncclInvalidArgument;
  c->send = send;
  c->recv = recv;
  return submit_if_data(std::move(c), stream);
}

JHVD_SIM_API ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, int type, int op,
                                            ncclComm* comm, cudaStream_t stream) {
  const char* name = "ncclReduceScatter";
  auto c = make_call(name, Kind::ReduceScatter, comm, type, count, stream);
  if (!c || !set_op(name, op, *c)) return ncclInvalidArgument;
  if (c->bytes && (!check_buffer(name, "sendbuff", send, c->bytes * c->comm->nranks, *c) ||
                   !check_buffer(name, "recvbuff", recv, c->bytes, *c)))
    return ncclInvalidArgument;
  c->send = send;
  c->recv = recv;
  return submit_if_data(std::move(c), stream);
}

JHVD_SIM_API ncclResult_t ncclSend(const void* send, size_t count, int type, int peer, ncclComm* comm,
                                   cudaStream_t stream) {
  const char* name = "ncclSend";
  auto c = make_call(name, Kind::Send, comm, type, count, stream);
  if (!c || !check_rank(name, "peer", peer, *c)) return ncclInvalidArgument;
  if (c->bytes && !check_buffer(name, "sendbuff", send, c->bytes, *c)) return ncclInvalidArgument;
  c->send = send;
  c->peer = peer;
  return submit_if_data(std::move(c), stream);
}

JHVD_SIM_API ncclResult_t ncclRecv(void* recv, size_t count, int type, int peer, ncclComm* comm,
                                   cudaStream_t stream) {
  const char* name = "ncclRecv";
  auto c = make_call(name, Kind::Recv, comm, type, count, stream);
  if (!c || !check_rank(name, "peer", peer, *c)) return ncclInvalidArgument;
  if (c->bytes && !check_buffer(name, "recvbuff", recv, c->bytes, *c)) return ncclInvalidArgument;
  c->recv = recv;
  c->peer = peer;
  return submit_if_data(std::move(c), stream);
}

JHVD_SIM_API ncclResult_t ncclGroupStart() {
  ++tl_group.depth;
  return ncclSuccess;
}

// The outermost end runs the group's calls as one stream operation, unless one was refused.
JHVD_SIM_API ncclResult_t ncclGroupEnd() {
  Group& g = tl_group;
  if (g.depth == 0) return refuse(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--g.depth > 0) return ncclSuccess;
  Group done = std::move(g);
  g = Group{};
  if (done.error != ncclSuccess) return done.error;
  return done.calls.empty() ? ncclSuccess : enqueue(std::move(done.calls), done.stream);
}

JHVD_SIM_API ncclResult_t ncclRedOpCreatePreMulSum(int* op, void* scalar, int type, int residence, ncclComm* handle) {
  const char* name = "ncclRedOpCreatePreMulSum";
  auto comm = find_comm(name, handle);
  if (!comm) return ncclInvalidArgument;
  if (!op || !scalar || type < 0 || type >= kNumTypes)
    return refuse(ncclInvalidArgument, "%s: null op or scalar, or data type %d", name, type);
  if (residence != ncclScalarHostImmediate)
    return refuse(ncclInvalidArgument, "%s: only ncclScalarHostImmediate is simulated", name);
  const char* s = static_cast<const char*>(scalar);
  std::lock_guard<std::mutex> g(comm->mu);
  *op = comm->next_op++;
  comm->ops[*op] = {type, std::vector<char>(s, s + kTypeSize[type])};
  return ncclSuccess;
}

JHVD_SIM_API ncclResult_t ncclRedOpDestroy(int op, ncclComm* handle) {
  auto comm = find_comm("ncclRedOpDestroy", handle);
  if (!comm) return ncclInvalidArgument;
  std::lock_guard<std::mutex> g(comm->mu);
  if (!comm->ops.erase(op))
    return refuse(ncclInvalidArgument, "ncclRedOpDestroy: op %d is not an op of this communicator", op);
  return ncclSuccess;
}
