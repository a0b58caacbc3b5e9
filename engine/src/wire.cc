#include "wire.h"

#include <cstdint>
#include <limits>

namespace hvd {
namespace {

// The fewest bytes each item can take, for checking a count against the bytes left.
constexpr size_t kMinString = sizeof(uint32_t);
constexpr size_t kMinRequest = 2 * sizeof(int32_t) + sizeof(OpSpec) + 5 * sizeof(uint32_t);
constexpr size_t kMinCached = sizeof(int32_t) + 2 * sizeof(uint32_t);
constexpr size_t kMinResponse = sizeof(Response::Kind) + sizeof(OpSpec) + 6 * sizeof(uint32_t) + sizeof(uint8_t);
constexpr size_t kMinEvent = sizeof(int32_t) + sizeof(Phase) + 2 * kMinString + 3 * sizeof(int64_t);

OpSpec get_spec(Reader& rd) {
  auto spec = rd.get<OpSpec>();
  if (!spec.valid()) Reader::fail("bad operation spec");
  return spec;
}

// Dimensions must be non-negative and the tensor's byte size must fit in int64.
void check_shape(const Request& r) {
  int64_t limit = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(r.spec.dtype));
  int64_t n = 1;
  for (int64_t d : r.shape) {
    if (d < 0 || (d > 0 && n > limit / d)) Reader::fail("bad shape");
    n *= d;
  }
}

}  // namespace

void Writer::put_count(size_t n) {
  if (n > std::numeric_limits<uint32_t>::max()) throw WireError("engine message: too many items to encode");
  put<uint32_t>(static_cast<uint32_t>(n));
}

void Writer::put_string(const std::string& s) {
  put_count(s.size());
  buf_.insert(buf_.end(), s.begin(), s.end());
}

void Reader::fail(const std::string& why) { throw WireError("malformed engine message: " + why); }

std::string Reader::get_string() {
  size_t n = get_count(1);
  std::string s(p_, n);
  p_ += n;
  return s;
}

size_t Reader::get_count(size_t min_item_bytes) {
  size_t n = get<uint32_t>();
  if (min_item_bytes && n > static_cast<size_t>(end_ - p_) / min_item_bytes) fail("count past the end");
  return n;
}

void Reader::finish() const {
  if (p_ != end_) fail("trailing bytes");
}

void encode(Writer& w, const Request& r) {
  w.put(r.rank);
  w.put(r.spec);
  w.put_vector(r.shape);
  w.put_string(r.name);
  w.put_vector(r.data);
  w.put_string(r.refusal);
  w.put(r.group_size);
  w.put_string(r.group);
}

Request decode_request(Reader& rd) {
  Request r;
  r.rank = rd.get<int32_t>();
  r.spec = get_spec(rd);
  r.shape = rd.get_vector<int64_t>();
  r.name = rd.get_string();
  check_shape(r);
  r.data = rd.get_vector<char>();
  r.refusal = rd.get_string();
  r.group_size = rd.get<int32_t>();
  if (r.group_size < 0) Reader::fail("bad group size");
  r.group = rd.get_string();
  return r;
}

void encode(Writer& w, const Response& r) {
  w.put(r.kind);
  w.put(r.spec);
  w.put_count(r.names.size());
  for (const auto& n : r.names) w.put_string(n);
  w.put_vector(r.cache_ids);
  w.put_vector(r.rows);
  w.put_string(r.error);
  w.put_vector(r.carried);
  w.put_vector(r.stand_in_counts);
  w.put<uint8_t>(r.whole_group);
}

