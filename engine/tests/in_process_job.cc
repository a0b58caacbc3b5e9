#include "in_process_job.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "clock.h"
#include "thread_placement.h"

namespace hvd::testing {

void Mailboxes::post(int dest, Message m) {
  std::lock_guard<std::mutex> g(mu_);
  boxes_.at(dest).push_back(std::move(m));
}

std::optional<Message> Mailboxes::take(int rank) {
  std::lock_guard<std::mutex> g(mu_);
  auto& box = boxes_.at(rank);
  if (box.empty()) return std::nullopt;
  Message m = std::move(box.front());
  box.pop_front();
  return m;
}

bool Mailboxes::pending(int rank, int tag) const {
  std::lock_guard<std::mutex> g(mu_);
  for (const Message& m : boxes_.at(rank))
    if (m.tag == tag) return true;
  return false;
}

void InProcessTransport::send(int dest, int tag, std::vector<char> bytes) {
  boxes_->post(dest, Message{rank_, tag, std::move(bytes)});
}

Status MeetingPoint::meet(int32_t set, uint64_t k, int members, const std::vector<std::string>& names,
                          const std::vector<float>& input, std::vector<float>* sum,
                          const std::function<bool()>& abandoned) {
  std::unique_lock<std::mutex> lk(mu_);
  Round& round = rounds_[{set, k}];
  if (round.arrived == 0) {
    round.names = names;
    round.sum.assign(input.size(), 0.0f);
  }
  if (round.names != names || round.sum.size() != input.size()) round.mismatch = true;
  for (size_t i = 0; i < input.size() && i < round.sum.size(); ++i) round.sum[i] += input[i];
  round.arrived += 1;
  cv_.notify_all();
  while (round.arrived < members) {
    if (abandoned()) return Status::Error(Status::Code::Aborted, "abandoned while waiting for the other ranks");
    cv_.wait_for(lk, std::chrono::milliseconds(1));
  }
  Status s = round.mismatch ? Status::Error(Status::Code::Internal, "members ran different responses as one collective")
                            : Status::Ok();
  *sum = round.sum;
  if (++round.left == members) rounds_.erase({set, k});
  return s;
}

Status InProcessDataPlane::run(const Response& r, std::vector<TensorEntry*>& entries, const ProcessSet& set,
                               const Span& span) {
  {
    std::lock_guard<std::mutex> g(mu_);
    ran_.push_back(r.names);
  }
  const bool sum = r.spec.op == OpType::Allreduce && r.spec.dtype == DataType::Float32 &&
                   r.spec.reduce == ReduceOp::Sum;
  std::vector<float> input, result;
  if (sum)
    for (auto* e : entries) {
      const float* p = static_cast<const float*>(e->input);
      input.insert(input.end(), p, p + e->request.num_elements());
    }
  const int64_t start = now_us();
  Status s = meeting_->meet(set.id, rounds_[set.id]++, static_cast<int>(set.ranks.size()), r.names, input, &result,
                            abandoned_);
  if (!s.ok() || !sum) return s;
  size_t at = 0;
  for (auto* e : entries) {
    const size_t n = static_cast<size_t>(e->request.num_elements());
    std::memcpy(e->output, result.data() + at, n * sizeof(float));
    at += n;
  }
  span(Phase::Collective, "in_process_allreduce", start, now_us());
  return Status::Ok();
}

std::vector<std::vector<std::string>> InProcessDataPlane::ran() const {
  std::lock_guard<std::mutex> g(mu_);
  return ran_;
}

InProcessJob::InProcessJob(int size, const Config& config)
    : boxes_(std::make_shared<Mailboxes>(size)), meeting_(std::make_shared<MeetingPoint>()), planes_(size) {
  for (int rank = 0; rank < size; ++rank) {
    EngineWiring w;
    w.topology.rank = w.topology.local_rank = rank;
    w.topology.size = w.topology.local_size = size;
    w.topology.host_cores = usable_cores();  // one process: its own cores
    w.transport = std::make_unique<InProcessTransport>(boxes_, rank);
    w.make_data_plane = [this, rank](const Config&, std::function<bool()> abandoned) -> std::unique_ptr<DataPlane> {
      auto plane = std::make_unique<InProcessDataPlane>(meeting_, std::move(abandoned));
      planes_[rank] = plane.get();
      return plane;
    };
    if (rank == 0) w.origins_us.assign(size, 0);  // one process: one clock
    engines_.push_back(std::make_unique<Engine>(std::move(w), config));
  }
}

InProcessJob::~InProcessJob() {
  while (!engines_.empty()) engines_.pop_back();
}

void InProcessJob::inject(int source, int dest, int tag, std::vector<char> bytes) {
  boxes_->post(dest, Message{source, tag, std::move(bytes)});
}

TensorEntry allreduce(const std::string& name, const std::vector<float>& data, std::vector<float>* out) {
  out->assign(data.size(), 0.0f);
  TensorEntry e;
  e.request.spec.op = OpType::Allreduce;
  e.request.spec.reduce = ReduceOp::Sum;
  e.request.spec.dtype = DataType::Float32;
  e.request.name = name;
  e.request.shape = {static_cast<int64_t>(data.size())};
  e.input = data.data();
  e.output = out->data();
  return e;
}

Status finish(const std::shared_ptr<Handle>& h) {
  if (!eventually([&] { return h->poll(); }))
    return Status::Error(Status::Code::Internal, "the operation did not complete within a minute (a hang)");
  return h->status();
}

bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 6000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace hvd::testing
