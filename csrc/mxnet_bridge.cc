// Pushes collectives on NDArrays into MXNet's dependency engine. Each push is one asynchronous
// MXNet operation that holds its NDArrays as dependencies (those it writes as mutable ones): MXNet
// starts it once their writers (say, backward) are done, it hands the raw buffers to the engine
// without a copy, and it completes from the engine thread, so readers of the results wait for the
// collective and see its error as an MXNetError (of jupyter_hvd/mxnet/errors.py's classes).
#include "mxnet_bridge.h"

#include <dlpack/dlpack.h>
#include <mxnet/c_api.h>
#include <mxnet/engine.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "registry.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace jhvd {
namespace {

// The C API entry points of the libmxnet that Python loaded; set once, before the first push.
struct MXApi {
  decltype(&MXEnginePushAsyncND) push_async_nd = nullptr;
  decltype(&MXNDArrayToDLPack) to_dlpack = nullptr;
  decltype(&MXShallowCopyNDArray) shallow_copy = nullptr;
  decltype(&MXNDArrayFree) free_array = nullptr;
  decltype(&MXGetLastError) last_error = nullptr;
  decltype(&MXNDArrayCreateEx) create = nullptr;
  decltype(&MXNDArrayGetShapeEx) get_shape = nullptr;
  decltype(&MXNDArrayGetDType) get_dtype = nullptr;
  decltype(&MXNDArrayGetContext) get_context = nullptr;
};
MXApi g_api;

// An NDArray handle of our own (a shallow copy), so its storage outlives the Python object.
class OwnedArray {
 public:
  explicit OwnedArray(NDArrayHandle h) : h_(h) {}
  OwnedArray(OwnedArray&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  OwnedArray(const OwnedArray&) = delete;
  OwnedArray& operator=(const OwnedArray&) = delete;
  OwnedArray& operator=(OwnedArray&&) = delete;
  ~OwnedArray() {
    if (h_) g_api.free_array(h_);
  }
  NDArrayHandle get() const { return h_; }
  NDArrayHandle release() { return std::exchange(h_, nullptr); }

 private:
  NDArrayHandle h_;
};

// One pushed MXNet operation: the same collective on one or more NDArrays, each in place, or each into
// its own output NDArray of the same shape and dtype.
struct PushedOp {
  hvd::OpSpec spec;  // its dtype is read from each NDArray when the op runs
  std::vector<std::string> names;
  std::vector<OwnedArray> arrays;
  std::vector<OwnedArray> outputs;  // empty: in place
};

void delete_op(void* param) { delete static_cast<PushedOp*>(param); }

// The name of the exception class Python registered with MXNet for each status code, "" where MXNet's own
// MXNetError stands (jupyter_hvd/mxnet/errors.py); set once, before the first push.
std::vector<std::string> g_error_classes;

// A failed op's error as MXNet carries it to Python, as text alone: "<class>: <origin rank>: <message>", whose
// first word picks the class MXNet raises, which reads the rest back (jupyter_hvd/mxnet/errors.py).
std::string error_text(const hvd::Status& s) {
  std::string message = s.message.empty() ? "collective failed" : s.message;
  const auto code = static_cast<size_t>(s.code);
  if (code >= g_error_classes.size() || g_error_classes[code].empty()) return message;
  return g_error_classes[code] + ": " + std::to_string(s.origin_rank) + ": " + message;
}

// MXNet 1.9's engine files a failed operation's error in one list shared by all its threads, without a lock
// (ThreadedEngine::OnComplete), so failures completing at once on two threads corrupt it and crash the
// process: ours complete one at a time. Recursive: a completion that ran another of ours could not deadlock.
std::recursive_mutex g_failing;

// Completes the MXNet operation once every tensor in it has finished, with the first error.
class GroupCompletion {
 public:
  GroupCompletion(mxnet::engine::CallbackOnComplete done, size_t count) : done_(done), left_(count) {}