Response decode_response(Reader& rd) {
  Response r;
  r.kind = rd.get_enum(Response::Kind::Refused, "response kind");
  r.spec = get_spec(rd);
  r.names.resize(rd.get_count(kMinString));
  for (auto& s : r.names) s = rd.get_string();
  r.cache_ids = rd.get_vector<int32_t>();
  r.rows = rd.get_vector<int64_t>();
  r.error = rd.get_string();
  r.carried = rd.get_vector<char>();
  r.stand_in_counts = rd.get_vector<int64_t>();
  const auto whole_group = rd.get<uint8_t>();
  if (whole_group > 1) Reader::fail("bad response flag");
  r.whole_group = whole_group;
  if (r.names.empty() || r.cache_ids.size() != r.names.size() ||
      (!r.stand_in_counts.empty() && r.stand_in_counts.size() != r.names.size()))
    Reader::fail("bad response");
  return r;
}

std::vector<char> encode_batch(const RequestBatch& b) {
  Writer w;
  w.put_count(b.requests.size());
  for (const auto& r : b.requests) encode(w, r);
  w.put_count(b.cached.size());
  for (const auto& c : b.cached) {
    w.put(c.id);
    w.put(c.after);
    w.put_vector(c.data);
  }
  return std::move(w.bytes());
}

RequestBatch decode_batch(const char* data, size_t size) {
  Reader rd(data, size);
  RequestBatch b;
  b.requests.resize(rd.get_count(kMinRequest));
  for (auto& r : b.requests) r = decode_request(rd);
  b.cached.resize(rd.get_count(kMinCached));
  uint32_t after = 0;
  for (auto& c : b.cached) {
    c.id = rd.get<int32_t>();
    c.after = rd.get<uint32_t>();
    if (c.after < after || c.after > b.requests.size()) Reader::fail("cached requests out of order");
    after = c.after;
    c.data = rd.get_vector<char>();
  }
  rd.finish();
  return b;
}

std::vector<char> encode_responses(const std::vector<Response>& rs, const std::vector<size_t>& which) {
  Writer w;
  w.put_count(which.size());
  for (size_t i : which) encode(w, rs[i]);
  return std::move(w.bytes());
}

std::vector<Response> decode_responses(const char* data, size_t size) {
  Reader rd(data, size);
  std::vector<Response> rs(rd.get_count(kMinResponse));
  for (auto& r : rs) r = decode_response(rd);
  rd.finish();
  return rs;
}

std::vector<char> encode_stop(const StopNotice& n) {
  Writer w;
  w.put<uint8_t>(n.final);
  w.put<uint8_t>(static_cast<uint8_t>(n.status.code));
  w.put<int32_t>(n.status.origin_rank);
  w.put_string(n.status.message);
  return std::move(w.bytes());
}

StopNotice decode_stop(const char* data, size_t size) {
  Reader rd(data, size);
  StopNotice n;
  uint8_t final = rd.get<uint8_t>();
  if (final > 1) Reader::fail("bad stop flag");
  n.final = final;
  uint8_t code = rd.get<uint8_t>();
  if (code == 0 || code >= enum_count<Status::Code>()) Reader::fail("bad stop status");
  n.status.code = static_cast<Status::Code>(code);
  n.status.origin_rank = rd.get<int32_t>();
  n.status.message = rd.get_string();
  rd.finish();
  return n;
}

std::vector<char> encode_events(const std::vector<Event>& es) {
  Writer w;
  w.put_count(es.size());
  for (const auto& e : es) {
    w.put(e.rank);
    w.put(e.phase);
    w.put_string(e.name);
    w.put_string(e.op);
    w.put(e.start_us);
    w.put(e.dur_us);
    w.put(e.bytes);
  }
  return std::move(w.bytes());
}

std::vector<Event> decode_events(const char* data, size_t size) {
  Reader rd(data, size);
  std::vector<Event> es(rd.get_count(kMinEvent));
  for (auto& e : es) {
    e.rank = rd.get<int32_t>();
    e.phase = rd.get_enum(static_cast<Phase>(enum_count<Phase>() - 1), "timeline phase");
    e.name = rd.get_string();
    e.op = rd.get_string();
    e.start_us = rd.get<int64_t>();
    e.dur_us = rd.get<int64_t>();
    e.bytes = rd.get<int64_t>();
  }
  rd.finish();
  return es;
}

}  // namespace hvd
