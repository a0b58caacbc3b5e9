// Core value types shared by every part of the engine: ops, dtypes, requests, responses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "enum_list.h"

namespace hvd {

// The lists of the codes Python and the wire share (see enum_list.h); a name is what users and messages see.
#define HVD_OP_TYPES(X)                                                                            \
  X(Allreduce, "allreduce") X(Allgather, "allgather") X(Broadcast, "broadcast") X(Alltoall, "alltoall") \
  X(Reducescatter, "reducescatter") X(Barrier, "barrier") X(Join, "join")
// Named and numbered as Horovod's Python constants (hvd.Average == 0, ...; its common/message.h), which are these
// codes, so that a code a script kept from Horovod means the same op. Adasum holds Horovod's number only: the
// engine has no Adasum, and refuses it (OpSpec::valid, and the extension before that).
#define HVD_REDUCE_OPS(X) \
  X(Average, "Average") X(Sum, "Sum") X(Adasum, "Adasum") X(Min, "Min") X(Max, "Max") X(Product, "Product")
// Named as numpy names the dtypes.
#define HVD_DATA_TYPES(X)                                                                                \
  X(UInt8, "uint8") X(Int8, "int8") X(Int32, "int32") X(Int64, "int64") X(Float16, "float16")          \
  X(BFloat16, "bfloat16") X(Float32, "float32") X(Float64, "float64") X(Bool, "bool") X(Int16, "int16")   \
  X(UInt16, "uint16")

enum class OpType : uint8_t { HVD_OP_TYPES(HVD_ENUM_VALUE) };
enum class ReduceOp : uint8_t { HVD_REDUCE_OPS(HVD_ENUM_VALUE) };
enum class DataType : uint8_t { HVD_DATA_TYPES(HVD_ENUM_VALUE) };
template <>
struct EnumNames<OpType> {
  static constexpr const char* names[] = {HVD_OP_TYPES(HVD_ENUM_NAME)};
};
template <>
struct EnumNames<ReduceOp> {
  static constexpr const char* names[] = {HVD_REDUCE_OPS(HVD_ENUM_NAME)};
};
template <>
struct EnumNames<DataType> {
  static constexpr const char* names[] = {HVD_DATA_TYPES(HVD_ENUM_NAME)};
};
// Where a tensor lives: ranks must agree, and GPU tensors fuse only with GPU tensors.
enum class Memory : uint8_t { Host, Cuda };

size_t dtype_size(DataType t);
const char* dtype_name(DataType t);
const char* op_name(OpType t);
const char* reduce_name(ReduceOp t);
bool is_float(DataType t);

// What an operation does, apart from its tensor; requests and responses share it.
struct OpSpec {
  OpType op = OpType::Allreduce;
  ReduceOp reduce = ReduceOp::Sum;
  DataType dtype = DataType::Float32;
  Memory memory = Memory::Host;  // fills padding: the encoded size is unchanged
  int32_t process_set = 0;
  int32_t root_rank = -1;
  double prescale = 1.0;
  double postscale = 1.0;

  bool operator==(const OpSpec& o) const {
    return op == o.op && reduce == o.reduce && dtype == o.dtype && memory == o.memory &&
           process_set == o.process_set && root_rank == o.root_rank && same_scaling(o);
  }
  // Scale factors compare bit for bit, so a NaN factor matches itself.
  bool same_scaling(const OpSpec& o) const {
    return std::memcmp(&prescale, &o.prescale, sizeof prescale) == 0 &&
           std::memcmp(&postscale, &o.postscale, sizeof postscale) == 0;
  }
  // Whether every enum field holds one of its values (a decoded or caller-given spec may not).
  bool valid() const;
};

// A tensor's identity. Names are scoped by process set, as in Horovod: the same name may be in
// flight in two sets at once (each rank's "loss" in its own set).
struct TensorKey {
  int32_t process_set = 0;
  std::string name;

  bool operator==(const TensorKey& o) const { return process_set == o.process_set && name == o.name; }
};

struct TensorKeyHash {
  size_t operator()(const TensorKey& k) const {
    return std::hash<std::string>()(k.name) ^ (static_cast<size_t>(k.process_set) * 0x9e3779b97f4a7c15ULL);
  }
};

// "'grad' in process set 2", or "'grad'" in the global set: a tensor as messages name it.
std::string describe_key(const TensorKey& k);

// What one rank asks for under one tensor name. Everything but `rank` must agree across ranks
// (shape only in the dimensions the op requires).
struct Request {
  int32_t rank = 0;
  OpSpec spec;
  std::vector<int64_t> shape;
  std::string name;
  // A small host allreduce's input, carried to rank 0 with the request (Config::carry_bytes); else empty.
  // Not part of the signature.
  std::vector<char> data;
  // Set when this rank's call failed its own checks (Engine::refuse): why, for the other members, whose
  // operation of this name then fails saying so. Not part of the signature: such a request is never cached.
  std::string refusal;
  // The call it came in (Engine::enqueue's group: a grouped op's tensors, or one alone): how many tensors the
  // call had, and the first one's name, empty when it is this one alone. Members must agree on both: where they
  // differ, the call fails as a whole on every member (Response::whole_group), so no member waits for a tensor
  // another never sends. Part of the signature.
  int32_t group_size = 1;
  std::string group;

  // The name its call goes by: its first tensor's.
  const std::string& group_key() const { return group.empty() ? name : group; }
  int64_t num_elements() const;
  int64_t num_bytes() const { return num_elements() * static_cast<int64_t>(dtype_size(spec.dtype)); }
  TensorKey key() const { return {spec.process_set, name}; }
  // True when two requests describe the same work (rank aside): the response-cache key.
  bool same_signature(const Request& o) const {
    return spec == o.spec && shape == o.shape && name == o.name && same_group(o);
  }
  bool same_group(const Request& o) const { return group_size == o.group_size && group_key() == o.group_key(); }
};

// What the coordinator tells the members of a process set to do, in a global order.
struct Response {
  // Refused: an Error because a member's own call failed its checks (Request::refusal).
  enum class Kind : uint8_t { Execute, Error, Refused };
  Kind kind = Kind::Execute;
  OpSpec spec;
  std::vector<std::string> names;   // several when fused, in buffer order
  std::vector<int32_t> cache_ids;   // parallel to names; -1 when not cached
  std::vector<int64_t> rows;        // allgather: each member's first dimension, in rank order
  // A carried allreduce: for each tensor in turn, every member's input in rank order, which each member
  // reduces itself in that order, so all get the same result with no collective. Empty otherwise.
  std::vector<char> carried;
  // While members of the set have joined (OpType::Join), they stand in for the tensors they never submitted
  // (allreduces and barriers only): each tensor's element count, parallel to names. Empty otherwise.
  std::vector<int64_t> stand_in_counts;
  std::string error;                // Kind::Error and Kind::Refused only
  // An error because the members' calls differ (Request::same_group): each member fails its whole call, and
  // rank 0 drops the members' requests for the call's other tensors.
  bool whole_group = false;
};

}  // namespace hvd
