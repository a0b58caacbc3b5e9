// The simulated CUDA device and NCCL of engine/sim, loaded the way the engine loads the real
// libraries: that they behave as the engine's GPU path expects, and catch the mistakes it could
// make. This binary runs without MPI, so of NCCL only the calls that need no peers are tried.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>
#include "gpu/batched_copy.h"
#include "gpu/copy_kernel.h"
#include "gpu/copy_kernel_args.h"
#include "gpu/dynamic_library.h"
#include "gpu/gpu_runtime.h"
#include "gpu/ready_event.h"

using namespace hvd::gpu;

namespace {

constexpr cudaError_t kInvalidValue = 1, kInvalidDevice = 101, kInvalidHandle = 400;
constexpr ncclResult_t kInvalidArgument = 4, kInvalidUsage = 5;

// cudaPointerGetAttributes' result (CUDA 11+).
struct PointerAttributes {
  int type;  // 0 unregistered, 1 host, 2 device
  int device;
  void* device_pointer;
  void* host_pointer;
};

// The simulator through an engine Runtime (a process loads it once: its devices are read once),
// with the runtime calls the engine does not make, for the checks.
struct Sim {
  Runtime rt;
  GpuStatus status;
  DynamicLibrary cudart;
  cudaError_t (*cudaLaunchHostFunc)(cudaStream_t, void (*)(void*), void*) = nullptr;
  cudaError_t (*cudaStreamQuery)(cudaStream_t) = nullptr;
  cudaError_t (*cudaPeekAtLastError)() = nullptr;
  cudaError_t (*cudaPointerGetAttributes)(PointerAttributes*, const void*) = nullptr;
};

Sim& sim() {
  static Sim* s = [] {
    setenv("JUPYTER_HVD_SIM_DEVICES", "2", 1);
    setenv("JUPYTER_HVD_CUDA_DRIVER_LIB", JHVD_SIM_DIR "/libjhvd_sim_cuda.so", 1);
    auto* s = new Sim;
    SearchPaths paths;
    paths.cuda_override = JHVD_SIM_DIR "/libjhvd_sim_cudart.so";
    paths.nccl_override = JHVD_SIM_DIR "/libjhvd_sim_nccl.so";
    s->status = s->rt.load(paths);
    std::string err;
    s->cudart = DynamicLibrary::open_first({paths.cuda_override}, &err);
    auto fn = [&](auto& slot, const char* name) {
      slot = reinterpret_cast<std::decay_t<decltype(slot)>>(s->cudart.symbol(name));
    };
    fn(s->cudaLaunchHostFunc, "cudaLaunchHostFunc");
    fn(s->cudaStreamQuery, "cudaStreamQuery");
    fn(s->cudaPeekAtLastError, "cudaPeekAtLastError");
    fn(s->cudaPointerGetAttributes, "cudaPointerGetAttributes");
    return s;
  }();
  return *s;
}

const CudaApi& cuda() { return sim().rt.cuda(); }

void sleep_100ms(void* done) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  static_cast<std::atomic<bool>*>(done)->store(true);
}

}  // namespace

TEST_CASE("gpu_sim_loads_as_cuda_and_nccl_with_its_devices") {
  const GpuStatus& s = sim().status;
  CHECK(s.cuda.loaded);
  CHECK(s.nccl.loaded);
  CHECK(s.cuda_ready());
  CHECK(s.nccl_ready());
  CHECK(s.cuda.version == 13000);
  CHECK(s.driver_version == 13000);
  CHECK(s.device_count == 2);
  CHECK(s.nccl.version == 23203);
  CHECK((sim().cudaLaunchHostFunc != nullptr));
  CHECK((sim().cudaStreamQuery != nullptr));
  CHECK((sim().cudaPeekAtLastError != nullptr));
  CHECK((sim().cudaPointerGetAttributes != nullptr));
  char bus[32];
  CHECK(cuda().cudaDeviceGetPCIBusId(bus, sizeof(bus), 1) == cudaSuccess);
  CHECK(std::string(bus) == "0000:02:00.0");
  CHECK(cuda().cudaSetDevice(2) == kInvalidDevice);
  CHECK(sim().rt.cuda_error(cuda().cudaGetLastError()) == "cudaErrorInvalidDevice: invalid device ordinal");
  int d = -1;
  CHECK(cuda().cudaSetDevice(1) == cudaSuccess);
  CHECK(cuda().cudaGetDevice(&d) == cudaSuccess);
  CHECK(d == 1);
  cuda().cudaSetDevice(0);
}

