#include "types.h"

namespace hvd {

size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::UInt8: case DataType::Int8: case DataType::Bool: return 1;
    case DataType::Float16: case DataType::BFloat16: case DataType::Int16: case DataType::UInt16: return 2;
    case DataType::Int32: case DataType::Float32: return 4;
    case DataType::Int64: case DataType::Float64: return 8;
  }
  return 0;
}

const char* dtype_name(DataType t) { return enum_name(t); }

const char* op_name(OpType t) { return enum_name(t); }

const char* reduce_name(ReduceOp t) { return enum_name(t); }

bool is_float(DataType t) {
  return t == DataType::Float16 || t == DataType::BFloat16 || t == DataType::Float32 ||
         t == DataType::Float64;
}

bool OpSpec::valid() const {
  return enum_valid(op) && enum_valid(reduce) && reduce != ReduceOp::Adasum && enum_valid(dtype) &&
         memory <= Memory::Cuda;
}

std::string describe_key(const TensorKey& k) {
  std::string s = "'" + k.name + "'";
  return k.process_set == 0 ? s : s + " in process set " + std::to_string(k.process_set);
}

int64_t Request::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
}  // namespace hvd
