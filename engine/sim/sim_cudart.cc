// A simulated CUDA runtime (libjhvd_sim_cudart.so) with the calls the engine and its tests make:
// "device" memory is host memory, and each stream is a thread that runs its operations in order.
// It lets CI run the engine's GPU code path without a GPU (JUPYTER_HVD_CUDART_LIB names it); it
// proves the engine's logic, not CUDA's behaviour. Where cheap it is stricter than CUDA, to catch
// engine bugs: each copy must touch exactly the kind of memory it names, on the stream's device;
// new memory is filled with 0xff bytes (NaN in every float type); and each stream operation starts
// after a random delay, so a result read without waiting for it is stale.
//
// JUPYTER_HVD_SIM_DEVICES: the number of devices (default 1). JUPYTER_HVD_SIM_DELAY_US: the longest delay
// before a stream operation, in microseconds (default 100; 0 for none).
#include "sim_cudart.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

using Clock = std::chrono::steady_clock;
using cudaEvent_t = struct CUevent_st*;

namespace {

constexpr cudaError_t cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInvalidMemcpyDirection = 21,
                      cudaErrorNoDevice = 100, cudaErrorInvalidDevice = 101, cudaErrorInvalidResourceHandle = 400,
                      cudaErrorNotReady = 600;
enum MemcpyKind { kHostToHost, kHostToDevice, kDeviceToHost, kDeviceToDevice, kDefault };
constexpr unsigned kStreamFlags = 0x1;  // cudaStreamNonBlocking
constexpr unsigned kEventFlags = 0x7;   // cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess
constexpr unsigned cudaEventDisableTiming = 0x2;

struct ErrorInfo {
  cudaError_t code;
  const char* name;
  const char* text;
};
constexpr ErrorInfo kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
};

thread_local cudaError_t tl_error = cudaSuccess;  // cudaGetLastError
thread_local int tl_device = 0;                   // cudaSetDevice

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

int device_count() {
  static const int n = std::max(0, env_int("JUPYTER_HVD_SIM_DEVICES", 1));
  return n;
}

int max_delay_us() {
  static const int us = std::max(0, env_int("JUPYTER_HVD_SIM_DELAY_US", 100));
  return us;
}

// Records `e` as this thread's last error and returns it; with a message, says why on stderr.
__attribute__((format(printf, 2, 3))) cudaError_t fail(cudaError_t e, const char* fmt = nullptr, ...) {
  tl_error = e;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    jhvd_sim_vreport("sim-cuda", fmt, ap);
    va_end(ap);
  }
  return e;
}

// Runs its function when the last owner lets go of it.
struct OnRelease {
  std::function<void()> fn;
  ~OnRelease() { fn(); }
};

}  // namespace

// A stream: a worker thread running queued operations in order, each after a random delay.
struct CUstream_st {
  explicit CUstream_st(int dev) : device(dev) { std::thread([this] { run(); }).detach(); }

  void enqueue(std::function<void()> op) {
    std::lock_guard<std::mutex> g(mu);
    ops.push_back(std::move(op));
    ++queued;
    cv.notify_all();
  }
  // Waits for the operations queued so far.
  void drain() {
    std::unique_lock<std::mutex> lk(mu);
    const uint64_t target = queued;
    cv.wait(lk, [&] { return finished >= target; });
  }
  bool idle() {
    std::lock_guard<std::mutex> g(mu);
    return finished == queued;
  }
  // The worker finishes what is queued, then deletes the stream.
  void stop() {
    std::lock_guard<std::mutex> g(mu);
    stopping = true;
    cv.notify_all();
  }

  const int device;

 private:
  void run();

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> ops;
  uint64_t queued = 0, finished = 0;
  bool stopping = false;
};

// An event: the completion time of its most recent record, once the stream gets there.
struct CUevent_st {
  CUevent_st(int dev, unsigned f) : device(dev), flags(f) {}
  std::shared_future<Clock::time_point> current() {
    std::lock_guard<std::mutex> g(mu);
    return last;
  }
  void set(std::shared_future<Clock::time_point> f) {
    std::lock_guard<std::mutex> g(mu);
    last = std::move(f);
  }

  const int device;
  const unsigned flags;

 private:
  std::mutex mu;
  std::shared_future<Clock::time_point> last;  // not valid() until the first record
};

