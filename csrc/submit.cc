// jupyter_hvd._C.submit: one collective's arrays, names and arguments, as Python passes them, checked and
// turned into engine entries and queued as one group. What Python defines (each numpy dtype's engine code
// in dtypes.py, the check of a name in naming.py, what a device tensor is in gpu.py) it hands over once, at
// import (set_python_rules); the call reads them here, and numbers unnamed ops itself (auto_names.h), so the
// bookkeeping of a small blocking collective costs no Python frames, only a call back for what is not there
// (a dtype not in the table, a name that is neither a string nor None). A framework's own host tensor type
// (torch.Tensor) may be registered too (add_host_tensor_type): its tensors are read by their data pointer,
// with no numpy view made per call.
#include "submit.h"

#include <Python.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "auto_names.h"
#include "gpu_binding.h"
#include "registry.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace jhvd {
namespace {

struct PythonRules {
  nb::dict codes;           // numpy dtype -> the engine's dtype code
  nb::object dtype_code;    // (dtype, what) -> its code, or TypeError naming the supported ones
  nb::object engine_name;   // (what, name, set id) -> the engine's name, or ValueError for a bad one
  nb::object device_array;  // the type of a tensor in CUDA memory
};

// A framework's host tensor type, whose objects say where their memory is through methods (data_ptr(),
// shape, dtype, is_contiguous(), is_cpu), with its dtype rules as PythonRules has numpy's.
struct HostTensorType {
  nb::object type;
  nb::dict codes;         // the framework's dtype -> the engine's dtype code
  nb::object dtype_code;  // (dtype, what) -> its code, or TypeError naming the supported ones
};

// Set at import and never freed: their Python objects must not be released after the interpreter has gone.
PythonRules* g_rules = nullptr;
std::vector<HostTensorType>* g_tensor_types = new std::vector<HostTensorType>();

// The registered host tensor type `array` is an instance of, or null (a numpy array or other buffer).
const HostTensorType* tensor_type(nb::handle array) {
  for (const HostTensorType& t : *g_tensor_types)
    if (PyObject_TypeCheck(array.ptr(), reinterpret_cast<PyTypeObject*>(t.type.ptr()))) return &t;
  return nullptr;
}

// The attribute names submit reads, made once: looking one up by a C string builds a new str per call.
struct AttributeNames {
  PyObject *dtype, *is_cpu, *is_contiguous, *shape, *element_size, *data_ptr;
};

const AttributeNames& names() {
  static const AttributeNames* n = new AttributeNames{
      PyUnicode_InternFromString("dtype"), PyUnicode_InternFromString("is_cpu"),
      PyUnicode_InternFromString("is_contiguous"), PyUnicode_InternFromString("shape"),
      PyUnicode_InternFromString("element_size"), PyUnicode_InternFromString("data_ptr")};
  return *n;
}

// `t.<key>`, or `t.<key>()` when `call`; a Python error propagates.
nb::object attribute(nb::handle t, PyObject* key, bool call) {
  PyObject* r = call ? PyObject_CallMethodNoArgs(t.ptr(), key) : PyObject_GetAttr(t.ptr(), key);
  if (!r) throw nb::python_error();
  return nb::steal(r);
}

int dtype_code(const PythonRules& r, nb::handle array, const HostTensorType* tensor, const std::string& what) {
  nb::object dtype = attribute(array, names().dtype, false);
  const nb::dict& codes = tensor ? tensor->codes : r.codes;
  if (PyObject* code = PyDict_GetItemWithError(codes.ptr(), dtype.ptr())) return nb::cast<int>(nb::handle(code));
  if (PyErr_Occurred()) throw nb::python_error();
  return nb::cast<int>((tensor ? tensor->dtype_code : r.dtype_code)(dtype, what));
}

std::string engine_name(const PythonRules& r, nb::handle name, const std::string& what, int set_id) {
  if (PyUnicode_Check(name.ptr()) && PyUnicode_GET_LENGTH(name.ptr()) > 0) return nb::cast<std::string>(name);
  if (name.is_none()) return auto_name(what, set_id);
  return nb::cast<std::string>(r.engine_name(what, name, set_id));
}

// A scale factor as a double: any real number (a Python or numpy int or float), else a TypeError naming it.
double scale_factor(nb::handle x, const std::string& what, const char* which) {
  const double v = PyFloat_AsDouble(x.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    const std::string got = nb::cast<std::string>(nb::repr(x));
    throw nb::type_error((what + ": " + which + " must be a number, got " + got).c_str());
  }
  return v;
}

// A Python int as an int64_t; a Python error (not an int, out of range) propagates.
int64_t as_int64(nb::handle x) {
  const long long v = PyLong_AsLongLong(x.ptr());
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

// Where a registered host tensor's memory is (0 when empty) and its size in bytes: its elements times
// `element_size`, or where that is 0 (an output, whose dtype nothing checked) times the size the tensor gives.
// With `out_shape`, its shape goes there. hvd::InvalidArgument unless it is contiguous and in host memory.
// Each property is read by an interned name and converted by the C API: generic lookups and casts cost a
// torch CPU tensor's 4-byte allreduce 0.15-0.45 us more.
void* tensor_memory(nb::handle t, int64_t element_size, int64_t* bytes, std::vector<int64_t>* out_shape,
                    const std::string& name, const char* what) {
  if (attribute(t, names().is_cpu, false).ptr() != Py_True ||
      attribute(t, names().is_contiguous, true).ptr() != Py_True)
    throw hvd::InvalidArgument("tensor '" + name + "': the " + what + " must be a contiguous tensor in host memory");
  nb::object shape = attribute(t, names().shape, false);  // a torch.Size: a tuple
  if (!PyTuple_Check(shape.ptr())) throw nb::type_error("a host tensor's shape must be a tuple");
  const Py_ssize_t ndim = PyTuple_GET_SIZE(shape.ptr());
  int64_t count = 1;
  if (out_shape) out_shape->resize(static_cast<size_t>(ndim));
  for (Py_ssize_t d = 0; d < ndim; ++d) {
    const int64_t extent = as_int64(PyTuple_GET_ITEM(shape.ptr(), d));
    count *= extent;
    if (out_shape) (*out_shape)[static_cast<size_t>(d)] = extent;
  }
  *bytes = count * (element_size ? element_size : as_int64(attribute(t, names().element_size, true)));
  if (!count) return nullptr;
  void* p = PyLong_AsVoidPtr(attribute(t, names().data_ptr, true).ptr());
  if (!p && PyErr_Occurred()) throw nb::python_error();
  return p;
}

// A host array's address (0 when empty) and shape, read through the buffer protocol without asking
// for its format, so every dtype passes (or, for a registered tensor type, through its methods); a
// non-contiguous array, a read-only one to write, or an output of another size than the input, fails.
hvd::TensorEntry host_entry(const hvd::OpSpec& spec, std::string name, nb::handle input, nb::handle output) {
  hvd::TensorEntry e;
  e.request.spec = spec;
  int64_t bytes = 0;
  // The buffer's address and, into `bytes`, its size; for the op's `input` (whose dtype is the op's), also
  // its shape into the request.
  auto read = [&](nb::handle array, bool writable, bool input, const char* what) -> void* {
    if (tensor_type(array)) {
      const int64_t element_size = input ? static_cast<int64_t>(hvd::dtype_size(spec.dtype)) : 0;
      return tensor_memory(array, element_size, &bytes, input ? &e.request.shape : nullptr, name, what);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(array.ptr(), &view, PyBUF_ND | (writable ? PyBUF_WRITABLE : 0)) != 0) {
      PyErr_Clear();
      throw hvd::InvalidArgument("tensor '" + name + "': the " + what + " must be C-contiguous" +
                                 (writable ? " and writable" : ""));
    }
    void* p = view.len ? view.buf : nullptr;
    bytes = view.len;
    if (input) e.request.shape.assign(view.shape, view.shape + view.ndim);
    PyBuffer_Release(&view);
    return p;
  };
  if (output.ptr() == input.ptr()) {  // in place: one read, which must allow writing
    e.output = read(input, true, true, "array written in place");
    e.input = e.output;
  } else {
    e.input = read(input, false, true, "input array");
    const int64_t input_bytes = bytes;
    e.output = output.is_none() ? nullptr : read(output, true, false, "output array");
    if (!output.is_none() && bytes != input_bytes)  // the result is written over the whole output
      throw hvd::InvalidArgument("tensor '" + name + "': the output array has " + std::to_string(bytes) +
                                 " bytes, the input " + std::to_string(input_bytes));
  }
  e.request.name = std::move(name);
  return e;
}

// submit's checks and entries, once its names are taken; `named` stays whole for a refusal.
HandleGroup checked_submit(const PythonRules& r, const hvd::OpSpec& spec, const std::string& what, nb::list arrays,
                           nb::list outputs, const std::vector<std::string>& named, const std::vector<int64_t>& splits,
                           bool waits) {
  const size_t n = arrays.size();
  std::vector<int> codes(n);
  size_t on_device = 0;
  for (size_t i = 0; i < n; ++i) {
    codes[i] = dtype_code(r, arrays[i], tensor_type(arrays[i]), what);
    on_device += PyObject_TypeCheck(arrays[i].ptr(), reinterpret_cast<PyTypeObject*>(r.device_array.ptr()));
  }
  if (on_device && on_device != n)
    throw nb::value_error((what + ": the tensors of one group must all be on the host or all on the GPU").c_str());
  if (spec.op == hvd::OpType::Allreduce || spec.op == hvd::OpType::Reducescatter)
    check_reduce(codes, spec.reduce, spec.prescale, spec.postscale, what, on_device > 0);
  if (on_device) return enqueue_entries(device_entries(spec, named, codes, arrays, outputs, splits));
  std::vector<hvd::TensorEntry> group;
  group.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    hvd::OpSpec tensor_spec = spec;
    tensor_spec.dtype = data_type(codes[i]);
    tensor_spec.memory = hvd::Memory::Host;
    group.push_back(host_entry(tensor_spec, named[i], arrays[i], outputs[i]));
    group.back().splits = splits;
  }
  return enqueue_entries(std::move(group), waits);
}

}  // namespace

