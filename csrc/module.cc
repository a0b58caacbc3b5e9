// jupyter_hvd._C: binds one process-wide engine. Buffers arrive as raw addresses that the
// Python layer keeps alive until their handle completes; results go back as status tuples.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <pthread.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "auto_names.h"
#include "contracts.h"
#include "engine.h"
#include "gpu_binding.h"
#include "memory_advice.h"
#include "registry.h"
#include "submit.h"
#ifdef JHVD_WITH_MXNET
#include "mxnet_bridge.h"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

std::mutex g_mu;
std::unique_ptr<hvd::Engine> g_engine;
constexpr const char* kNotInitialized = "jupyter_hvd has not been initialized; use hvd.init().";
// Set in a process that a rank started (a DataLoader worker, forked or spawned; a subprocess) and that called
// init() or was forked from an initialised rank: it answers the topology queries with the rank's, and refuses
// the engine, which lives in the rank's own process (its threads are not in a forked copy).
std::optional<hvd::Topology> g_helper_of;

void check_not_helper() {
  if (g_helper_of) {
    throw std::runtime_error(
        "this process was started by rank " + std::to_string(g_helper_of->rank) +
        " (a DataLoader worker or another child process): it can ask hvd.rank(), hvd.size() and the other "
        "topology queries, but collectives run only in the rank's own process");
  }
}

hvd::Engine& engine() {
  std::lock_guard<std::mutex> g(g_mu);
  check_not_helper();
  if (!g_engine) throw nb::value_error(kNotInitialized);
  return *g_engine;
}

// fork() copies the engine without its threads: the copy must never run or be destroyed (a destructor would
// wait for threads that are not there), so the child keeps only the topology. g_mu is held across the fork,
// so the child never starts with it locked by a thread it does not have.
void register_fork_handlers() {
  pthread_atfork([] { g_mu.lock(); }, [] { g_mu.unlock(); }, [] {
    if (g_engine) {
      g_helper_of = g_engine->topology();
      (void)g_engine.release();
    }
    g_mu.unlock();
  });
}

// The running engine's topology, or what a forked child kept of it.
hvd::Topology topology() {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_helper_of && !g_engine) throw nb::value_error(kNotInitialized);
  return g_helper_of ? *g_helper_of : g_engine->topology();
}

nb::tuple status_tuple(const hvd::Status& s) {
  return nb::make_tuple(static_cast<int>(s.code), s.message, s.origin_rank);
}

// Waits for every handle of the group in short slices with the GIL released, so Ctrl-C and other threads still
// run; false when `timeout_s` (negative: none) passes first. Last first: the engine completes a group in
// order, so this thread then wakes once, not once per tensor, and passes the rest, done by then, without
// letting go of the GIL for each.
bool wait_group(const jhvd::HandleGroup& g, double timeout_s) {
  auto slice = std::chrono::milliseconds(50);
  auto start = std::chrono::steady_clock::now();
  for (auto it = g.handles.rbegin(); it != g.handles.rend(); ++it) {
    const auto& h = *it;
    while (!h->poll()) {
      bool done;
      {
        nb::gil_scoped_release nogil;
        done = h->wait_for(slice);
      }
      if (done) break;
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      if (timeout_s >= 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= timeout_s)
        return false;
    }
  }
  return true;
}

// The first failure among the group's finished handles, or Ok.
hvd::Status first_failure(const jhvd::HandleGroup& g) {
  for (const auto& h : g.handles) {
    hvd::Status s = h->status();
    if (!s.ok()) return s;
  }
  return hvd::Status::Ok();
}

nb::dict metrics_dict(const hvd::Metrics& m) {
  nb::dict d;
  nb::dict ops, bytes;
  for (int i = 0; i < hvd::Metrics::kOps; ++i) {
    const char* n = hvd::op_name(static_cast<hvd::OpType>(i));
    ops[n] = m.ops[i].load();
    bytes[n] = m.bytes[i].load();
  }
  d["ops"] = ops;
  d["bytes"] = bytes;
  d["negotiate_us"] = m.negotiate_us.load();
  d["memcpy_in_us"] = m.memcpy_in_us.load();
  d["collective_us"] = m.collective_us.load();
  d["memcpy_out_us"] = m.memcpy_out_us.load();
  d["responses"] = m.responses.load();
  d["fused_tensors"] = m.fused_tensors.load();
  d["cached_requests"] = m.cached_requests.load();
  d["full_requests"] = m.full_requests.load();
  d["carried_allreduces"] = m.carried_allreduces.load();
  d["errors"] = m.errors.load();
  d["stalls"] = m.stalls.load();
  d["fusion_threshold"] = m.fusion_threshold.load();
  d["cycle_time_ms"] = m.cycle_time_us.load() / 1000.0;
  d["autotuning"] = m.autotuning.load();
  d["autotune_settings"] = m.autotune_settings.load();
  return d;
}

}  // namespace