namespace {

struct Allocation {
  size_t size;
  int device;   // for pinned memory: the device current when it was allocated
  bool pinned;  // cudaMallocHost (host memory) rather than cudaMalloc
};

// Never destroyed: stream threads and late callers may outlive static destruction.
struct State {
  std::mutex mu;
  std::map<uintptr_t, Allocation> allocs;  // by base address
  std::set<CUstream_st*> streams;          // valid stream handles
  std::set<CUstream_st*> workers;          // streams whose thread runs: these and destroyed ones draining
  std::vector<CUstream_st*> defaults = std::vector<CUstream_st*>(device_count());  // made on first use
  std::set<CUevent_st*> events;
};

State& state() {
  static State* s = new State;
  return *s;
}

// The allocation holding all of [p, p + bytes), or null (caller holds the state's lock).
const Allocation* containing(const State& st, const void* ptr, size_t bytes) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = st.allocs.upper_bound(p);
  if (it == st.allocs.begin()) return nullptr;
  --it;
  const uintptr_t end = it->first + it->second.size;
  return p < end && bytes <= end - p ? &it->second : nullptr;
}

// Whether [p, p + bytes) overlaps any device allocation (caller holds the state's lock).
bool touches_device_memory(const State& st, const void* ptr, size_t bytes) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  for (auto it = st.allocs.lower_bound(p + bytes); it != st.allocs.begin();) {
    --it;
    if (it->first + it->second.size <= p) break;  // allocations do not overlap: earlier ones end sooner
    if (!it->second.pinned) return true;
  }
  return false;
}

// Checks one side of a copy or memset: device memory of `device`, or host memory (on_device false).
bool check_side(const char* call, const char* side, const void* p, size_t bytes, bool on_device, int device) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  if (!p) {
    fail(cudaErrorInvalidValue, "%s: %s is null", call, side);
    return false;
  }
  if (!on_device) {
    if (!touches_device_memory(st, p, bytes)) return true;
    fail(cudaErrorInvalidValue, "%s: %s [%p, +%zu bytes) is device memory, but the copy kind says host memory", call,
         side, p, bytes);
    return false;
  }
  const Allocation* a = containing(st, p, bytes);
  if (!a || a->pinned) {
    fail(cudaErrorInvalidValue, "%s: %s [%p, +%zu bytes) is not inside a device allocation", call, side, p, bytes);
    return false;
  }
  if (a->device != device) {
    fail(cudaErrorInvalidValue, "%s: %s [%p, +%zu bytes) is memory of cuda:%d, but the stream is on cuda:%d", call,
         side, p, bytes, a->device, device);
    return false;
  }
  return true;
}

// Whether `p` is device memory, for cudaMemcpyDefault.
bool is_device_pointer(const void* p) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  const Allocation* a = containing(st, p, 1);
  return a && !a->pinned;
}

// The stream a handle names: 0, legacy (0x1) and per-thread (0x2) name the current device's
// default stream. Null, after failing `call`, for a handle that is not (or no longer) a stream.
CUstream_st* find_stream(const char* call, cudaStream_t h) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  if (reinterpret_cast<uintptr_t>(h) > 0x2) {
    if (st.streams.count(h)) return h;
    fail(cudaErrorInvalidResourceHandle, "%s: %p is not a stream", call, static_cast<void*>(h));
    return nullptr;
  }
  if (tl_device >= device_count()) {
    fail(cudaErrorInvalidResourceHandle, "%s: no device, so no default stream", call);
    return nullptr;
  }
  CUstream_st*& d = st.defaults[tl_device];
  if (!d) {
    d = new CUstream_st(tl_device);
    st.streams.insert(d);
    st.workers.insert(d);
  }
  return d;
}

// Whether `e` is an event; fails `call` when not.
bool known_event(const char* call, cudaEvent_t e) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  if (st.events.count(e)) return true;
  fail(cudaErrorInvalidResourceHandle, "%s: %p is not an event", call, static_cast<void*>(e));
  return false;
}

// Runs `then` once every stream (of `device`, or of all devices for -1) has finished the
// operations queued so far: at once when there are none.
void after_queued_work(std::function<void()> then, int device) {
  auto token = std::make_shared<OnRelease>();
  token->fn = std::move(then);
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  for (CUstream_st* s : st.workers)
    if (device < 0 || s->device == device) s->enqueue([token] {});
}

cudaError_t allocate(const char* call, void** p, size_t bytes, bool pinned) {
  if (!p) return fail(cudaErrorInvalidValue, "%s: null result pointer", call);
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  void* m = bytes > SIZE_MAX - 255 ? nullptr : std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!m) return fail(cudaErrorMemoryAllocation, "%s: cannot allocate %zu bytes", call, bytes);
  std::memset(m, 0xff, bytes);
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  st.allocs[reinterpret_cast<uintptr_t>(m)] = {bytes, tl_device, pinned};
  *p = m;
  return cudaSuccess;
}