void bind_submit(nb::module_& m) {
  // The rule of submit()'s scale factors, for the callers that build an OpSpec themselves (MXNet's bridge).
  m.def("scale_factor", [](nb::handle x, const std::string& what, const std::string& which) {
    return scale_factor(x, what, which.c_str());
  }, "x"_a.none(), "what"_a, "which"_a);
  m.def("set_python_rules", [](nb::dict codes, nb::object dtype_code, nb::object engine_name, nb::type_object device) {
    g_rules = new PythonRules{std::move(codes), std::move(dtype_code), std::move(engine_name), std::move(device)};
  }, "codes"_a, "dtype_code"_a, "engine_name"_a, "device_array"_a);

  // A framework's host tensor type (torch.Tensor), read by submit through its data_ptr(), shape and dtype
  // (`codes`: each of its dtypes' engine code; `dtype_code` for the others, which raises), as it reads numpy
  // arrays through the buffer protocol.
  m.def("add_host_tensor_type", [](nb::type_object type, nb::dict codes, nb::object dtype_code) {
    g_tensor_types->push_back(HostTensorType{std::move(type), std::move(codes), std::move(dtype_code)});
  }, "type"_a, "codes"_a, "dtype_code"_a);

  // One operation on each array of `arrays` (host arrays, or device tensors: all one or all the other), queued
  // together under `names` (None: numbered); `outputs` holds where each result goes (None: the engine
  // allocates it). `what` names the call in errors. Takes the names first (a bad name fails the call there),
  // then checks the scale factors, the dtypes, the reduction and the arrays, and the engine its own; a call
  // those refuse tells the set's other members (refuse_entries), so that theirs fail too, and keeps the
  // numbering of unnamed ops in step with theirs. `waits`: the caller waits for the group at once (a blocking call; see Engine::enqueue).
  m.def("submit", [](int op, const std::string& what, nb::list arrays, nb::list outputs, nb::list names, int set_id,
                     int reduce, int root_rank, nb::handle prescale_arg, nb::handle postscale_arg,
                     std::vector<int64_t> splits, bool waits) {
    if (!g_rules) throw std::runtime_error("submit: set_python_rules was not called");
    const PythonRules& r = *g_rules;
    const size_t n = arrays.size();
    if (outputs.size() != n || names.size() != n)
      throw nb::value_error("submit: arrays, outputs and names differ in length");
    std::vector<std::string> named(n);
    for (size_t i = 0; i < n; ++i) named[i] = engine_name(r, names[i], what, set_id);
    hvd::OpSpec spec = op_spec(op, reduce, set_id, root_rank, 1.0, 1.0);
    try {
      spec.prescale = scale_factor(prescale_arg, what, "prescale_factor");
      spec.postscale = scale_factor(postscale_arg, what, "postscale_factor");
      return checked_submit(r, spec, what, arrays, outputs, named, splits, waits);
    } catch (nb::python_error& e) {
      refuse_entries(spec, named, nb::cast<std::string>(nb::str(e.value())));
      throw;
    } catch (const std::exception& e) {
      refuse_entries(spec, named, e.what());
      throw;
    }
  }, "op"_a, "what"_a, "arrays"_a, "outputs"_a, "names"_a, "set_id"_a, "reduce"_a, "root_rank"_a, "prescale"_a.none(),
     "postscale"_a.none(), "splits"_a, "waits"_a = false);

  // A grouped op's call with no tensors, under the name its first tensor would have had (None: numbered, as
  // submit numbers it): a barrier that meets the set's other calls of the group, so that where another
  // member's group has tensors, every member's call fails saying so (Request::group_size), and where all are
  // empty, each returns once all have called.
  m.def("submit_empty_group", [](const std::string& what, nb::handle name, int set_id, bool waits) {
    if (!g_rules) throw std::runtime_error("submit_empty_group: set_python_rules was not called");
    std::vector<hvd::TensorEntry> call(1);
    hvd::Request& q = call[0].request;
    q.spec.op = hvd::OpType::Barrier;
    q.spec.dtype = hvd::DataType::UInt8;
    q.spec.process_set = set_id;
    q.shape = {0};
    q.name = engine_name(*g_rules, name, what, set_id);
    q.group_size = 0;
    return enqueue_entries(std::move(call), waits);
  }, "what"_a, "name"_a.none(), "set_id"_a, "waits"_a = false);

  // A call of `op` under `names` (None: numbered, as submit numbers them) that failed this rank's checks
  // before submit: the set's other members are told `why` (see submit).
  m.def("refuse", [](int op, const std::string& what, nb::list names, int set_id, const std::string& why) {
    std::vector<std::string> named(names.size());
    for (size_t i = 0; i < named.size(); ++i) named[i] = engine_name(*g_rules, names[i], what, set_id);
    refuse_entries(op_spec(op, static_cast<int>(hvd::ReduceOp::Sum), set_id, -1, 1.0, 1.0), named, why);
  }, "op"_a, "what"_a, "names"_a, "set_id"_a, "why"_a);
}

}  // namespace jhvd
