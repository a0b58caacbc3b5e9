#include "collectives.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "clock.h"
#include "ring.h"

namespace hvd {

Status mpi_status(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return Status::Error(Status::Code::Internal, std::string(what) + ": " + std::string(msg, len));
}

namespace {

// memcpy for tensors: a zero-size one may have no address, and memcpy must never be given a null pointer.
void copy(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

// Rank 0 sends the response and starts at once; the others start once they have read it. So led, large
// ring allreduces and reducescatters run slower than when every rank starts together (the benchmark's
// JSON lines show by how much); meeting at a barrier first takes that away.
Status sync_before_reduction(CollectiveContext& c, int64_t bytes) {
  if (c.sync_reduce_bytes <= 0 || bytes < c.sync_reduce_bytes) return Status::Ok();
  return mpi_status(MPI_Barrier(c.set.comm), "MPI_Barrier");
}

// Applies the postscale factor, and the division of an Average, to a reduced buffer.
void finish_reduce(const Response& r, void* buf, int64_t count, int set_size) {
  if (r.spec.reduce == ReduceOp::Average) average_buffer(r.spec.dtype, buf, count, set_size, r.spec.postscale);
  else scale_buffer(r.spec.dtype, buf, count, r.spec.postscale);
}

// Whether an allreduce of `bytes` runs around the ring rather than through MPI_Allreduce: the same answer on
// every member, as only the response and the settings decide it. For large buffers Open MPI picks
// Rabenseifner's algorithm, slower than a plain ring on few ranks (benchmarks/allreduce_bench.py measures both).
bool rings(const CollectiveContext& c, int64_t bytes) {
  return c.set.ranks.size() > 1 && c.ring_allreduce_bytes > 0 && bytes >= c.ring_allreduce_bytes;
}

// Reduces `in` of every rank into `out` (`in` == `out`: in place) and finishes it (finish_reduce), piece by
// piece while each is in cache. Around the ring (rings()) out of place, the ring reads `in` where it lies and
// writes the reduction into `out`, with no pass of its own over either (the ResNet-50 set out of place in
// small_ops_bench.py: 0.85x MPI's time, against 1.3x with a copy first); it finishes only this rank's block
// of a piece, before passing it on. Through MPI_Allreduce, `in` is copied into `out` and reduced there: MPI's
// in-place form is meant for every member or none, another member's reduction may be in place, and MPI's
// out-of-place form copies too.
Status allreduce_into(CollectiveContext& c, const Response& r, const void* in, void* out, int64_t count) {
  MPI_Datatype t = c.reductions.type(r.spec.dtype);
  MPI_Op op = c.reductions.op(r.spec.dtype, r.spec.reduce);
  auto* dst = static_cast<char*>(out);
  size_t element_size = dtype_size(r.spec.dtype);
  const int64_t bytes = count * static_cast<int64_t>(element_size);
  const bool ring = rings(c, bytes);
  if (!ring && in != out) copy(out, in, bytes);
  const auto* src = ring ? static_cast<const char*>(in) : dst;
  if (Status s = sync_before_reduction(c, bytes); !s.ok()) return s;
  const int ranks = static_cast<int>(c.set.ranks.size()), me = c.set.rank_in_set(c.global_rank);
  const auto finish = [&](char* block, int64_t n) { finish_reduce(r, block, n, ranks); };
  for (int64_t off = 0; off < count; off += c.piece()) {
    int n = static_cast<int>(std::min(c.piece(), count - off));
    char* piece = dst + off * element_size;
    Status s = ring ? ring_allreduce(c.set.comm, me, ranks, src + off * element_size, piece, n, t, op, element_size,
                                     c.ring_buffer, finish)
                    : mpi_status(MPI_Allreduce(MPI_IN_PLACE, piece, n, t, op, c.set.comm), "MPI_Allreduce");
    if (!s.ok()) return s;
    if (!ring) finish(piece, n);
  }
  return Status::Ok();
}

int64_t row_bytes(const Request& q) {
  int64_t n = static_cast<int64_t>(dtype_size(q.spec.dtype));
  for (size_t i = 1; i < q.shape.size(); ++i) n *= q.shape[i];
  return n;
}

// Byte counts and displacements of blocks of `rows[i]` rows each, for the MPI v-collectives; `fits` is false
// when a count or a displacement passes what one MPI call takes.
struct BlockLayout {
  std::vector<int64_t> counts, displs;
  int64_t total_rows = 0;
  bool fits = true;
  std::vector<int> int_counts() const { return {counts.begin(), counts.end()}; }
  std::vector<int> int_displs() const { return {displs.begin(), displs.end()}; }
};

BlockLayout block_layout(const std::vector<int64_t>& rows, int64_t row_bytes, int64_t max_count) {
  BlockLayout l;
  for (int64_t r : rows) {
    l.counts.push_back(r * row_bytes);
    l.displs.push_back(l.total_rows * row_bytes);
    l.fits &= l.counts.back() <= max_count && l.displs.back() <= max_count;
    l.total_rows += r;
  }
  return l;
}

// Posts the sends or receives of `bytes` at `p` to or from set member `peer`, in pieces (tag 2).
void post_pieces(CollectiveContext& c, bool send, char* p, int64_t bytes, int peer, std::vector<MPI_Request>& reqs) {
  for (int64_t off = 0; off < bytes; off += c.piece()) {
    const int n = static_cast<int>(std::min(c.piece(), bytes - off));
    reqs.emplace_back();
    if (send) MPI_Isend(p + off, n, MPI_BYTE, peer, 2, c.set.comm, &reqs.back());
    else MPI_Irecv(p + off, n, MPI_BYTE, peer, 2, c.set.comm, &reqs.back());
  }
}

// Block i of `send` to member i and block i of `recv` from it, as point-to-point pieces: for layouts past
// what MPI_Alltoallv and MPI_Allgatherv take. The caller copies its own block.
Status exchange_blocks(CollectiveContext& c, const char* send, const BlockLayout& out, char* recv,
                       const BlockLayout& in) {
  const int n = static_cast<int>(c.set.ranks.size()), me = c.set.rank_in_set(c.global_rank);
  std::vector<MPI_Request> reqs;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    post_pieces(c, false, recv + in.displs[peer], in.counts[peer], peer, reqs);
    post_pieces(c, true, const_cast<char*>(send) + out.displs[peer], out.counts[peer], peer, reqs);
  }
  return mpi_status(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

void* output_of(TensorEntry& e, int64_t nbytes, std::vector<int64_t> shape) {
  e.handle->output_shape = std::move(shape);
  if (e.output) return e.output;
  e.handle->output.allocate(static_cast<size_t>(nbytes));
  return e.handle->output.data();
}

// A carried allreduce (Response::carried): every member's inputs came with the response, and each member
// reduces them in the same order, so all get the same result without a collective.
Status reduce_carried(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es) {
  const int n = static_cast<int>(c.set.ranks.size());
  int64_t total = 0, largest = 0;
  for (auto* e : es) {
    total += e->request.num_bytes();
    largest = std::max(largest, e->request.num_bytes());
  }
  if (static_cast<int64_t>(r.carried.size()) != n * total)
    return Status::Error(Status::Code::Internal, "a carried allreduce of " + std::to_string(total) + " bytes on " +
                                                     std::to_string(n) + " ranks came with " +
                                                     std::to_string(r.carried.size()));
  const bool scaled = r.spec.prescale != 1.0;  // then each input is scaled in a copy first
  if (scaled && static_cast<int64_t>(c.fusion_buffer.size()) < largest) c.fusion_buffer.resize(largest);
  MPI_Datatype t = c.reductions.type(r.spec.dtype);
  MPI_Op op = c.reductions.op(r.spec.dtype, r.spec.reduce);
  const int64_t t0 = now_us();
  const char* block = r.carried.data();  // each tensor's: its members' inputs in rank order
  for (auto* e : es) {
    const int64_t bytes = e->request.num_bytes(), count = e->request.num_elements();
    // The last member's input, then each one before it reduced into it: out = in_k op out.
    copy(e->output, block + (n - 1) * bytes, bytes);
    scale_buffer(r.spec.dtype, e->output, count, r.spec.prescale);
    for (int k = n - 2; k >= 0; --k) {
      const void* in = block + k * bytes;
      if (scaled) {
        copy(c.fusion_buffer.data(), in, bytes);
        scale_buffer(r.spec.dtype, c.fusion_buffer.data(), count, r.spec.prescale);
        in = c.fusion_buffer.data();
      }
      Status s = mpi_status(MPI_Reduce_local(in, e->output, static_cast<int>(count), t, op), "MPI_Reduce_local");
      if (!s.ok()) return s;
    }
    finish_reduce(r, e->output, count, n);
    block += n * bytes;
  }
  c.record(Phase::Collective, t0);
  return Status::Ok();
}

}  // namespace

Status run_allreduce(CollectiveContext& c, const Response& r, std::vector<TensorEntry*>& es) {
  if (!r.carried.empty()) return reduce_carried(c, r, es);
  const size_t element_size = dtype_size(r.spec.dtype);
  if (es.size() == 1) {  // no fusion buffer: reduce in the output itself
    TensorEntry& e = *es[0];
    const int64_t count = e.request.num_elements();
    const void* in = e.input;
    if (r.spec.prescale != 1.0) {  // scaled in the output, so the caller's input stays untouched
      if (e.output != e.input) copy(e.output, e.input, count * static_cast<int64_t>(element_size));
      scale_buffer(r.spec.dtype, e.output, count, r.spec.prescale);
      in = e.output;
    }
    int64_t t0 = now_us();
    Status s = allreduce_into(c, r, in, e.output, count);
    c.record(Phase::Collective, t0);
    return s;
  }
  int64_t total = 0;
  for (auto* e : es) total += e->request.num_bytes();
  if (static_cast<int64_t>(c.fusion_buffer.size()) < total) c.fusion_buffer.resize(total);
  char* buf = c.fusion_buffer.data();
  int64_t t0 = now_us(), off = 0;
  for (auto* e : es) {
    copy(buf + off, e->input, e->request.num_bytes());
    off += e->request.num_bytes();
  }
  int64_t count = total / static_cast<int64_t>(element_size);
  scale_buffer(r.spec.dtype, buf, count, r.spec.prescale);
  c.record(Phase::MemcpyIn, t0);
  int64_t t1 = now_us();
  Status s = allreduce_into(c, r, buf, buf, count);
  c.record(Phase::Collective, t1);
  if (!s.ok()) return s;
  int64_t t2 = now_us();
  off = 0;
  for (auto* e : es) {
    copy(e->output, buf + off, e->request.num_bytes());
    off += e->request.num_bytes();
  }
  c.record(Phase::MemcpyOut, t2);
  return Status::Ok();
}

Status run_allgather(CollectiveContext& c, const Response& r, TensorEntry& e) {
  const Request& q = e.request;
  int64_t t0 = now_us();
  const int64_t rb = row_bytes(q);
  BlockLayout recv = block_layout(r.rows, rb, c.max_count);
  std::vector<int64_t> shape = q.shape;
  shape[0] = recv.total_rows;
  auto* out = static_cast<char*>(output_of(e, recv.total_rows * rb, shape));
  Status s;
  if (recv.fits) {
    std::vector<int> counts = recv.int_counts(), displs = recv.int_displs();
    s = mpi_status(MPI_Allgatherv(q.num_bytes() ? e.input : nullptr, static_cast<int>(q.num_bytes()), MPI_BYTE, out,
                                  counts.data(), displs.data(), MPI_BYTE, c.set.comm),
                   "MPI_Allgatherv");
  } else {  // every member's block to every other, and this rank's own copied into place
    const int me = c.set.rank_in_set(c.global_rank);
    copy(out + recv.displs[me], e.input, q.num_bytes());
    BlockLayout mine = recv;  // this rank's block, sent to every member
    for (auto& d : mine.displs) d = 0;
    for (auto& n : mine.counts) n = q.num_bytes();
    s = exchange_blocks(c, static_cast<const char*>(e.input), mine, out, recv);
  }
  c.record(Phase::Collective, t0);
  return s;
}

Status run_broadcast(CollectiveContext& c, const Response& r, TensorEntry& e) {
  const Request& q = e.request;
  int root = c.set.rank_in_set(r.spec.root_rank);
  void* out = output_of(e, q.num_bytes(), q.shape);
  if (c.global_rank == r.spec.root_rank && out != e.input) copy(out, e.input, q.num_bytes());
  int64_t t0 = now_us();
  auto* p = static_cast<char*>(out);
  Status s;
  for (int64_t off = 0; off < q.num_bytes() && s.ok(); off += c.piece())
    s = mpi_status(MPI_Bcast(p + off, static_cast<int>(std::min(c.piece(), q.num_bytes() - off)), MPI_BYTE,
                             root, c.set.comm), "MPI_Bcast");
  c.record(Phase::Collective, t0);
  return s;
}

Status run_alltoall(CollectiveContext& c, const Response&, TensorEntry& e) {
  const int n = static_cast<int>(c.set.ranks.size());
  const Request& q = e.request;
  std::vector<int64_t> send_rows = e.splits;
  if (send_rows.empty()) send_rows.assign(n, q.shape[0] / n);
  std::vector<int64_t> recv_rows(n);
  int64_t t0 = now_us();
  Status s = mpi_status(MPI_Alltoall(send_rows.data(), 1, MPI_INT64_T, recv_rows.data(), 1, MPI_INT64_T,
                                     c.set.comm), "MPI_Alltoall");
  if (!s.ok()) return s;
  const int64_t rb = row_bytes(q);
  BlockLayout send = block_layout(send_rows, rb, c.max_count), recv = block_layout(recv_rows, rb, c.max_count);
  std::vector<int64_t> shape = q.shape;
  shape[0] = recv.total_rows;
  auto* out = static_cast<char*>(output_of(e, recv.total_rows * rb, shape));
  e.handle->received_splits = recv_rows;
  // Every member must take the same path: one whose layout does not fit makes all exchange blocks.
  int fits = send.fits && recv.fits, all_fit = 0;
  s = mpi_status(MPI_Allreduce(&fits, &all_fit, 1, MPI_INT, MPI_MIN, c.set.comm), "MPI_Allreduce");
  if (s.ok() && all_fit) {
    std::vector<int> sc = send.int_counts(), sd = send.int_displs(), rc = recv.int_counts(), rd = recv.int_displs();
    s = mpi_status(MPI_Alltoallv(e.input, sc.data(), sd.data(), MPI_BYTE, out, rc.data(), rd.data(), MPI_BYTE,
                                 c.set.comm), "MPI_Alltoallv");
  } else if (s.ok()) {
    const int me = c.set.rank_in_set(c.global_rank);
    copy(out + recv.displs[me], static_cast<const char*>(e.input) + send.displs[me], send.counts[me]);
    s = exchange_blocks(c, static_cast<const char*>(e.input), send, out, recv);
  }
  c.record(Phase::Collective, t0);
  return s;
}

Status run_reducescatter(CollectiveContext& c, const Response& r, TensorEntry& e) {
  const int n = static_cast<int>(c.set.ranks.size());
  const Request& q = e.request;
  const int64_t rows = q.shape.empty() ? 1 : q.shape[0];
  const int64_t row_elems = row_bytes(q) / static_cast<int64_t>(dtype_size(q.spec.dtype));
  std::vector<int64_t> counts(n);
  for (int i = 0; i < n; ++i) counts[i] = (rows / n + (i < rows % n ? 1 : 0)) * row_elems;
  int me = c.set.rank_in_set(c.global_rank);
  std::vector<int64_t> shape = q.shape;
  shape[0] = rows / n + (me < rows % n ? 1 : 0);
  void* out = output_of(e, counts[me] * static_cast<int64_t>(dtype_size(q.spec.dtype)), shape);
  const void* in = e.input;
  if (r.spec.prescale != 1.0) {  // scale a copy: the caller's input stays untouched
    if (static_cast<int64_t>(c.fusion_buffer.size()) < q.num_bytes()) c.fusion_buffer.resize(q.num_bytes());
    copy(c.fusion_buffer.data(), e.input, q.num_bytes());
    scale_buffer(q.spec.dtype, c.fusion_buffer.data(), q.num_elements(), r.spec.prescale);
    in = c.fusion_buffer.data();
  }
  int64_t t0 = now_us();
  if (Status s = sync_before_reduction(c, q.num_bytes()); !s.ok()) return s;
  // Open MPI 5's MPI_Reduce_scatter takes longer than an allreduce of the same bytes; the ring, half of a
  // ring allreduce, takes less (benchmarks/allreduce_bench.py compares them with MPI_Reduce_scatter).
  Status s = ring_reduce_scatter(c.set.comm, me, static_cast<const char*>(in), static_cast<char*>(out), counts,
                                 c.reductions.type(q.spec.dtype), c.reductions.op(q.spec.dtype, r.spec.reduce),
                                 dtype_size(q.spec.dtype), c.piece(), c.ring_buffer);
  c.record(Phase::Collective, t0);
  finish_reduce(r, out, counts[me], n);
  return s;
}

Status run_barrier(CollectiveContext& c) {
  int64_t t0 = now_us();
  Status s = mpi_status(MPI_Barrier(c.set.comm), "MPI_Barrier");
  c.record(Phase::Collective, t0);
  return s;
}

}  // namespace hvd