namespace jhvd {

// Holds the registry lock while enqueueing, so a concurrent shutdown cannot free the engine meanwhile.
HandleGroup enqueue_entries(std::vector<hvd::TensorEntry> group, bool caller_waits) {
  std::lock_guard<std::mutex> g(g_mu);
  check_not_helper();
  if (!g_engine) throw nb::value_error(kNotInitialized);
  return {g_engine->enqueue(std::move(group), caller_waits)};
}

void refuse_entries(const hvd::OpSpec& spec, const std::vector<std::string>& names, const std::string& why) {
  HandleGroup told;
  {
    std::lock_guard<std::mutex> g(g_mu);
    if (!g_engine || names.empty()) return;
    told.handles = g_engine->refuse(spec, names, why);
  }
  wait_group(told, -1.0);
}

}  // namespace jhvd

NB_MODULE(_C, m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const hvd::InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  nb::class_<hvd::Handle>(m, "Handle")
      .def_prop_ro("output_shape", [](const hvd::Handle& h) { return h.output_shape; })
      .def_prop_ro("received_splits", [](const hvd::Handle& h) { return h.received_splits; })
      .def("output", [](hvd::Handle& h) {
        // A zero-copy uint8 view of the engine-allocated result. Its owner is a capsule that shares the
        // handle's ownership, not the Python handle: a view torch still holds when Python exits (a tensor's
        // `.grad`, an autograd node's saved output) outlives what the interpreter frees, and nanobind would
        // report the handle as leaked by the binding.
        nb::capsule owner(new std::shared_ptr<hvd::Handle>(h.shared_from_this()),
                          [](void* p) noexcept { delete static_cast<std::shared_ptr<hvd::Handle>*>(p); });
        return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(h.output.data(), {h.output.size()}, owner);
      });
  nb::class_<jhvd::HandleGroup>(m, "HandleGroup")
      // Not yet: the first unfinished handle steps the engine itself or gives up the core for a moment
      // (Handle::poll_step). A script that polls in a loop would otherwise keep the engine thread, which
      // shares its core where ranks are bound one core each, from running until the scheduler took the
      // core away (a 4-byte allreduce then took milliseconds).
      .def("poll", [](const jhvd::HandleGroup& g) {
        const auto open = [&g](auto from) {
          return std::find_if(from, g.handles.end(), [](const auto& h) { return !h->poll(); });
        };
        auto first = open(g.handles.begin());
        if (first == g.handles.end()) return true;
        {
          nb::gil_scoped_release nogil;
          (*first)->poll_step();
        }
        return open(first) == g.handles.end();
      })
      // Whether every handle is done, by their status alone: no step is run and the core is not given up, for
      // the bookkeeping of dropped handles (a finalizer that a garbage collection runs anywhere).
      .def("done", [](const jhvd::HandleGroup& g) {
        return std::all_of(g.handles.begin(), g.handles.end(), [](const auto& h) { return h->poll(); });
      })
      // The group's status code once every handle is done (0: all succeeded; `status` has the failure),
      // or None when `timeout_s` passed first: one call on a blocking op's usual path.
      .def("wait", [](const jhvd::HandleGroup& g, double timeout_s) -> std::optional<int> {
        if (!wait_group(g, timeout_s)) return std::nullopt;
        return static_cast<int>(first_failure(g).code);
      }, "timeout_s"_a = -1.0)
      .def("status", [](const jhvd::HandleGroup& g) { return status_tuple(first_failure(g)); })
      .def("__len__", [](const jhvd::HandleGroup& g) { return g.handles.size(); })
      .def("__getitem__", [](const jhvd::HandleGroup& g, size_t i) {
        if (i >= g.handles.size()) throw nb::index_error();
        return g.handles[i];
      });

  register_fork_handlers();
  m.def("init", [](uintptr_t comm_handle) {
    std::lock_guard<std::mutex> g(g_mu);
    if (g_engine || g_helper_of) return;
    hvd::Config cfg = hvd::Config::from_env();
    nb::gil_scoped_release nogil;  // init is collective: other Python threads may run meanwhile
    g_engine = std::make_unique<hvd::Engine>(reinterpret_cast<MPI_Comm>(comm_handle), cfg);
  }, "comm_handle"_a);
  m.def("shutdown", [] {
    std::unique_ptr<hvd::Engine> e;
    {
      std::lock_guard<std::mutex> g(g_mu);
      e = std::move(g_engine);
      g_helper_of.reset();
    }
    nb::gil_scoped_release nogil;
    e.reset();
  });
  m.def("become_helper", [](int rank, int size, int local_rank, int local_size, int cross_rank, int cross_size,
                            int homogeneous) {  // an int, as topology() gives it
    std::lock_guard<std::mutex> g(g_mu);
    if (!g_engine)
      g_helper_of = hvd::Topology{rank, size, local_rank, local_size, cross_rank, cross_size, homogeneous != 0};
  }, "rank"_a, "size"_a, "local_rank"_a, "local_size"_a, "cross_rank"_a, "cross_size"_a, "homogeneous"_a);
  m.def("is_initialized", [] {
    std::lock_guard<std::mutex> g(g_mu);
    return static_cast<bool>(g_engine) || g_helper_of.has_value();
  });
  m.def("topology", [] {
    const hvd::Topology t = topology();
    return nb::make_tuple(t.rank, t.size, t.local_rank, t.local_size, t.cross_rank, t.cross_size,
                          static_cast<int>(t.homogeneous));
  });
  // The cores this host's ranks may use together: jupyter_hvd.torch's DistributedOptimizer asks whether their
  // compute threads fill them.
  m.def("host_cores", [] { return topology().host_cores; });
  m.def("abort", [](const std::string& reason) { engine().abort(reason); }, "reason"_a);
  m.def("stop_status", [] { return status_tuple(engine().stop_status()); });
  m.def("add_process_set", [](std::vector<int> ranks) {
    auto& e = engine();
    nb::gil_scoped_release nogil;
    return e.add_process_set(std::move(ranks));
  }, "ranks"_a);
  m.def("remove_process_set", [](int32_t id) {
    auto& e = engine();
    nb::gil_scoped_release nogil;
    e.remove_process_set(id);
  }, "id"_a);
  m.def("start_timeline", [](const std::string& path, bool mark_cycles) {
    try {
      engine().start_timeline(path, mark_cycles);
    } catch (const std::runtime_error& e) {
      throw nb::value_error(e.what());
    }
  }, "path"_a, "mark_cycles"_a);
  m.def("stop_timeline", [] { engine().stop_timeline(); });
  m.def("drain_events", [](uint64_t since, size_t max) {
    uint64_t dropped = 0;
    auto events = engine().drain_events(since, max, &dropped);
    nb::list out;
    for (const auto& e : events)
      out.append(nb::make_tuple(e.seq, e.rank, hvd::phase_name(e.phase), e.name, e.op, e.start_us,
                                e.dur_us, e.bytes));
    return nb::make_tuple(out, dropped);
  }, "since"_a, "max"_a = 100000);
  m.def("metrics", [] { return metrics_dict(engine().metrics()); });
  // For results a frontend allocates itself (torch's allreduce): as the engine's own (memory_advice.h).
  m.attr("HUGE_PAGES_FROM") = hvd::kHugePagesFrom;
  m.def("advise_huge_pages", [](uintptr_t address, size_t bytes) {
    hvd::advise_huge_pages(reinterpret_cast<void*>(address), bytes);
  }, "address"_a, "bytes"_a);
  jhvd::bind_contracts(m);
  jhvd::bind_submit(m);
  jhvd::bind_auto_names(m);
  jhvd::bind_gpu(m);
#ifdef JHVD_WITH_MXNET
  jhvd::bind_mxnet(m);
#endif
}
