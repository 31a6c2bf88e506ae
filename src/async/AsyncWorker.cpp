// AsyncWorker: pull, compute, push (see AsyncWorker.h and AsyncProtocol.h).
#include "async/AsyncWorker.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "collectives/StallRecord.h"
#include "common/LoopPosition.h"
#include "run/StopSignals.h"

namespace ringtrain {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void add_to_histogram(std::vector<std::int64_t>& hist, std::int64_t value) {
  if (value < 0) return;
  const auto i = static_cast<std::size_t>(value);
  if (hist.size() <= i) hist.resize(i + 1, 0);
  ++hist[i];
}

}  // namespace

AsyncWorker::AsyncWorker(PeerChannel& channel, const ShardLayout& layout, int max_staleness, Model& model,
                         const Dataset& train, int batch_size, std::uint64_t seed, bool augment,
                         double straggler_ms)
    : channel_(channel),
      layout_(layout),
      servers_(layout.shards()),
      workers_(channel.size() - layout.shards()),
      max_staleness_(max_staleness),
      model_(model),
      version_(static_cast<std::size_t>(layout.shards()), 0),
      updates_(static_cast<std::size_t>(layout.shards()), 0) {
  if (channel.rank() < servers_) throw std::logic_error("AsyncWorker on a server rank");
  TrainStepConfig step_config;
  step_config.batch_size = batch_size;
  step_config.seed = seed;
  step_config.augment = augment;
  step_config.straggler_ms = channel.rank() == channel.size() - 1 ? straggler_ms : 0.0;  // the last rank
  step_config.stop_cuts_step = false;  // every handed-out batch is pushed; the servers decide
  steps_.reserve(static_cast<std::size_t>(workers_));
  for (int r = 0; r < workers_; ++r) steps_.emplace_back(model, train, step_config, r, workers_);
  batches_per_shard_ = steps_[0].steps_per_epoch();
  for (int s = 0; s < servers_; ++s) {
    outbox_.emplace_back(sizeof(async::WorkerHeader) + layout.size(s) * sizeof(float));
  }
  sends_.assign(static_cast<std::size_t>(servers_), MPI_REQUEST_NULL);
  inbox_.resize(sizeof(async::ReplyHeader) + layout.largest() * sizeof(float));
}

StepTotals AsyncWorker::compute_gradient(int epoch, std::int64_t ticket, WorkerTimes& t) {
  const int shard = static_cast<int>(ticket % workers_);
  const std::int64_t step = ticket / workers_;
  // Sync rank `shard`'s position at that step: its batch and its dropout stream.
  const LoopPosition at{epoch, step, static_cast<std::int64_t>(epoch) * batches_per_shard_ + step};
  StepTotals loss;
  const PhaseTimes p = steps_[static_cast<std::size_t>(shard)].compute_gradients(at, loss);
  t.data += p.data;
  t.forward += p.forward;
  t.backward += p.backward;
  return loss;
}

void AsyncWorker::send_all(async::WorkerKind kind, std::int64_t clock, std::int64_t ticket, const StepTotals* loss) {
  async::WorkerHeader h;
  h.kind = kind;
  h.stop = stop_requested() ? 1 : 0;
  h.clock = clock;
  h.ticket = ticket;
  if (loss != nullptr) {
    h.loss_sum = loss->loss_sum;
    h.correct = loss->correct;
    h.count = loss->count;
  }
  const auto grads = model_.grads();
  for (int s = 0; s < servers_; ++s) {
    const auto si = static_cast<std::size_t>(s);
    channel_.wait(&sends_[si]);
    h.version = version_[si];
    h.updates = updates_[si];
    std::vector<std::byte>& out = outbox_[si];
    std::memcpy(out.data(), &h, sizeof h);
    std::size_t bytes = sizeof h;
    if (kind == async::WorkerKind::kPush) {
      const std::size_t n = layout_.size(s);
      std::memcpy(out.data() + sizeof h, grads.data() + layout_.begin(s), n * sizeof(float));
      bytes += n * sizeof(float);
    }
    sends_[si] = channel_.isend(std::span<const std::byte>(out.data(), bytes), s, async::kToServerTag);
  }
}

