// jupyter_hvd._C: binds one process-wide engine. Buffers arrive as raw addresses that the
// Python layer keeps alive until their handle completes; results go back as status tuples.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <mutex>

#include "engine.h"
#include "gpu_binding.h"
#ifdef JHVD_WITH_MXNET
#include "mxnet_bridge.h"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

std::mutex g_mu;
std::unique_ptr<hvd::Engine> g_engine;

hvd::Engine& engine() {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_engine) throw nb::value_error("jupyter_hvd has not been initialized; use hvd.init().");
  return *g_engine;
}

nb::tuple status_tuple(const hvd::Status& s) {
  return nb::make_tuple(static_cast<int>(s.code), s.message, s.origin_rank);
}

// Waits in short slices with the GIL released, so Ctrl-C and other threads still run.
bool wait_handle(const hvd::Handle& h, double timeout_s) {
  auto slice = std::chrono::milliseconds(50);
  auto start = std::chrono::steady_clock::now();
  while (true) {
    bool done;
    {
      nb::gil_scoped_release nogil;
      done = h.wait_for(slice);
    }
    if (done) return true;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
    if (timeout_s >= 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= timeout_s)
      return false;
  }
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
std::shared_ptr<hvd::Handle> enqueue_entry(hvd::TensorEntry entry) {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_engine) throw std::runtime_error("jupyter_hvd has not been initialized; use hvd.init().");
  return g_engine->enqueue(std::move(entry));
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
      .def("poll", &hvd::Handle::poll)
      .def("wait", &wait_handle, "timeout_s"_a = -1.0)
      .def("status", [](const hvd::Handle& h) { return status_tuple(h.status()); })
      .def_prop_ro("output_shape", [](const hvd::Handle& h) { return h.output_shape; })
      .def_prop_ro("received_splits", [](const hvd::Handle& h) { return h.received_splits; })
      .def("output", [](nb::handle self) {
        // A zero-copy uint8 view of the engine-allocated result that keeps the handle alive.
        auto& h = nb::cast<hvd::Handle&>(self);
        size_t n = h.output.size();
        return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(h.output.data(), {n}, self);
      }, nb::rv_policy::reference_internal);

  m.def("init", [](uintptr_t comm_handle) {
    std::lock_guard<std::mutex> g(g_mu);
    if (g_engine) return;
    hvd::Config cfg = hvd::Config::from_env();
    nb::gil_scoped_release nogil;  // init is collective: other Python threads may run meanwhile
    g_engine = std::make_unique<hvd::Engine>(reinterpret_cast<MPI_Comm>(comm_handle), cfg);
  }, "comm_handle"_a);
  m.def("shutdown", [] {
    std::unique_ptr<hvd::Engine> e;
    {
      std::lock_guard<std::mutex> g(g_mu);
      e = std::move(g_engine);
    }
    nb::gil_scoped_release nogil;
    e.reset();
  });
  m.def("is_initialized", [] {
    std::lock_guard<std::mutex> g(g_mu);
    return static_cast<bool>(g_engine);
  });
  m.def("topology", [] {
    const auto& t = engine().topology();
    return nb::make_tuple(t.rank, t.size, t.local_rank, t.local_size, t.cross_rank, t.cross_size);
  });
  m.def("enqueue", [](int op, const std::string& name, int dtype, std::vector<int64_t> shape,
                      uintptr_t input, uintptr_t output, int reduce, int process_set, int root_rank,
                      double prescale, double postscale, std::vector<int64_t> splits) {
    hvd::TensorEntry e;
    e.request.spec = {static_cast<hvd::OpType>(op), static_cast<hvd::ReduceOp>(reduce),
                      static_cast<hvd::DataType>(dtype), hvd::Memory::Host, process_set, root_rank, prescale,
                      postscale};
    e.request.name = name;
    e.request.shape = std::move(shape);
    e.input = reinterpret_cast<const void*>(input);
    e.output = reinterpret_cast<void*>(output);
    e.splits = std::move(splits);
    return engine().enqueue(std::move(e));
  }, "op"_a, "name"_a, "dtype"_a, "shape"_a, "input"_a, "output"_a, "reduce"_a, "process_set"_a,
     "root_rank"_a, "prescale"_a, "postscale"_a, "splits"_a);
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
  // The address of a host array's first element (0 when empty), read through the buffer protocol:
  // a fraction of what numpy's __array_interface__ costs per call.
  m.def("address", [](nb::handle array) {
    Py_buffer view;
    if (PyObject_GetBuffer(array.ptr(), &view, PyBUF_ANY_CONTIGUOUS) != 0) throw nb::python_error();
    uintptr_t p = view.len ? reinterpret_cast<uintptr_t>(view.buf) : 0;
    PyBuffer_Release(&view);
    return p;
  }, "array"_a);
  m.def("hold_queue", [] { engine().hold_queue(); });
  m.def("release_queue", [] { engine().release_queue(); });
  jhvd::bind_gpu(m);
#ifdef JHVD_WITH_MXNET
  jhvd::bind_mxnet(m);
#endif
}
