// GPU tensors arrive as device addresses (from __cuda_array_interface__ or DLPack) with the
// producer's stream; the caller records a ready event on that stream before the engine runs.
#include "gpu_binding.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <optional>
#include <utility>

#include "engine.h"
#include "gpu/copy_kernel.h"
#include "gpu/gpu_runtime.h"
#include "gpu/ready_event.h"
#include "registry.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace jhvd {

namespace {

nb::dict library_dict(const hvd::gpu::LibraryStatus& s) {
  nb::dict d;
  d["loaded"] = s.loaded;
  d["library"] = s.path;
  d["error"] = s.error;
  d["version_code"] = s.version;
  return d;
}

nb::dict status_dict(const hvd::gpu::GpuStatus& s) {
  nb::dict d;
  d["cuda"] = library_dict(s.cuda);
  d["nccl"] = library_dict(s.nccl);
  d["driver_version_code"] = s.driver_version;
  d["device_count"] = s.device_count;
  d["device_error"] = s.device_error;
  d["cuda_available"] = s.cuda_ready();
  d["nccl_available"] = s.nccl_ready();
  return d;
}

}  // namespace

std::vector<hvd::TensorEntry> device_entries(const hvd::OpSpec& spec, const std::vector<std::string>& names,
                                             const std::vector<int>& codes, nb::list arrays, nb::list outputs,
                                             const std::vector<int64_t>& splits) {
  const size_t n = names.size();
  auto& rt = hvd::gpu::runtime();
  if (!rt.cuda_ready()) {
    auto s = rt.status();
    std::string why = s.cuda.loaded ? s.device_error : s.cuda.error;
    throw std::runtime_error("GPU tensor '" + (n ? names[0] : std::string()) + "', but CUDA is not usable here: " +
                             (why.empty() ? "the CUDA runtime has not been loaded (gpu_load)" : why));
  }
  std::vector<hvd::TensorEntry> group(n);
  // One ready event per stream serves every tensor that it produced.
  std::map<std::pair<int, uintptr_t>, std::shared_ptr<hvd::gpu::ReadyEvent>> events;
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = names[i];
    nb::handle a = arrays[i], out = outputs[i];
    const int device = nb::cast<int>(a.attr("device"));
    if (device < 0 || device >= rt.status().device_count)
      throw hvd::InvalidArgument("tensor '" + name + "' is on cuda:" + std::to_string(device) + ", but " +
                                 std::to_string(rt.status().device_count) + " CUDA device(s) are visible");
    hvd::TensorEntry& e = group[i];
    e.request.spec = spec;
    e.request.spec.dtype = data_type(codes[i]);
    e.request.spec.memory = hvd::Memory::Cuda;
    e.request.name = name;
    e.request.shape = nb::cast<std::vector<int64_t>>(a.attr("shape"));
    e.input = reinterpret_cast<const void*>(nb::cast<uintptr_t>(a.attr("ptr")));
    e.output = out.is_none() ? nullptr : reinterpret_cast<void*>(nb::cast<uintptr_t>(out.attr("ptr")));
    e.splits = splits;
    e.device = device;
    nb::object stream = a.attr("stream");
    if (stream.is_none()) continue;
    const auto address = nb::cast<uintptr_t>(stream);
    auto& ready = events[{device, address}];
    if (!ready) {
      std::string err;
      ready = hvd::gpu::ReadyEvent::record(rt, device, reinterpret_cast<hvd::gpu::cudaStream_t>(address), &err);
      if (!ready) throw std::runtime_error("tensor '" + name + "': " + err);
    }
    e.ready = ready;
  }
  return group;
}

void bind_gpu(nb::module_& m) {
  m.def("gpu_load", [](std::vector<std::string> cuda_dirs, std::vector<std::string> nccl_dirs) {
    auto paths = hvd::gpu::SearchPaths::from_env(std::move(cuda_dirs), std::move(nccl_dirs));
    nb::gil_scoped_release nogil;  // loading libnccl and starting the driver take a while
    auto s = hvd::gpu::runtime().load(paths);
    nb::gil_scoped_acquire gil;
    return status_dict(s);
  }, "cuda_dirs"_a, "nccl_dirs"_a);
  m.def("gpu_status", [] { return status_dict(hvd::gpu::runtime().status()); });
  // How the last load of the copy kernel went: "" before any, "loaded", or why not.
  m.def("copy_kernel_status", [] { return hvd::gpu::copy_kernel_status(); });
  m.def("gpu_set_device", [](int device) {
    auto& rt = hvd::gpu::runtime();
    if (!rt.cuda_ready()) throw std::runtime_error("CUDA is not usable here: " + rt.status().device_error);
    hvd::gpu::cudaError_t e = rt.cuda().cudaSetDevice(device);
    if (e != hvd::gpu::cudaSuccess) {
      rt.cuda().cudaGetLastError();
      throw std::runtime_error("cannot use cuda:" + std::to_string(device) + ": " + rt.cuda_error(e));
    }
  }, "device"_a);


  // What a DLPack tensor is, without touching its memory: (address, shape, strides in elements
  // or None, (type code, bits, lanes), (device type, device id)).
  m.def("dlpack_info", [](nb::ndarray<> a) {
    std::vector<int64_t> shape, strides;
    for (size_t i = 0; i < a.ndim(); ++i) {
      shape.push_back(static_cast<int64_t>(a.shape(i)));
      strides.push_back(a.stride(i));
    }
    auto dt = a.dtype();
    return nb::make_tuple(reinterpret_cast<uintptr_t>(a.data()), shape, strides,
                          nb::make_tuple(dt.code, dt.bits, dt.lanes), nb::make_tuple(a.device_type(), a.device_id()));
  }, "tensor"_a);

  // The engine-allocated device result of a finished handle: (address, bytes, device).
  m.def("device_output", [](const hvd::Handle& h) {
    return nb::make_tuple(reinterpret_cast<uintptr_t>(h.device_output.get()), h.device_output_bytes, h.device);
  }, "handle"_a);
  // The same result as a DLPack-exporting array of the given type, keeping the handle alive.
  m.def("device_output_dlpack", [](nb::handle handle, uint8_t code, uint8_t bits) {
    auto& h = nb::cast<hvd::Handle&>(handle);
    std::vector<size_t> shape(h.output_shape.begin(), h.output_shape.end());
    nb::dlpack::dtype dt{code, bits, 1};
    return nb::ndarray<nb::array_api>(h.device_output.get(), shape.size(), shape.data(), handle, nullptr, dt,
                                      nb::device::cuda::value, h.device);
  }, "handle"_a, "code"_a, "bits"_a);
}

}  // namespace jhvd
