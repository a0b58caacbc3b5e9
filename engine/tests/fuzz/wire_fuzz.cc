// Every wire decoder against malformed messages: each truncation of valid ones, valid ones with bytes
// appended, length fields overwritten with huge values, and seeded random bytes. A decoder must turn
// each into a message or an exception, never read outside it (make test-asan runs this under
// AddressSanitizer), throw only WireError (a std::runtime_error), allocate no more than the message's
// size could describe, and return only enum values in range.
//
// It is a program of its own, not part of engine_tests, because it replaces the global operator new
// (to measure and cap allocations).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "wire.h"

namespace {

// The largest allocation since the last reset, and a cap on any one allocation: a decoder that sizes a
// vector from an unchecked count must not take the machine's memory.
size_t g_largest = 0;
constexpr size_t kRefuseAbove = size_t{16} << 20;

void* allocate(size_t n) {
  if (n > g_largest) g_largest = n;
  if (n > kRefuseAbove) throw std::bad_alloc();
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(size_t n) { return allocate(n); }
void* operator new[](size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace {

using namespace hvd;
using Bytes = std::vector<char>;

int g_failures = 0;

void fail(const std::string& decoder, const std::string& what, const Bytes& input) {
  if (++g_failures <= 20) {
    std::string hex;
    char b[4];
    for (size_t i = 0; i < input.size() && i < 64; ++i) {
      std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(input[i]));
      hex += b;
    }
    std::printf("  %s: %s (%zu bytes: %s%s)\n", decoder.c_str(), what.c_str(), input.size(), hex.c_str(),
                input.size() > 64 ? "..." : "");
  }
}

// Decodes `input`, checks what it gave: true if it was accepted.
using Decoder = std::function<bool(const Bytes&)>;  // false: enum values out of range

enum class Outcome { Accepted, Rejected };

Outcome run(const std::string& name, const Decoder& decode, const Bytes& input) {
  g_largest = 0;
  // At most what a message of this size could describe: each decoded element takes at most a few
  // times its bytes on the wire.
  const size_t bound = 16 * input.size() + 4096;
  Outcome out = Outcome::Rejected;
  try {
    if (!decode(input)) fail(name, "decoded an enum value out of range", input);
    out = Outcome::Accepted;
  } catch (const WireError&) {
  } catch (const std::exception& e) {
    fail(name, std::string("threw ") + e.what() + ", not a WireError", input);
  }
  if (g_largest > bound)
    fail(name, "allocated " + std::to_string(g_largest) + " bytes for a message of " +
                   std::to_string(input.size()), input);
  return out;
}

template <typename E>
bool in_range(E v, E last) {
  return static_cast<unsigned>(v) <= static_cast<unsigned>(last);
}

// Each listed enum's range is its list's (enum_list.h), so a value appended to a list needs no change here.
bool spec_ok(const OpSpec& s) {
  return enum_valid(s.op) && enum_valid(s.reduce) && enum_valid(s.dtype) && in_range(s.memory, Memory::Cuda);
}

Request request(int rank, const std::string& name, std::vector<int64_t> shape, OpType op) {
  Request r;
  r.rank = rank;
  r.name = name;
  r.shape = std::move(shape);
  r.spec.op = op;
  r.spec.dtype = DataType::BFloat16;
  r.spec.process_set = 3;
  r.spec.prescale = 0.5;
  return r;
}

struct Case {
  std::string name;
  Decoder decode;
  std::vector<Bytes> valid;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  {
    RequestBatch empty, full;
    full.requests = {request(1, "layer.0/weight", {7, 3}, OpType::Allreduce), request(2, "ü層", {}, OpType::Barrier),
                     request(3, "", {0, 5, 1}, OpType::Alltoall)};
    full.requests[0].data.assign(84, 'd');
    full.requests[2].refusal = "alltoall: splits [1] must be 2 counts";
    full.cached = {{4, 0, {}}, {9, 2, {'a', 'b', 'c', 'd'}}, {-1, 3, {}}};
    RequestBatch cached_only;
    cached_only.cached = {{0, 0, {}}};
    out.push_back({"decode_batch",
                   [](const Bytes& b) {
                     RequestBatch d = decode_batch(b.data(), b.size());
                     for (const auto& r : d.requests)
                       if (!spec_ok(r.spec)) return false;
                     return true;
                   },
                   {encode_batch(empty), encode_batch(full), encode_batch(cached_only)}});
  }
  {
    Response a, b, c;
    a.names = {"a", "bb", "ü層"};
    a.cache_ids = {1, -1, 7};
    a.spec.op = OpType::Allgather;
    a.rows = {3, 0, 5};
    a.carried.assign(12, 'c');
    b.kind = Response::Kind::Error;
    b.names = {"x"};
    b.cache_ids = {-1};
    b.error = "mismatched shapes: [2] on rank 0, [3] on rank 1";
    c = b;
    c.kind = Response::Kind::Refused;
    c.error = "rank 1 could not start it: allreduce: unsupported dtype object";
    out.push_back({"decode_responses",
                   [](const Bytes& bytes) {
                     for (const auto& r : decode_responses(bytes.data(), bytes.size()))
                       if (!spec_ok(r.spec) || !in_range(r.kind, Response::Kind::Refused)) return false;
                     return true;
                   },
                   {encode_responses({}, {}), encode_responses({a}, {0}), encode_responses({a, b, c, a}, {0, 1, 2, 3})}});
  }
  {
    out.push_back({"decode_stop",
                   [](const Bytes& b) {
                     StopNotice n = decode_stop(b.data(), b.size());
                     return enum_valid(n.status.code);
                   },
                   {encode_stop({true, Status::Error(Status::Code::Aborted, "rank 2 raised ValueError", 2)}),
                    encode_stop({false, Status::Error(Status::Code::Shutdown, "", 0)})}});
  }
  {
    Event e;
    e.rank = 3;
    e.phase = Phase::MemcpyOut;
    e.name = "layer.0/weight (+3 fused)";
    e.op = "allreduce";
    e.start_us = 123456789;
    e.dur_us = 17;
    e.bytes = 4096;
    Event mark = e;
    mark.phase = Phase::WaitForData;
    mark.name = "";
    out.push_back({"decode_events",
                   [](const Bytes& b) {
                     for (const auto& ev : decode_events(b.data(), b.size()))
                       if (!in_range(ev.phase, Phase::WaitForData)) return false;
                     return true;
                   },
                   {encode_events({}), encode_events({e}), encode_events({e, mark, e})}});
  }
  return out;
}

void put_u32(Bytes& b, size_t at, uint32_t v) {
  for (int k = 0; k < 4 && at + k < b.size(); ++k) b[at + k] = static_cast<char>((v >> (8 * k)) & 0xff);
}

}  // namespace

int main() {
  std::mt19937_64 rng(20251124);
  long decoded = 0;
  for (const Case& c : cases()) {
    const int before = g_failures;
    for (const Bytes& m : c.valid) {
      if (run(c.name, c.decode, m) != Outcome::Accepted) fail(c.name, "rejected a valid message", m);
      ++decoded;
      for (size_t len = 0; len < m.size(); ++len) {  // every truncation
        Bytes cut(m.begin(), m.begin() + static_cast<long>(len));
        if (run(c.name, c.decode, cut) != Outcome::Rejected) fail(c.name, "accepted a truncated message", cut);
        ++decoded;
      }
      for (size_t extra = 1; extra <= 16; ++extra) {  // bytes after the end
        Bytes longer = m;
        longer.resize(m.size() + extra, static_cast<char>(extra));
        if (run(c.name, c.decode, longer) != Outcome::Rejected)
          fail(c.name, "accepted a message with bytes after its end", longer);
        ++decoded;
      }
      // Huge or off-by-one values over every 4 bytes (where counts and lengths live among other fields).
      for (size_t at = 0; at + 1 < m.size(); ++at) {
        for (uint32_t v : {0xffffffffu, 0x80000000u, 0x7fffffffu, 0x10000000u,
                           static_cast<uint32_t>(m.size() - at), static_cast<uint32_t>(m.size())}) {
          Bytes b = m;
          put_u32(b, at, v);
          run(c.name, c.decode, b);
          ++decoded;
        }
      }
      for (int i = 0; i < 2000; ++i) {  // random single-byte changes
        Bytes b = m;
        b[rng() % b.size()] = static_cast<char>(rng());
        run(c.name, c.decode, b);
        ++decoded;
      }
    }
    for (int i = 0; i < 20000; ++i) {  // random bytes, mostly short
      Bytes b(rng() % (i % 10 == 0 ? 4096 : 64));
      for (auto& x : b) x = static_cast<char>(rng());
      run(c.name, c.decode, b);
      ++decoded;
    }
    std::printf("%s %s\n", g_failures == before ? "PASS" : "FAIL", c.name.c_str());
  }
  std::printf("%ld messages decoded; %d failures\n", decoded, g_failures);
  return g_failures ? 1 : 0;
}