  void finish(const hvd::Status& s) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!s.ok() && error_.empty()) error_ = error_text(s);
      if (--left_ > 0) return;
    }
    if (error_.empty()) {
      done_();
    } else {
      dmlc::Error err(error_);
      std::lock_guard<std::recursive_mutex> one_at_a_time(g_failing);
      done_(&err);
    }
  }

 private:
  mxnet::engine::CallbackOnComplete done_;
  std::mutex mu_;
  size_t left_;
  std::string error_;
};

hvd::DataType dtype_of(const DLDataType& t, const std::string& name) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 16) return hvd::DataType::Float16;
    if (t.code == kDLFloat && t.bits == 32) return hvd::DataType::Float32;
    if (t.code == kDLFloat && t.bits == 64) return hvd::DataType::Float64;
    if (t.code == kDLBfloat && t.bits == 16) return hvd::DataType::BFloat16;
    if (t.code == kDLInt && t.bits == 8) return hvd::DataType::Int8;
    if (t.code == kDLInt && t.bits == 32) return hvd::DataType::Int32;
    if (t.code == kDLInt && t.bits == 64) return hvd::DataType::Int64;
    if (t.code == kDLUInt && t.bits == 8) return hvd::DataType::UInt8;
    if (t.code == kDLUInt && t.bits == 1) return hvd::DataType::Bool;
  }
  throw std::invalid_argument("NDArray '" + name + "' has a dtype the engine does not support (DLPack code " +
                              std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits)");
}

std::string mxnet_error(const std::string& what) {
  std::string msg = g_api.last_error ? g_api.last_error() : "";
  if (msg.find("MKLDNN") != std::string::npos)
    msg = "it is in an MKLDNN-internal layout (as weights are after an inference pass), which collectives "
          "cannot read where it is; reduce a copy (arr.copy()), or use it after a training pass";
  return what + ": " + msg;
}

using DLView = std::unique_ptr<DLManagedTensor, void (*)(DLManagedTensor*)>;

// A DLPack view of a CPU NDArray's buffer (no copy), which holds the array until it goes.
DLView dlpack_of(const OwnedArray& array, const std::string& name) {
  DLManagedTensorHandle raw = nullptr;
  if (g_api.to_dlpack(array.get(), &raw) != 0)
    throw std::invalid_argument(mxnet_error("cannot read NDArray '" + name + "'"));
  DLView view(static_cast<DLManagedTensor*>(raw), [](DLManagedTensor* t) {
    if (t->deleter) t->deleter(t);
  });
  const DLTensor& t = view->dl_tensor;
  if (t.ctx.device_type != kDLCPU && t.ctx.device_type != kDLCPUPinned)
    throw std::invalid_argument("NDArray '" + name + "' is not on the CPU; jupyter_hvd.mxnet reduces CPU NDArrays");
  return view;
}

void* data_of(const DLTensor& t) { return static_cast<char*>(t.data) + t.byte_offset; }

// The engine request for tensor i, reading (and writing) the NDArrays' buffers where they are.
hvd::TensorEntry entry_for(const PushedOp& op, size_t i) {
  const std::string& name = op.names[i];
  DLView in = dlpack_of(op.arrays[i], name);
  const DLTensor& t = in->dl_tensor;
  hvd::TensorEntry e;
  e.request.spec = op.spec;
  e.request.spec.dtype = dtype_of(t.dtype, name);
  e.request.name = name;
  e.request.shape.assign(t.shape, t.shape + t.ndim);
  e.input = data_of(t);
  // An output was made like its input (empty_like): only its address is new.
  e.output = op.outputs.empty() ? data_of(t) : data_of(dlpack_of(op.outputs[i], name)->dl_tensor);
  return e;
}

