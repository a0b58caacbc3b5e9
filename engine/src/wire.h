// Byte-level encoding of the messages engine threads exchange: requests, responses, stop notices and
// timeline batches. Decoders trust nothing: a message that is truncated, too long, or holds an
// out-of-range value throws WireError before anything is allocated from it.
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "status.h"
#include "timeline.h"
#include "types.h"

namespace hvd {

struct WireError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  Writer() { buf_.reserve(256); }  // a small message's size: no regrowth as it is written
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t n = buf_.size();
    buf_.resize(n + sizeof(T));
    std::memcpy(buf_.data() + n, &v, sizeof(T));
  }
  void put_string(const std::string& s);
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put_count(v.size());
    size_t n = buf_.size(), bytes = v.size() * sizeof(T);
    buf_.resize(n + bytes);
    if (bytes) std::memcpy(buf_.data() + n, v.data(), bytes);
  }
  // A length prefix; throws WireError past 2^32 - 1.
  void put_count(size_t n);
  std::vector<char>& bytes() { return buf_; }

 private:
  std::vector<char> buf_;
};

class Reader {
 public:
  Reader(const char* data, size_t size) : p_(data), end_(data + size) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  // An enum stored as its underlying type, checked to be at most `last`.
  template <typename E>
  E get_enum(E last, const char* what) {
    auto raw = get<std::underlying_type_t<E>>();
    if (raw > static_cast<std::underlying_type_t<E>>(last)) fail(std::string("bad ") + what);
    return static_cast<E>(raw);
  }
  std::string get_string();
  // A length prefix for items that take at least `min_item_bytes` each: checked against the bytes left.
  size_t get_count(size_t min_item_bytes);
  template <typename T>
  std::vector<T> get_vector() {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> v(get_count(sizeof(T)));
    const size_t bytes = v.size() * sizeof(T);
    if (bytes) std::memcpy(v.data(), p_, bytes);  // get_count checked that they are there
    p_ += bytes;
    return v;
  }
  // Throws unless every byte was read.
  void finish() const;
  [[noreturn]] static void fail(const std::string& why);

 private:
  void need(size_t n) const {
    if (static_cast<size_t>(end_ - p_) < n) fail("truncated");
  }
  const char* p_;
  const char* end_;
};

// A repeat of a request the response cache knows, by its id, with its carried input (Request::data);
// `after`: how many of its batch's full requests the rank submitted before it.
struct CachedRequest {
  int32_t id = -1;
  uint32_t after = 0;
  std::vector<char> data;
  bool operator==(const CachedRequest& o) const { return id == o.id && after == o.after && data == o.data; }
};

// A rank's batch for the coordinator: full requests for new names, cache ids for repeats; the coordinator
// takes them in the order the rank submitted them (CachedRequest::after), so that an op a rank submitted
// first is never ready after one it submitted later (a barrier before the allreduces that came before it).
struct RequestBatch {
  std::vector<Request> requests;
  std::vector<CachedRequest> cached;
};

// A stop notice: a rank aborts or shuts down (`final`: rank 0's last word, after its last response).
struct StopNotice {
  bool final = false;
  Status status;
};

void encode(Writer& w, const Request& r);
Request decode_request(Reader& r);
void encode(Writer& w, const Response& r);
Response decode_response(Reader& r);

std::vector<char> encode_batch(const RequestBatch& b);
RequestBatch decode_batch(const char* data, size_t size);
// The responses `which` indexes in `rs`, in that order: one rank's list, written from rank 0's whole one.
std::vector<char> encode_responses(const std::vector<Response>& rs, const std::vector<size_t>& which);
std::vector<Response> decode_responses(const char* data, size_t size);
std::vector<char> encode_stop(const StopNotice& n);
StopNotice decode_stop(const char* data, size_t size);
std::vector<char> encode_events(const std::vector<Event>& es);
std::vector<Event> decode_events(const char* data, size_t size);

}  // namespace hvd
