#include "wire.h"

namespace hvd {

void Writer::put_string(const std::string& s) {
  put<uint32_t>(static_cast<uint32_t>(s.size()));
  buf_.insert(buf_.end(), s.begin(), s.end());
}

std::string Reader::get_string() {
  auto n = get<uint32_t>();
  need(n);
  std::string s(p_, n);
  p_ += n;
  return s;
}

void encode(Writer& w, const Request& r) {
  w.put(r.rank);
  w.put(r.spec);
  w.put_vector(r.shape);
  w.put_string(r.name);
}

Request decode_request(Reader& rd) {
  Request r;
  r.rank = rd.get<int32_t>();
  r.spec = rd.get<OpSpec>();
  r.shape = rd.get_vector<int64_t>();
  r.name = rd.get_string();
  return r;
}

void encode(Writer& w, const Response& r) {
  w.put(r.kind);
  w.put(r.spec);
  w.put<uint32_t>(static_cast<uint32_t>(r.names.size()));
  for (const auto& n : r.names) w.put_string(n);
  w.put_vector(r.cache_ids);
  w.put_vector(r.rows);
  w.put_string(r.error);
}

Response decode_response(Reader& rd) {
  Response r;
  r.kind = rd.get<Response::Kind>();
  r.spec = rd.get<OpSpec>();
  auto n = rd.get<uint32_t>();
  r.names.resize(n);
  for (auto& s : r.names) s = rd.get_string();
  r.cache_ids = rd.get_vector<int32_t>();
  r.rows = rd.get_vector<int64_t>();
  r.error = rd.get_string();
  return r;
}

std::vector<char> encode_batch(const RequestBatch& b) {
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(b.requests.size()));
  for (const auto& r : b.requests) encode(w, r);
  w.put_vector(b.cached);
  return std::move(w.bytes());
}

RequestBatch decode_batch(const char* data, size_t size) {
  Reader rd(data, size);
  RequestBatch b;
  auto n = rd.get<uint32_t>();
  for (uint32_t i = 0; i < n; ++i) b.requests.push_back(decode_request(rd));
  b.cached = rd.get_vector<int32_t>();
  rd.expect_end();
  return b;
}

std::vector<char> encode_responses(const std::vector<Response>& rs) {
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(rs.size()));
  for (const auto& r : rs) encode(w, r);
  return std::move(w.bytes());
}

std::vector<Response> decode_responses(const char* data, size_t size) {
  Reader rd(data, size);
  std::vector<Response> rs(rd.get<uint32_t>());
  for (auto& r : rs) r = decode_response(rd);
  rd.expect_end();
  return rs;
}

std::vector<char> encode_stop(bool final, const Status& s) {
  Writer w;
  w.put<uint8_t>(final);
  w.put<uint8_t>(static_cast<uint8_t>(s.code));
  w.put<int32_t>(s.origin_rank);
  w.put_string(s.message);
  return std::move(w.bytes());
}

StopNotice decode_stop(const char* data, size_t size) {
  Reader rd(data, size);
  StopNotice n;
  n.final = rd.get<uint8_t>();
  n.status.code = static_cast<Status::Code>(rd.get<uint8_t>());
  n.status.origin_rank = rd.get<int32_t>();
  n.status.message = rd.get_string();
  rd.expect_end();
  return n;
}

std::vector<char> encode_events(const std::vector<Event>& es) {
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(es.size()));
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
  std::vector<Event> es(rd.get<uint32_t>());
  for (auto& e : es) {
    e.rank = rd.get<int32_t>();
    e.phase = rd.get<Phase>();
    e.name = rd.get_string();
    e.op = rd.get_string();
    e.start_us = rd.get<int64_t>();
    e.dur_us = rd.get<int64_t>();
    e.bytes = rd.get<int64_t>();
  }
  rd.expect_end();
  return es;
}

}  // namespace hvd