bool AsyncWorker::receive_replies(WorkerRecord& rec) {
  const auto start = Clock::now();
  std::vector<bool> got(static_cast<std::size_t>(servers_), false);
  int remaining = servers_;
  bool more = true;
  const auto params = model_.params();
  int idle = 0;
  auto& stall = StallRecord::instance();
  while (remaining > 0) {
    const auto arrival = channel_.probe();
    if (!arrival) {
      if (idle == 0) {  // a wait for the servers' replies begins: the stall watchdog's
        const auto missing = std::find(got.begin(), got.end(), false) - got.begin();
        stall.begin_wait("reply", remaining == 1 ? static_cast<int>(missing) : StallRecord::kAllRanks, Clock::now());
      }
      PeerChannel::back_off(idle++);
      continue;
    }
    if (idle > 0) stall.end_wait();
    idle = 0;
    const int s = arrival->source;
    if (arrival->tag != async::kToWorkerTag || s >= servers_ || got[static_cast<std::size_t>(s)] ||
        arrival->bytes > inbox_.size() || arrival->bytes < sizeof(async::ReplyHeader)) {
      throw std::runtime_error(fmt::format("worker rank {}: unexpected message of {} bytes from rank {} (tag {})",
                                           channel_.rank(), arrival->bytes, s, arrival->tag));
    }
    channel_.receive(*arrival, std::span(inbox_.data(), arrival->bytes));
    async::ReplyHeader r;
    std::memcpy(&r, inbox_.data(), sizeof r);
    const auto si = static_cast<std::size_t>(s);
    got[si] = true;
    --remaining;
    version_[si] = r.version;
    updates_[si] = r.updates;
    if (s == 0) {
      // Server 0's figures stand for the push (every server applies the same pushes).
      if (r.staleness >= 0) {
        rec.staleness.push_back(r.staleness);
        add_to_histogram(staleness_hist_, r.staleness);
      }
      if (r.delay >= 0) {
        rec.delay.push_back(r.delay);
        add_to_histogram(delay_hist_, r.delay);
      }
      ticket_ = r.ticket;
    }
    if (r.kind != async::ReplyKind::kParams) {
      more = false;
      continue;
    }
    const std::size_t n = layout_.size(s);
    if (arrival->bytes != sizeof r + n * sizeof(float)) {
      throw std::runtime_error(fmt::format("worker rank {}: server {} sent {} bytes of parameters, expected {}",
                                           channel_.rank(), s, arrival->bytes - sizeof r, n * sizeof(float)));
    }
    std::memcpy(params.data() + layout_.begin(s), inbox_.data() + sizeof r, n * sizeof(float));
  }
  rec.times.wait += since(start);
  return more;
}

WorkerSegmentResult AsyncWorker::run(int epoch, std::int64_t ticket_begin, int log_every,
                                     const std::function<void(const WorkerRecord&)>& on_record) {
  WorkerSegmentResult result;
  std::int64_t clock = max_staleness_ == 0 ? ticket_begin / workers_ : 0;
  WorkerRecord rec;
  auto t = Clock::now();
  send_all(async::WorkerKind::kPull, clock, -1, nullptr);
  StallRecord::instance().set_operation("parameter-server exchange");
  StallRecord::instance().set_phase("async worker");
  while (true) {
    StallRecord::instance().set_step(clock + 1);
    const bool more = receive_replies(rec);
    rec.times.exchange += since(t);
    if (!more) break;
    if (ticket_ < 0) throw std::runtime_error("worker: server 0 sent parameters without a batch to compute");
    const StepTotals loss = compute_gradient(epoch, ticket_, rec.times);
    t = Clock::now();
    send_all(async::WorkerKind::kPush, clock, ticket_, &loss);
    ++clock;
    ++rec.steps;
    rec.loss_sum += loss.loss_sum;
    rec.count += loss.count;
    ++result.steps;
    result.loss_sum += loss.loss_sum;
    result.correct += loss.correct;
    result.count += loss.count;
    if (rec.steps >= log_every) {
      on_record(rec);
      rec = {};
    }
  }
  send_all(async::WorkerKind::kDone, clock, -1, nullptr);
  for (auto& r : sends_) channel_.wait(&r);
  if (rec.steps > 0 || !rec.staleness.empty()) on_record(rec);
  return result;
}

}  // namespace ringtrain