// Frees once the work queued so far on every stream is done, as CUDA's implicit synchronisation
// would, without blocking the caller; the pointer is invalid for new work at once.
cudaError_t release(const char* call, void* p, bool pinned) {
  if (!p) return cudaSuccess;
  {
    State& st = state();
    std::lock_guard<std::mutex> g(st.mu);
    auto it = st.allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == st.allocs.end() || it->second.pinned != pinned)
      return fail(cudaErrorInvalidValue, "%s: %p is not the start of a %s allocation", call, p,
                  pinned ? "cudaMallocHost" : "cudaMalloc");
    st.allocs.erase(it);
  }
  after_queued_work([p] { std::free(p); }, -1);
  return cudaSuccess;
}

}  // namespace

void CUstream_st::run() {
  std::minstd_rand rng(std::random_device{}());
  std::uniform_int_distribution<int> delay(0, max_delay_us());
  std::unique_lock<std::mutex> lk(mu);
  while (true) {
    cv.wait(lk, [&] { return !ops.empty() || stopping; });
    if (ops.empty()) break;
    std::function<void()> op = std::move(ops.front());
    ops.pop_front();
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(delay(rng)));
    op();
    op = nullptr;  // what it holds goes before it counts as done (see after_queued_work)
    lk.lock();
    ++finished;
    cv.notify_all();
  }
  lk.unlock();
  {
    State& st = state();
    std::lock_guard<std::mutex> g(st.mu);
    st.workers.erase(this);
  }
  delete this;
}

// ---- Versions, errors, devices ----

JHVD_SIM_API cudaError_t cudaRuntimeGetVersion(int* v) {
  if (!v) return fail(cudaErrorInvalidValue);
  *v = 13000;
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaDriverGetVersion(int* v) {
  if (!v) return fail(cudaErrorInvalidValue);
  *v = 13000;
  return cudaSuccess;
}

JHVD_SIM_API const char* cudaGetErrorName(cudaError_t e) {
  for (const auto& k : kErrors)
    if (k.code == e) return k.name;
  return "unknown";
}

JHVD_SIM_API const char* cudaGetErrorString(cudaError_t e) {
  for (const auto& k : kErrors)
    if (k.code == e) return k.text;
  return "unknown";
}

JHVD_SIM_API cudaError_t cudaGetLastError() { return std::exchange(tl_error, cudaSuccess); }

JHVD_SIM_API cudaError_t cudaPeekAtLastError() { return tl_error; }

JHVD_SIM_API cudaError_t cudaGetDeviceCount(int* n) {
  if (!n) return fail(cudaErrorInvalidValue);
  *n = device_count();
  return *n ? cudaSuccess : fail(cudaErrorNoDevice);
}

JHVD_SIM_API cudaError_t cudaGetDevice(int* d) {
  if (!d) return fail(cudaErrorInvalidValue);
  *d = tl_device;
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= device_count())
    return fail(cudaErrorInvalidDevice, "cudaSetDevice(%d): %d device(s)", d, device_count());
  tl_device = d;
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int d) {
  if (d < 0 || d >= device_count()) return fail(cudaErrorInvalidDevice);
  if (!bus || len < 13) return fail(cudaErrorInvalidValue);
  std::snprintf(bus, static_cast<size_t>(len), "0000:%02X:00.0", d + 1);
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaDeviceSynchronize() {
  auto done = std::make_shared<std::promise<void>>();
  auto f = done->get_future();
  after_queued_work([done] { done->set_value(); }, tl_device);
  f.wait();
  return cudaSuccess;
}

// ---- Streams ----

JHVD_SIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  if (!s || (flags & ~kStreamFlags)) return fail(cudaErrorInvalidValue);
  *s = new CUstream_st(tl_device);
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  st.streams.insert(*s);
  st.workers.insert(*s);
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }

