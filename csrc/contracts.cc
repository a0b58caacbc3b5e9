// The engine's cross-tier contracts as Python sees them: each code list (enum_list.h) as a Python IntEnum,
// from which jupyter_hvd derives hvd.Sum and the rest, its dtype codes, its exception per status and the
// timeline's phase names; OpSpec, what an operation does apart from its tensors, as every enqueue takes
// it, and which reductions each dtype can do; and the settings table, from which hvdrun builds its flags.
#include "contracts.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "registry.h"
#include "settings.h"
#include "status.h"
#include "timeline.h"
#include "types.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace jhvd {
namespace {

template <typename E>
void bind_enum(nb::module_& m, const char* name) {
  nb::enum_<E> e(m, name, nb::is_arithmetic());
  for (size_t i = 0; i < hvd::enum_count<E>(); ++i) e.value(hvd::EnumNames<E>::names[i], static_cast<E>(i));
}

// A code Python passed, as a value of E; hvd::InvalidArgument (a ValueError) when it is not one.
template <typename E>
E code_of(int code, const char* what) {
  if (code < 0 || static_cast<size_t>(code) >= hvd::enum_count<E>())
    throw hvd::InvalidArgument(std::string(what) + " " + std::to_string(code) + " is not one the engine knows");
  return static_cast<E>(code);
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

nb::dict setting_dict(const hvd::Setting& s) {
  nb::dict d;
  d["name"] = s.name;
  d["kind"] = hvd::enum_name(s.kind);
  d["default"] = s.default_value();
  d["min"] = s.min;
  d["max"] = s.max;
  d["choices"] = s.choices;
  d["accepts"] = s.accepts();
  d["help"] = s.help;
  return d;
}

const hvd::Setting& find_setting(const std::string& name) {
  for (const auto& s : hvd::settings())
    if (name == s.name) return s;
  throw nb::key_error(("no engine setting is named " + name).c_str());
}

}  // namespace

hvd::DataType data_type(int code) { return code_of<hvd::DataType>(code, "dtype code"); }

// A reduce op Python passed: Adasum keeps Horovod's number among the codes, but the engine has none.
static hvd::ReduceOp reduce_op(int code) {
  const auto op = code_of<hvd::ReduceOp>(code, "reduce op");
  if (op == hvd::ReduceOp::Adasum)
    throw hvd::InvalidArgument("reduce op " + std::to_string(code) + " (Adasum) is not one the engine has");
  return op;
}

hvd::OpSpec op_spec(int op, int reduce, int process_set, int root_rank, double prescale, double postscale) {
  hvd::OpSpec s;
  s.op = code_of<hvd::OpType>(op, "op");
  s.reduce = reduce_op(reduce);
  s.process_set = process_set;
  s.root_rank = root_rank;
  s.prescale = prescale;
  s.postscale = postscale;
  return s;
}

void check_reduce(const std::vector<int>& codes, hvd::ReduceOp op, double prescale, double postscale,
                  const std::string& what, bool on_device) {
  const bool any_bool = std::count(codes.begin(), codes.end(), static_cast<int>(hvd::DataType::Bool)) > 0;
  auto refuse = [&](const char* why) { throw nb::type_error((what + ": " + why).c_str()); };
  if (op == hvd::ReduceOp::Average && any_bool) refuse("Average is not defined for bool tensors");
  auto int16 = [](int c) { return data_type(c) == hvd::DataType::Int16 || data_type(c) == hvd::DataType::UInt16; };
  if (on_device && std::any_of(codes.begin(), codes.end(), int16))
    refuse("int16 and uint16 GPU tensors cannot be reduced (NCCL has no 16-bit integer type); reduce them as "
           "int32, or on the host");
  if (prescale == 1.0 && postscale == 1.0) return;
  if (any_bool) refuse("prescale_factor/postscale_factor cannot scale bool tensors");
  if (on_device && std::any_of(codes.begin(), codes.end(), [](int c) { return !hvd::is_float(data_type(c)); }))
    refuse("prescale_factor/postscale_factor on GPU tensors need a floating-point dtype");
}

void bind_contracts(nb::module_& m) {
  bind_enum<hvd::OpType>(m, "OpType");
  bind_enum<hvd::ReduceOp>(m, "ReduceOp");
  bind_enum<hvd::DataType>(m, "DataType");
  bind_enum<hvd::Status::Code>(m, "StatusCode");
  bind_enum<hvd::Phase>(m, "Phase");
  m.def("check_reduce", [](const std::vector<int>& codes, int op, double prescale, double postscale,
                           const std::string& what, bool on_device) {
    check_reduce(codes, reduce_op(op), prescale, postscale, what, on_device);
  }, "codes"_a, "op"_a, "prescale"_a, "postscale"_a, "what"_a, "on_device"_a);

  // Codes in, as Python holds them (plain ints, as Horovod's constants are); the dtype and memory are
  // each tensor's, set by the enqueue call.
  nb::class_<hvd::OpSpec>(m, "OpSpec")
      .def("__init__", [](hvd::OpSpec* self, int op, int reduce, int process_set, int root_rank, double prescale,
                          double postscale) {
        new (self) hvd::OpSpec(op_spec(op, reduce, process_set, root_rank, prescale, postscale));
      }, "op"_a, nb::kw_only(), "reduce"_a = static_cast<int>(hvd::ReduceOp::Sum), "process_set"_a = 0,
         "root_rank"_a = -1, "prescale"_a = 1.0, "postscale"_a = 1.0)
      .def_ro("op", &hvd::OpSpec::op)
      .def_ro("reduce", &hvd::OpSpec::reduce)
      .def_ro("process_set", &hvd::OpSpec::process_set)
      .def_ro("root_rank", &hvd::OpSpec::root_rank)
      .def_ro("prescale", &hvd::OpSpec::prescale)
      .def_ro("postscale", &hvd::OpSpec::postscale)
      .def("__repr__", [](const hvd::OpSpec& s) {
        return std::string("OpSpec(") + hvd::op_name(s.op) + ", reduce=" + hvd::reduce_name(s.reduce) +
               ", process_set=" + std::to_string(s.process_set) + ", root_rank=" + std::to_string(s.root_rank) +
               ", prescale=" + number_text(s.prescale) + ", postscale=" + number_text(s.postscale) + ")";
      });

  // The settings table: name, kind, default ("" when unset), min and max (integers), choices, accepts, help.
  m.def("settings", [] {
    nb::list out;
    for (const auto& s : hvd::settings()) out.append(setting_dict(s));
    return out;
  });
  // ValueError "NAME='value': expected ..." unless the engine accepts `value` for setting `name`, as
  // hvd.init() would read it; KeyError for a name that is no setting.
  m.def("check_setting", [](const std::string& name, const std::string& value) {
    hvd::Config c;
    find_setting(name).read(c, value);
  }, "name"_a, "value"_a);
}

}  // namespace jhvd