// MXNet's EngineAsyncFunc: runs once the NDArrays' earlier writers and readers are done.
// It never throws: failures complete the operation with an error instead.
void run_op(void* /*run_ctx*/, void* on_complete, void* param) {
  auto done = *static_cast<mxnet::engine::CallbackOnComplete*>(on_complete);
  const auto& op = *static_cast<const PushedOp*>(param);
  std::vector<hvd::TensorEntry> entries;
  entries.reserve(op.names.size());
  std::vector<std::shared_ptr<hvd::Handle>> handles;
  try {
    for (size_t i = 0; i < op.names.size(); ++i) entries.push_back(entry_for(op, i));
    // From here `op` may be freed as soon as the last tensor completes: use only locals.
    handles = enqueue_entries(std::move(entries)).handles;  // all of them, or none
  } catch (const std::exception& ex) {
    GroupCompletion(done, 1).finish(hvd::Status::Error(hvd::Status::Code::Invalid, ex.what()));
    return;
  }
  auto group = std::make_shared<GroupCompletion>(done, handles.size());
  for (auto& h : handles) h->on_complete([group](const hvd::Status& s) { group->finish(s); });
}

const char* opr_name(hvd::OpType op) {
  switch (op) {
    case hvd::OpType::Allreduce: return "jupyter_hvd_allreduce";
    case hvd::OpType::Broadcast: return "jupyter_hvd_broadcast";
    default: return "jupyter_hvd_collective";
  }
}

void setup(uintptr_t push_async_nd, uintptr_t to_dlpack, uintptr_t shallow_copy, uintptr_t free_array,
           uintptr_t last_error, uintptr_t create, uintptr_t get_shape, uintptr_t get_dtype, uintptr_t get_context,
           std::vector<std::string> error_classes) {
  if (!push_async_nd || !to_dlpack || !shallow_copy || !free_array || !last_error || !create || !get_shape ||
      !get_dtype || !get_context)
    throw nb::value_error("mxnet_setup: every MXNet C API address must be non-null");
  g_api.push_async_nd = reinterpret_cast<decltype(g_api.push_async_nd)>(push_async_nd);
  g_api.to_dlpack = reinterpret_cast<decltype(g_api.to_dlpack)>(to_dlpack);
  g_api.shallow_copy = reinterpret_cast<decltype(g_api.shallow_copy)>(shallow_copy);
  g_api.free_array = reinterpret_cast<decltype(g_api.free_array)>(free_array);
  g_api.last_error = reinterpret_cast<decltype(g_api.last_error)>(last_error);
  g_api.create = reinterpret_cast<decltype(g_api.create)>(create);
  g_api.get_shape = reinterpret_cast<decltype(g_api.get_shape)>(get_shape);
  g_api.get_dtype = reinterpret_cast<decltype(g_api.get_dtype)>(get_dtype);
  g_api.get_context = reinterpret_cast<decltype(g_api.get_context)>(get_context);
  g_error_classes = std::move(error_classes);
}

// Our own references to the NDArrays of `handles`, into `owned`, and their handles into `deps`.
void reference(const std::vector<uintptr_t>& handles, std::vector<OwnedArray>& owned, std::vector<NDArrayHandle>& deps) {
  owned.reserve(handles.size());
  deps.reserve(handles.size());
  for (uintptr_t a : handles) {
    NDArrayHandle copy = nullptr;
    if (g_api.shallow_copy(reinterpret_cast<NDArrayHandle>(a), &copy) != 0)
      throw std::runtime_error(mxnet_error("cannot reference NDArray"));
    owned.emplace_back(copy);
    deps.push_back(copy);
  }
}

// A new NDArray of `array`'s shape, dtype and device, whose memory comes when it is first written.
OwnedArray empty_like(uintptr_t array) {
  auto a = reinterpret_cast<NDArrayHandle>(array);
  int ndim = 0, dtype = 0, dev_type = 0, dev_id = 0;
  const int* dims = nullptr;
  if (g_api.get_shape(a, &ndim, &dims) != 0 || g_api.get_dtype(a, &dtype) != 0 ||
      g_api.get_context(a, &dev_type, &dev_id) != 0)
    throw std::runtime_error(mxnet_error("cannot read NDArray"));
  std::vector<uint32_t> shape(dims, dims + std::max(ndim, 0));
  NDArrayHandle out = nullptr;
  if (g_api.create(shape.data(), static_cast<uint32_t>(shape.size()), dev_type, dev_id, 1, dtype, &out) != 0)
    throw std::runtime_error(mxnet_error("cannot create the result NDArray"));
  return OwnedArray(out);
}