JHVD_SIM_API cudaError_t cudaStreamDestroy(cudaStream_t s) {
  {
    State& st = state();
    std::lock_guard<std::mutex> g(st.mu);
    const bool is_default = std::find(st.defaults.begin(), st.defaults.end(), s) != st.defaults.end();
    if (is_default || !st.streams.erase(s))
      return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: %p is not a stream it can destroy",
                  static_cast<void*>(s));
  }
  s->stop();
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaStreamGetDevice(cudaStream_t h, int* d) {
  CUstream_st* s = find_stream("cudaStreamGetDevice", h);
  if (!s) return cudaErrorInvalidResourceHandle;
  if (!d) return fail(cudaErrorInvalidValue);
  *d = s->device;
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaStreamSynchronize(cudaStream_t h) {
  CUstream_st* s = find_stream("cudaStreamSynchronize", h);
  if (!s) return cudaErrorInvalidResourceHandle;
  s->drain();
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaStreamQuery(cudaStream_t h) {
  CUstream_st* s = find_stream("cudaStreamQuery", h);
  if (!s) return cudaErrorInvalidResourceHandle;
  return s->idle() ? cudaSuccess : cudaErrorNotReady;
}

JHVD_SIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t h, void (*fn)(void*), void* arg) {
  CUstream_st* s = find_stream("cudaLaunchHostFunc", h);
  if (!s) return cudaErrorInvalidResourceHandle;
  if (!fn) return fail(cudaErrorInvalidValue);
  s->enqueue([fn, arg] { fn(arg); });
  return cudaSuccess;
}

// ---- Events ----

JHVD_SIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  if (!e || (flags & ~kEventFlags)) return fail(cudaErrorInvalidValue);
  *e = new CUevent_st(tl_device, flags);
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  st.events.insert(*e);
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }

JHVD_SIM_API cudaError_t cudaEventDestroy(cudaEvent_t e) {
  {
    State& st = state();
    std::lock_guard<std::mutex> g(st.mu);
    if (!st.events.erase(e))
      return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: %p is not an event", static_cast<void*>(e));
  }
  delete e;  // a pending record completes on its own: its stream holds the promise
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h) {
  CUstream_st* s = find_stream("cudaEventRecord", h);
  if (!s || !known_event("cudaEventRecord", e)) return cudaErrorInvalidResourceHandle;
  if (e->device != s->device)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: event of cuda:%d, stream of cuda:%d", e->device,
                s->device);
  auto done = std::make_shared<std::promise<Clock::time_point>>();
  e->set(done->get_future().share());
  s->enqueue([done] { done->set_value(Clock::now()); });
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (!known_event("cudaEventQuery", e)) return cudaErrorInvalidResourceHandle;
  auto f = e->current();
  return !f.valid() || f.wait_for(std::chrono::seconds(0)) == std::future_status::ready ? cudaSuccess
                                                                                         : cudaErrorNotReady;
}

JHVD_SIM_API cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!known_event("cudaEventSynchronize", e)) return cudaErrorInvalidResourceHandle;
  auto f = e->current();
  if (f.valid()) f.wait();
  return cudaSuccess;
}

// The stream's later operations wait for the event's record as of now.
JHVD_SIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned flags) {
  CUstream_st* s = find_stream("cudaStreamWaitEvent", h);
  if (!s || !known_event("cudaStreamWaitEvent", e)) return cudaErrorInvalidResourceHandle;
  if (flags) return fail(cudaErrorInvalidValue);
  auto f = e->current();
  if (f.valid()) s->enqueue([f] { f.wait(); });
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return fail(cudaErrorInvalidValue);
  const char* call = "cudaEventElapsedTime";
  if (!known_event(call, start) || !known_event(call, end)) return cudaErrorInvalidResourceHandle;
  if ((start->flags | end->flags) & cudaEventDisableTiming)
    return fail(cudaErrorInvalidResourceHandle, "%s: an event made with cudaEventDisableTiming", call);
  auto a = start->current(), b = end->current();
  if (!a.valid() || !b.valid()) return fail(cudaErrorInvalidResourceHandle, "%s: an event never recorded", call);
  for (auto* f : {&a, &b})
    if (f->wait_for(std::chrono::seconds(0)) != std::future_status::ready) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(b.get() - a.get()).count();
  return cudaSuccess;
}

// ---- Memory ----

JHVD_SIM_API cudaError_t cudaMalloc(void** p, size_t bytes) { return allocate("cudaMalloc", p, bytes, false); }
JHVD_SIM_API cudaError_t cudaMallocHost(void** p, size_t bytes) { return allocate("cudaMallocHost", p, bytes, true); }
JHVD_SIM_API cudaError_t cudaFree(void* p) { return release("cudaFree", p, false); }
JHVD_SIM_API cudaError_t cudaFreeHost(void* p) { return release("cudaFreeHost", p, true); }