TEST_CASE("gpu_sim_copies_must_touch_the_memory_their_kind_names") {
  const CudaApi& c = cuda();
  cudaStream_t s = nullptr;
  CHECK(c.cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  char *dev = nullptr, *pinned = nullptr, *other = nullptr;
  CHECK(c.cudaMalloc(reinterpret_cast<void**>(&dev), 64) == cudaSuccess);
  CHECK(dev);
  CHECK(c.cudaMallocHost(reinterpret_cast<void**>(&pinned), 64) == cudaSuccess);
  CHECK(pinned);
  std::vector<char> host(64, 7);
  // A round trip, and fresh device memory reads as 0xff bytes (NaN as floats).
  CHECK(c.cudaMemcpyAsync(pinned, dev, 64, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  CHECK(c.cudaMemcpyAsync(dev, host.data(), 64, cudaMemcpyHostToDevice, s) == cudaSuccess);
  CHECK(c.cudaMemcpyAsync(dev + 32, dev, 32, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
  CHECK(c.cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(static_cast<unsigned char>(pinned[0]) == 0xff);
  CHECK(static_cast<unsigned char>(pinned[63]) == 0xff);
  CHECK(c.cudaMemcpyAsync(pinned, dev, 64, cudaMemcpyDefault, s) == cudaSuccess);
  CHECK(c.cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(pinned[0] == 7);
  CHECK(pinned[63] == 7);
  // Wrong kinds, overruns, another device's memory, freed memory: refused, with a line on stderr.
  CHECK(c.cudaMemcpyAsync(dev, host.data(), 64, cudaMemcpyDeviceToDevice, s) == kInvalidValue);
  CHECK(c.cudaMemcpyAsync(pinned, dev, 64, cudaMemcpyHostToDevice, s) == kInvalidValue);
  CHECK(c.cudaMemcpyAsync(host.data(), dev + 8, 64, cudaMemcpyDeviceToHost, s) == kInvalidValue);
  CHECK(c.cudaSetDevice(1) == cudaSuccess);
  CHECK(c.cudaMalloc(reinterpret_cast<void**>(&other), 64) == cudaSuccess);
  c.cudaSetDevice(0);
  CHECK(c.cudaMemcpyAsync(dev, other, 64, cudaMemcpyDeviceToDevice, s) == kInvalidValue);
  CHECK(c.cudaFree(other) == cudaSuccess);
  CHECK(c.cudaMemcpyAsync(dev, other, 64, cudaMemcpyDeviceToDevice, s) == kInvalidValue);
  // Pointers are what they were allocated as; only allocations are freed.
  PointerAttributes a{};
  CHECK(sim().cudaPointerGetAttributes(&a, dev + 8) == cudaSuccess);
  CHECK(a.type == 2);
  CHECK(a.device == 0);
  CHECK(sim().cudaPointerGetAttributes(&a, pinned) == cudaSuccess);
  CHECK(a.type == 1);
  CHECK(a.host_pointer == pinned);
  CHECK(sim().cudaPointerGetAttributes(&a, host.data()) == cudaSuccess);
  CHECK(a.type == 0);
  CHECK(c.cudaFree(dev + 8) == kInvalidValue);
  CHECK(c.cudaFree(pinned) == kInvalidValue);
  CHECK(c.cudaFree(nullptr) == cudaSuccess);
  void* empty = &a;
  CHECK(c.cudaMalloc(&empty, 0) == cudaSuccess);
  CHECK(!empty);
  CHECK(c.cudaFree(dev) == cudaSuccess);
  CHECK(c.cudaFreeHost(pinned) == cudaSuccess);
  CHECK(c.cudaStreamDestroy(s) == cudaSuccess);
  CHECK(c.cudaStreamDestroy(s) == kInvalidHandle);
  c.cudaGetLastError();
}

TEST_CASE("gpu_sim_stream_work_runs_later_and_in_order") {
  const CudaApi& c = cuda();
  cudaStream_t s = nullptr;
  c.cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int* dev = nullptr;
  c.cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(int));
  int one = 1, out = 0;
  std::atomic<bool> slept{false};
  CHECK(c.cudaMemcpyAsync(dev, &one, sizeof(int), cudaMemcpyHostToDevice, s) == cudaSuccess);
  CHECK(sim().cudaLaunchHostFunc(s, sleep_100ms, &slept) == cudaSuccess);
  CHECK(c.cudaMemcpyAsync(&out, dev, sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  CHECK(out == 0);
  CHECK(sim().cudaStreamQuery(s) == cudaErrorNotReady);  // queued behind the sleep
  CHECK(c.cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(out == 1);
  CHECK(slept);
  CHECK(sim().cudaStreamQuery(s) == cudaSuccess);
  c.cudaFree(dev);
  c.cudaStreamDestroy(s);
}

TEST_CASE("gpu_sim_events_order_streams_and_time_them") {
  const CudaApi& c = cuda();
  cudaStream_t a = nullptr, b = nullptr;
  c.cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  c.cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaEvent_t start = nullptr, end = nullptr, untimed = nullptr, never = nullptr;
  c.cudaEventCreateWithFlags(&start, cudaEventDefault);
  c.cudaEventCreateWithFlags(&end, cudaEventDefault);
  c.cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming);
  c.cudaEventCreateWithFlags(&never, cudaEventDefault);
  std::atomic<bool> flags[2] = {false, false};  // a's sleep is done; b saw it done
  float ms = 0;
  CHECK(c.cudaEventRecord(start, a) == cudaSuccess);
  sim().cudaLaunchHostFunc(a, sleep_100ms, &flags[0]);
  CHECK(c.cudaEventRecord(end, a) == cudaSuccess);
  CHECK(c.cudaEventQuery(end) == cudaErrorNotReady);
  CHECK(c.cudaEventElapsedTime(&ms, start, end) == cudaErrorNotReady);
  // b's later work waits for `end` as recorded now.
  CHECK(c.cudaStreamWaitEvent(b, end, 0) == cudaSuccess);
  sim().cudaLaunchHostFunc(b, [](void* p) {
    auto* f = static_cast<std::atomic<bool>*>(p);
    f[1] = f[0].load();
  }, flags);
  CHECK(c.cudaStreamSynchronize(b) == cudaSuccess);
  CHECK(flags[1]);
  CHECK(c.cudaEventSynchronize(end) == cudaSuccess);
  CHECK(c.cudaEventQuery(end) == cudaSuccess);
  CHECK(c.cudaEventElapsedTime(&ms, start, end) == cudaSuccess);
  CHECK(ms >= 99.9f);
  CHECK(ms < 10000.0f);
  // A new record makes the event pending again; a never-recorded one counts as done.
  sim().cudaLaunchHostFunc(a, sleep_100ms, &flags[0]);
  c.cudaEventRecord(end, a);
  CHECK(c.cudaEventQuery(end) == cudaErrorNotReady);
  CHECK(c.cudaEventQuery(never) == cudaSuccess);
  // Timing needs two recorded events with timing.
  c.cudaEventRecord(untimed, a);
  c.cudaStreamSynchronize(a);
  CHECK(c.cudaEventElapsedTime(&ms, start, untimed) == kInvalidHandle);
  CHECK(c.cudaEventElapsedTime(&ms, never, end) == kInvalidHandle);
  c.cudaGetLastError();
  for (cudaEvent_t e : {start, end, untimed, never}) CHECK(c.cudaEventDestroy(e) == cudaSuccess);
  c.cudaStreamDestroy(a);
  c.cudaStreamDestroy(b);
}

TEST_CASE("gpu_sim_last_error_stays_until_read") {
  const CudaApi& c = cuda();
  c.cudaGetLastError();
  int n = 0;
  CHECK(c.cudaFree(&n) == kInvalidValue);
  CHECK(c.cudaGetDeviceCount(&n) == cudaSuccess);
  CHECK(n == 2);  // a later success leaves it
  CHECK(sim().cudaPeekAtLastError() == kInvalidValue);
  CHECK(sim().cudaPeekAtLastError() == kInvalidValue);
  CHECK(c.cudaGetLastError() == kInvalidValue);
  CHECK(c.cudaGetLastError() == cudaSuccess);
  CHECK(std::string(c.cudaGetErrorName(cudaErrorNotReady)) == "cudaErrorNotReady");
  CHECK(std::string(c.cudaGetErrorName(12345)) == "unknown");
  // Each thread has its own.
  std::thread([&] { CHECK(c.cudaSetDevice(9) == kInvalidDevice); }).join();
  CHECK(c.cudaGetLastError() == cudaSuccess);
}

TEST_CASE("gpu_sim_nccl_refuses_bad_calls_without_peers") {
  const NcclApi& nc = sim().rt.nccl();
  CHECK((nc.ncclCommGetAsyncError != nullptr));
  CHECK((nc.ncclSend != nullptr));
  CHECK((nc.ncclRecv != nullptr));
  CHECK((nc.ncclRedOpCreatePreMulSum != nullptr));
  CHECK((nc.ncclRedOpDestroy != nullptr));
  CHECK(std::string(nc.ncclGetErrorString(kInvalidUsage)) == "invalid usage");
  float x = 0;
  CHECK(nc.ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr) == kInvalidArgument);
  ncclResult_t async = ncclSuccess;
  CHECK(nc.ncclCommGetAsyncError(nullptr, &async) == kInvalidArgument);
  CHECK(nc.ncclGroupEnd() == kInvalidUsage);
  // A refused call inside a group fails the whole group.
  CHECK(nc.ncclGroupStart() == ncclSuccess);
  CHECK(nc.ncclGroupStart() == ncclSuccess);
  CHECK(nc.ncclSend(&x, 1, ncclFloat32, 0, nullptr, nullptr) == kInvalidArgument);
  CHECK(nc.ncclGroupEnd() == ncclSuccess);
  CHECK(nc.ncclGroupEnd() == kInvalidArgument);
  CHECK(nc.ncclGroupEnd() == kInvalidUsage);
}

TEST_CASE("gpu_batched_copy_is_one_batch_on_cuda_13_and_copy_by_copy_otherwise") {
  const CudaApi& api = cuda();
  REQUIRE((api.cudaMemcpyBatchAsync_13 != nullptr));
  CHECK((api.cudaMemcpyBatchAsync_12 == nullptr));
  CHECK(api.cudaSetDevice(0) == cudaSuccess);
  cudaStream_t stream = nullptr;
  CHECK(api.cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  std::vector<int32_t> host(30);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int32_t>(i);
  void *dev = nullptr, *back = nullptr;
  CHECK(api.cudaMalloc(&dev, 120) == cudaSuccess);
  CHECK(api.cudaMallocHost(&back, 120) == cudaSuccess);
  for (bool batch : {true, false}) {
    for (cudaStream_t s : {stream, legacy_stream()}) {  // CUDA refuses a batch on the legacy stream
      std::memset(back, 0, 120);
      BatchedCopy in(cudaMemcpyHostToDevice), out(cudaMemcpyDeviceToHost);
      for (int k = 0; k < 3; ++k) {  // three pieces, and one empty copy that is dropped
        in.add(static_cast<char*>(dev) + 40 * k, host.data() + 10 * k, 40);
        out.add(static_cast<char*>(back) + 40 * k, static_cast<char*>(dev) + 40 * k, 40);
      }
      in.add(dev, host.data(), 0);
      CHECK(in.size() == 3);
      bool use = batch;
      CHECK(in.issue(api, s, 0, &use) == cudaSuccess);
      CHECK(out.issue(api, s, 0, &use) == cudaSuccess);
      CHECK(use == (batch && s == stream));
      CHECK(api.cudaStreamSynchronize(s) == cudaSuccess);
      CHECK(std::memcmp(back, host.data(), 120) == 0);
      api.cudaGetLastError();
    }
  }
  CHECK(api.cudaFree(dev) == cudaSuccess);
  CHECK(api.cudaFreeHost(back) == cudaSuccess);
  CHECK(api.cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("gpu_copy_kernel_copies_every_size_in_one_launch_inline_or_through_a_table") {
  const CudaApi& api = cuda();
  CHECK(api.cudaSetDevice(0) == cudaSuccess);
  cudaStream_t stream = nullptr;
  CHECK(api.cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  std::string why;
  std::unique_ptr<CopyKernel> kernel = CopyKernel::load(api, &why);
  CHECK(kernel != nullptr);
  CHECK(copy_kernel_status() == "loaded");

  // Copies of sizes around a block's chunk, half of them one byte off alignment.
  const size_t sizes[] = {1,  15, 16, 17, JHVD_COPY_CHUNK - 1, JHVD_COPY_CHUNK, JHVD_COPY_CHUNK + 1,
                          3 * JHVD_COPY_CHUNK + 5};
  std::vector<size_t> bytes;
  for (size_t i = 0; i < 500; ++i) bytes.push_back(sizes[i % 8]);
  size_t total = 0;
  std::vector<size_t> offsets;
  for (size_t i = 0; i < bytes.size(); ++i) {
    offsets.push_back(total + i % 2);
    total += bytes[i] + 16;
  }
  std::vector<unsigned char> host(total), zeros(total);
  for (size_t i = 0; i < total; ++i) host[i] = static_cast<unsigned char>(i * 7 + 3);
  char *src = nullptr, *dst = nullptr;
  CHECK(api.cudaMalloc(reinterpret_cast<void**>(&src), total) == cudaSuccess);
  CHECK(api.cudaMalloc(reinterpret_cast<void**>(&dst), total) == cudaSuccess);
  CHECK(api.cudaMemcpyAsync(src, host.data(), total, cudaMemcpyHostToDevice, stream) == cudaSuccess);
  auto batch = [&](size_t first, size_t count) {
    BatchedCopy b(cudaMemcpyDeviceToDevice);
    for (size_t i = first; i < std::min(bytes.size(), first + count); ++i)
      b.add(dst + offsets[i], src + offsets[i], bytes[i]);
    return b;
  };
  auto check_all_copied = [&] {
    std::vector<unsigned char> back(total);
    CHECK(api.cudaMemcpyAsync(back.data(), dst, total, cudaMemcpyDeviceToHost, stream) == cudaSuccess);
    CHECK(api.cudaStreamSynchronize(stream) == cudaSuccess);
    size_t wrong = 0;
    for (size_t i = 0; i < bytes.size(); ++i)
      wrong += std::memcmp(back.data() + offsets[i], host.data() + offsets[i], bytes[i]) != 0;
    CHECK(wrong == 0);
  };
  // As many copies as the parameter holds, one more (four tables in a row, then inline: each table is
  // rewritten only once the launch reading it is done), all in one table, and two at a time.
  for (size_t count : {size_t{JHVD_COPY_INLINE}, size_t{JHVD_COPY_INLINE + 1}, bytes.size(), size_t{2}}) {
    CAPTURE(count);
    CHECK(api.cudaMemcpyAsync(dst, zeros.data(), total, cudaMemcpyHostToDevice, stream) == cudaSuccess);
    for (size_t first = 0; first < bytes.size(); first += count)
      CHECK(kernel->launch(batch(first, count), stream).empty());
    check_all_copied();
  }
  // Launches made ready together, as a fused op's copies in and out are: two tables' worth and one
  // inline in one upload, then launched in order with other work queued between them; three such
  // rounds in a row reuse both table slots.
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    CHECK(api.cudaMemcpyAsync(dst, zeros.data(), total, cudaMemcpyHostToDevice, stream) == cudaSuccess);
    BatchedCopy a = batch(0, 200), b = batch(200, 100), c = batch(300, 200);
    CHECK(kernel->ready({&a, &b, &c}, stream).empty());
    CHECK(kernel->launch(a, stream).empty());
    CHECK(api.cudaMemcpyAsync(dst + total - 1, src, 1, cudaMemcpyDeviceToDevice, stream) == cudaSuccess);
    CHECK(kernel->launch(b, stream).empty());
    CHECK(kernel->launch(c, stream).empty());
    check_all_copied();
  }
  // Out of the order made ready: a batch that is not the next one is made ready on its own (the rest
  // are dropped), and every batch is still copied.
  CHECK(api.cudaMemcpyAsync(dst, zeros.data(), total, cudaMemcpyHostToDevice, stream) == cudaSuccess);
  BatchedCopy a = batch(0, 200), b = batch(200, 100), c = batch(300, 200);
  CHECK(kernel->ready({&a, &b, &c}, stream).empty());
  CHECK(kernel->launch(c, stream).empty());
  CHECK(kernel->launch(a, stream).empty());
  CHECK(kernel->launch(b, stream).empty());
  check_all_copied();

  // Host memory where device memory belongs is refused at the launch, with the driver's reason.
  BatchedCopy wrong(cudaMemcpyDeviceToDevice);
  wrong.add(host.data(), src, 16);
  std::string error = kernel->launch(wrong, stream);
  CHECK(error.find("launching the batched copy kernel: invalid argument") != std::string::npos);
  kernel.reset();
  CHECK(api.cudaFree(src) == cudaSuccess);
  CHECK(api.cudaFree(dst) == cudaSuccess);
  CHECK(api.cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("gpu_ready_events_know_their_stream_and_order") {
  // The engine waits on one event per producer stream, the newest: the events of one stream must say
  // so and know which came later; another device's, or the per-thread default stream's (a stream of
  // its own in each thread), never stand for each other.
  const Runtime& rt = sim().rt;
  const CudaApi& api = rt.cuda();
  CHECK(api.cudaSetDevice(0) == cudaSuccess);
  cudaStream_t s = nullptr, t = nullptr;
  CHECK(api.cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(api.cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking) == cudaSuccess);
  std::string error;
  auto first = ReadyEvent::record(rt, 0, s, &error);
  auto other = ReadyEvent::record(rt, 0, t, &error);
  auto second = ReadyEvent::record(rt, 0, s, &error);
  auto legacy = ReadyEvent::record(rt, 0, legacy_stream(), &error);
  auto legacy_too = ReadyEvent::record(rt, 0, legacy_stream(), &error);
  auto legacy_dev1 = ReadyEvent::record(rt, 1, legacy_stream(), &error);
  auto per_thread = ReadyEvent::record(rt, 0, per_thread_stream(), &error);
  auto per_thread_too = ReadyEvent::record(rt, 0, per_thread_stream(), &error);
  REQUIRE(error.empty());
  CHECK(first->same_stream(*second));
  CHECK(second->after(*first));
  CHECK_FALSE(first->after(*second));
  CHECK_FALSE(first->same_stream(*other));
  CHECK(legacy->same_stream(*legacy_too));
  CHECK_FALSE(legacy->same_stream(*legacy_dev1));
  CHECK_FALSE(per_thread->same_stream(*per_thread_too));
  for (auto* e : {&first, &other, &second, &legacy, &legacy_too, &legacy_dev1, &per_thread, &per_thread_too}) {
    CHECK(api.cudaEventSynchronize((*e)->event()) == cudaSuccess);
    e->reset();
  }
  CHECK(api.cudaSetDevice(0) == cudaSuccess);
  CHECK(api.cudaStreamDestroy(s) == cudaSuccess);
  CHECK(api.cudaStreamDestroy(t) == cudaSuccess);
}