// The elements of `array`, or -1 where MXNet cannot say (an array whose shape is unknown yet).
int64_t elements(uintptr_t array) {
  int ndim = 0;
  const int* dims = nullptr;
  if (g_api.get_shape(reinterpret_cast<NDArrayHandle>(array), &ndim, &dims) != 0 || ndim < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[i];
  return n;
}

// How MXNet is to run the op. Horovod's choice, its prioritised CPU pool, keeps gradients ahead of compute,
// but every op then goes to a pool thread and back: for a small one (a metric, a flag) that hand-off cost
// more than the collective. MXNet runs a kAsync op in the pushing thread when its inputs are ready, and
// queues it behind the CPU workers' compute otherwise, which a small op hardly notices (it only starts the
// collective): so kAsync up to kInlineElements elements in all.
constexpr int64_t kInlineElements = 1024;

mxnet::FnProperty property_for(const std::vector<uintptr_t>& arrays) {
  int64_t total = 0;
  for (uintptr_t a : arrays) {
    int64_t n = elements(a);
    if (n < 0 || (total += n) > kInlineElements) return mxnet::FnProperty::kCPUPrioritized;
  }
  return mxnet::FnProperty::kAsync;
}

// In place (`out_of_place` false), the op writes `arrays` (MXNet's mutable dependencies). Out of place, it
// reads them (const ones) and writes new NDArrays made here, whose handles it returns for Python to own: no
// copy of the input, which would be one more MXNet operation.
std::vector<uintptr_t> push(const hvd::OpSpec& spec, std::vector<std::string> names,
                            const std::vector<uintptr_t>& arrays, bool out_of_place, int priority) {
  if (!g_api.push_async_nd) throw nb::value_error("mxnet_push before mxnet_setup");
  if (arrays.empty() || names.size() != arrays.size())
    throw nb::value_error("mxnet_push: need one name per NDArray, and at least one NDArray");
  auto p = std::make_unique<PushedOp>();
  p->spec = spec;
  p->spec.memory = hvd::Memory::Host;
  p->names = std::move(names);
  std::vector<NDArrayHandle> reads, writes;
  std::vector<OwnedArray> results;
  if (!out_of_place) {
    reference(arrays, p->arrays, writes);
  } else {
    reference(arrays, p->arrays, reads);
    std::vector<uintptr_t> made;
    results.reserve(arrays.size());
    for (uintptr_t a : arrays) {
      results.push_back(empty_like(a));
      made.push_back(reinterpret_cast<uintptr_t>(results.back().get()));
    }
    reference(made, p->outputs, writes);
  }
  static const mxnet::Context ctx = mxnet::Context::CPU();
  const mxnet::FnProperty prop = property_for(arrays);
  hvd::OpType kind = p->spec.op;
  // MXNet owns the op from here, and frees it with delete_op even when the push fails.
  int rc = g_api.push_async_nd(run_op, p.release(), delete_op, &ctx, reads.data(), static_cast<int>(reads.size()),
                               writes.data(), static_cast<int>(writes.size()), &prop, priority, opr_name(kind), false);
  if (rc != 0) throw std::runtime_error(mxnet_error("pushing the collective into MXNet's engine failed"));
  std::vector<uintptr_t> handed;
  for (auto& r : results) handed.push_back(reinterpret_cast<uintptr_t>(r.release()));
  return handed;
}

}  // namespace

void bind_mxnet(nb::module_& m) {
  m.def("mxnet_setup", &setup, "push_async_nd"_a, "to_dlpack"_a, "shallow_copy"_a, "free_array"_a,
        "last_error"_a, "create"_a, "get_shape"_a, "get_dtype"_a, "get_context"_a, "error_classes"_a);
  m.def("mxnet_push", &push, "spec"_a, "names"_a, "arrays"_a, "out_of_place"_a, "priority"_a);
}

}  // namespace jhvd