JHVD_SIM_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, int kind, cudaStream_t h) {
  const char* call = "cudaMemcpyAsync";
  CUstream_st* s = find_stream(call, h);
  if (!s) return cudaErrorInvalidResourceHandle;
  if (kind < kHostToHost || kind > kDefault)
    return fail(cudaErrorInvalidMemcpyDirection, "%s: copy kind %d", call, kind);
  if (bytes == 0) return cudaSuccess;
  const bool dst_dev = kind == kDefault ? is_device_pointer(dst) : kind == kHostToDevice || kind == kDeviceToDevice;
  const bool src_dev = kind == kDefault ? is_device_pointer(src) : kind == kDeviceToHost || kind == kDeviceToDevice;
  if (!check_side(call, "dst", dst, bytes, dst_dev, s->device) ||
      !check_side(call, "src", src, bytes, src_dev, s->device))
    return cudaErrorInvalidValue;
  s->enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
  return cudaSuccess;
}

// CUDA 13's form (CUDA 12.8 and 12.9 had a failIdx argument before the stream); the simulator says it is
// CUDA 13. Checked as CUDA documents it: the legacy stream is refused, every copy needs attributes
// with a valid source access order, and attrsIdxs starts at 0 and rises.
struct cudaMemcpyAttributes {
  int srcAccessOrder;  // cudaMemcpySrcAccessOrder: 1 stream, 2 during the call, 3 any
  int src_hint[2], dst_hint[2];
  unsigned flags;
};

JHVD_SIM_API cudaError_t cudaMemcpyBatchAsync(void* const* dsts, const void* const* srcs, const size_t* sizes,
                                              size_t count, cudaMemcpyAttributes* attrs, size_t* attrs_idxs,
                                              size_t num_attrs, cudaStream_t h) {
  const char* call = "cudaMemcpyBatchAsync";
  if (h == nullptr || h == reinterpret_cast<cudaStream_t>(0x1))
    return fail(cudaErrorInvalidValue, "%s: the legacy default stream", call);
  CUstream_st* s = find_stream(call, h);
  if (!s) return cudaErrorInvalidResourceHandle;
  if (count == 0 || !dsts || !srcs || !sizes || !attrs || !attrs_idxs || num_attrs == 0 || num_attrs > count ||
      attrs_idxs[0] != 0)
    return fail(cudaErrorInvalidValue, "%s: %zu copies, %zu attributes", call, count, num_attrs);
  for (size_t k = 0; k < num_attrs; ++k) {
    if (attrs[k].srcAccessOrder < 1 || attrs[k].srcAccessOrder > 3 || (k && attrs_idxs[k] <= attrs_idxs[k - 1]) ||
        attrs_idxs[k] >= count)
      return fail(cudaErrorInvalidValue, "%s: attributes %zu are not valid", call, k);
  }
  std::vector<std::tuple<void*, const void*, size_t>> copies;
  for (size_t i = 0; i < count; ++i) {
    if (!check_side(call, "dst", dsts[i], sizes[i], is_device_pointer(dsts[i]), s->device) ||
        !check_side(call, "src", srcs[i], sizes[i], is_device_pointer(srcs[i]), s->device))
      return cudaErrorInvalidValue;
    copies.emplace_back(dsts[i], srcs[i], sizes[i]);
  }
  s->enqueue([copies = std::move(copies)] {
    for (const auto& [dst, src, bytes] : copies) std::memcpy(dst, src, bytes);
  });
  return cudaSuccess;
}

JHVD_SIM_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, int kind) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  return e == cudaSuccess ? cudaStreamSynchronize(nullptr) : e;
}

JHVD_SIM_API cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t h) {
  CUstream_st* s = find_stream("cudaMemsetAsync", h);
  if (!s) return cudaErrorInvalidResourceHandle;
  if (bytes == 0) return cudaSuccess;
  if (!check_side("cudaMemsetAsync", "dst", p, bytes, true, s->device)) return cudaErrorInvalidValue;
  s->enqueue([p, value, bytes] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

// The CUDA 11+ layout.
struct cudaPointerAttributes {
  int type;  // 0 unregistered, 1 host (pinned), 2 device
  int device;
  void* devicePointer;
  void* hostPointer;
};

JHVD_SIM_API cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  if (!attr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  const Allocation* a = containing(st, ptr, 1);
  void* p = const_cast<void*>(ptr);
  if (!a) *attr = {0, -2, nullptr, p};
  else *attr = {a->pinned ? 1 : 2, a->device, p, a->pinned ? p : nullptr};
  return cudaSuccess;
}

JHVD_SIM_API bool jhvd_sim_in_device_memory(const void* p, size_t bytes, int device) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  const Allocation* a = containing(st, p, bytes);
  return a && !a->pinned && a->device == device;
}

JHVD_SIM_API void jhvd_sim_vreport(const char* who, const char* fmt, va_list ap) {
  char msg[512];
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  std::fprintf(stderr, "[%s] %s\n", who, msg);
}
