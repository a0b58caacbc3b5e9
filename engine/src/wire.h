// Byte-level encoding of the messages engine threads exchange: requests and responses with the
// coordinator, stop notices, timeline event batches. Every decoder throws std::runtime_error on a
// malformed message.
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

class Writer {
 public:
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
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const T& x : v) put(x);
  }
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
  std::string get_string();
  template <typename T>
  std::vector<T> get_vector() {
    auto n = get<uint32_t>();
    std::vector<T> v(n);
    for (auto& x : v) x = get<T>();
    return v;
  }
  bool done() const { return p_ == end_; }
  // A message is read whole: bytes after its last field mean it is not what the reader thinks it is.
  void expect_end() const {
    if (!done()) throw std::runtime_error("engine message has " + std::to_string(end_ - p_) + " bytes after its end");
  }

 private:
  void need(size_t n) const {
    if (static_cast<size_t>(end_ - p_) < n) throw std::runtime_error("truncated engine message");
  }
  const char* p_;
  const char* end_;
};

// A rank's batch for the coordinator: full requests for new names, cache ids for repeats.
struct RequestBatch {
  std::vector<Request> requests;
  std::vector<int32_t> cached;
};

void encode(Writer& w, const Request& r);
Request decode_request(Reader& r);
void encode(Writer& w, const Response& r);
Response decode_response(Reader& r);

std::vector<char> encode_batch(const RequestBatch& b);
RequestBatch decode_batch(const char* data, size_t size);
std::vector<char> encode_responses(const std::vector<Response>& rs);
std::vector<Response> decode_responses(const char* data, size_t size);

// An abort or shutdown notice; `final`: rank 0's last word, after every response it sent.
struct StopNotice {
  bool final = false;
  Status status;
};
std::vector<char> encode_stop(bool final, const Status& s);
StopNotice decode_stop(const char* data, size_t size);

// A batch of timeline events for rank 0's trace file.
std::vector<char> encode_events(const std::vector<Event>& es);
std::vector<Event> decode_events(const char* data, size_t size);

}  // namespace hvd
