// The codes that cross tiers (op, reduce op, dtype, status, timeline phase) are each defined by one
// list macro, X(Enumerator, "name") per value, next to their enum. The enum, its names and its count
// come from that list, and the Python binding (csrc/contracts.cc) reads EnumNames, so adding a value
// means adding one line to its list. Values travel between ranks by code: append, never reorder.
#pragma once

#include <cstddef>
#include <iterator>

#define HVD_ENUM_VALUE(value, name) value,
#define HVD_ENUM_NAME(value, name) name,

namespace hvd {

// Specialised next to each listed enum: `names[i]` is the name of the value with code i.
template <typename E>
struct EnumNames;

template <typename E>
constexpr size_t enum_count() {
  return std::size(EnumNames<E>::names);
}

// Whether `e` holds one of its list's values (a decoded or caller-given code may not).
template <typename E>
constexpr bool enum_valid(E e) {
  return static_cast<size_t>(e) < enum_count<E>();
}

template <typename E>
const char* enum_name(E e) {
  return enum_valid(e) ? EnumNames<E>::names[static_cast<size_t>(e)] : "unknown";
}

}  // namespace hvd
