// ParameterServer: the event loop of one parameter server (see ParameterServer.h).
//
// Versions. The server's version is the SSP clock of Ho et al. (2013): the number of pushes
// that every still-active worker has had applied in this segment. A pull from a worker that
// has pushed c gradients is answered once version >= c - K, so a worker is never more than
// K clocks ahead of the slowest. A gradient's staleness is that gap when its parameters
// were pulled, c - version: the clocks of the slowest worker's updates it may be missing,
// which SSP bounds by K. Its delay is the count of optimizer updates applied between its
// pull and its own update (the "tau" of asynchronous SGD analyses), which with W workers
// can reach about (W-1)(2K+1). Departed workers (kDone) no longer hold the others back.
//
// K = 0 is synchronous: the server keeps the round's W gradients, sums them in worker order
// once all are in, applies one optimizer step with their mean, and only then answers the
// next round's pulls. That is --mode sync --allreduce ps's update, summed in the same rank
// order and scaled the same way, momentum included (W separate steps of g/W would not
// reproduce momentum); the order also makes K = 0 runs repeatable bit for bit. For K > 0 and unbounded, every gradient is
// its own optimizer step at the configured learning rate, as it arrives.
//
// Batches. Server 0 hands each worker the batch ("ticket") to compute with its reply. With
// K = 0, worker w's round c is ticket c*W + w (the batch sync rank w takes at step c); else
// tickets go first come, first served, so a faster worker takes more of the epoch. Ticket t
// is batch t / W of the sampler shard t % W, the same batches a sync run of W ranks takes.
#include "async/ParameterServer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "collectives/StallRecord.h"
#include "run/StopSignals.h"

namespace ringtrain {

using async::ReplyHeader;
using async::ReplyKind;
using async::WorkerHeader;
using async::WorkerKind;

ParameterServer::ParameterServer(PeerChannel& channel, const ShardLayout& layout, int max_staleness,
                                 const OptimizerConfig& config, std::span<const ParamInfo> all_params,
                                 const LrSchedule& schedule, std::int64_t tickets_per_epoch)
    : channel_(channel),
      layout_(layout),
      shard_(channel.rank()),
      servers_(layout.shards()),
      workers_(channel.size() - layout.shards()),
      max_staleness_(max_staleness),
      schedule_(schedule),
      tickets_per_epoch_(tickets_per_epoch),
      params_(layout.size(channel.rank())) {
  if (shard_ >= servers_) throw std::logic_error("ParameterServer on a worker rank");
  if (workers_ < 1) throw std::invalid_argument("ParameterServer: no workers");
  if (!params_.empty()) {
    const auto infos = layout.params_in(shard_, all_params);
    optimizer_ = Optimizer::create(config, infos, params_.size());
  }
  inbox_.resize(sizeof(WorkerHeader) + params_.size() * sizeof(float));
  outbox_.assign(static_cast<std::size_t>(workers_), std::vector<std::byte>(sizeof(ReplyHeader) + params_.size() * sizeof(float)));
  sends_.assign(static_cast<std::size_t>(workers_), MPI_REQUEST_NULL);
  if (max_staleness_ == 0) {
    round_grads_.assign(params_.size() * static_cast<std::size_t>(workers_), 0.0f);
    round_sum_.assign(params_.size(), 0.0f);
  }
}

std::span<float> ParameterServer::optimizer_state() noexcept {
  return optimizer_ ? optimizer_->state() : std::span<float>();
}
std::uint64_t ParameterServer::optimizer_steps() const noexcept {
  return optimizer_ ? optimizer_->steps_taken() : static_cast<std::uint64_t>(updates_);
}
void ParameterServer::set_optimizer_steps(std::uint64_t steps) noexcept {
  if (optimizer_) optimizer_->set_steps_taken(steps);
}

std::int64_t ParameterServer::version() const {
  if (max_staleness_ == 0) return segment_.ticket_begin / workers_ + synced_clocks_;
  std::int64_t v = std::numeric_limits<std::int64_t>::max();
  for (int w = 0; w < workers_; ++w) {
    if (!done_[static_cast<std::size_t>(w)]) v = std::min(v, clock_[static_cast<std::size_t>(w)]);
  }
  if (v == std::numeric_limits<std::int64_t>::max()) {
    v = *std::max_element(clock_.begin(), clock_.end());  // everyone left: the last clock reached
  }
  return v;
}

ServerSegmentResult ParameterServer::serve(const ServerSegment& segment, const std::function<void()>& on_tick) {
  segment_ = segment;
  stopping_ = false;
  applied_ = 0;
  synced_clocks_ = 0;
  round_count_ = 0;
  next_ticket_ = segment.ticket_begin;
  const std::int64_t first_clock = max_staleness_ == 0 ? segment.ticket_begin / workers_ : 0;
  clock_.assign(static_cast<std::size_t>(workers_), first_clock);
  done_.assign(static_cast<std::size_t>(workers_), false);
  pending_.assign(static_cast<std::size_t>(workers_), false);
  staleness_.assign(static_cast<std::size_t>(workers_), -1);
  delay_.assign(static_cast<std::size_t>(workers_), -1);

  const auto tick_every = std::chrono::seconds(1);
  auto last_tick = std::chrono::steady_clock::now();
  int idle = 0;
  int active = workers_;
  auto& stall = StallRecord::instance();
  stall.set_phase("parameter server");
  stall.set_operation("parameter-server exchange");
  while (active > 0) {
    if (!stopping_ && stop_requested()) {
      stopping_ = true;
      answer_pending();
    }
    const auto arrival = channel_.probe();
    if (!arrival) {
      // Waiting for any worker: the stall watchdog's wait (the step is the updates applied).
      if (idle == 0) stall.begin_wait("request", StallRecord::kAllRanks, std::chrono::steady_clock::now());
      complete_sends(false);
      PeerChannel::back_off(idle++);
    } else {
      if (idle > 0) stall.end_wait();
      stall.set_step(max_staleness_ == 0 ? synced_clocks_ + 1 : applied_ + 1);
      idle = 0;
      if (arrival->tag != async::kToServerTag || arrival->source < servers_ || arrival->bytes > inbox_.size() ||
          arrival->bytes < sizeof(WorkerHeader)) {
        throw std::runtime_error(fmt::format("parameter server {}: unexpected message of {} bytes from rank {} (tag {})",
                                             shard_, arrival->bytes, arrival->source, arrival->tag));
      }
      channel_.receive(*arrival, std::span(inbox_.data(), arrival->bytes));
      const int w = arrival->source - servers_;
      const bool was_done = done_[static_cast<std::size_t>(w)];
      handle(arrival->source, std::span<const std::byte>(inbox_.data(), arrival->bytes));
      if (!was_done && done_[static_cast<std::size_t>(w)]) --active;
    }
    const auto now = std::chrono::steady_clock::now();
    if (on_tick && now - last_tick >= tick_every) {
      on_tick();
      last_tick = now;
    }
  }
  if (idle > 0) stall.end_wait();
  complete_sends(true);

  ServerSegmentResult r;
  r.stop_seen = stopping_;
  r.updates = max_staleness_ == 0 ? synced_clocks_ : applied_;
  // A round that not every worker finished (a stop between rounds) is dropped whole: the
  // checkpoint then holds exactly the complete rounds, and a resume repeats the rest.
  r.tickets_done = max_staleness_ == 0 ? segment.ticket_begin + synced_clocks_ * workers_ : segment.ticket_begin + applied_;
  return r;
}

void ParameterServer::handle(int source, std::span<const std::byte> message) {
  const int w = source - servers_;
  const auto wi = static_cast<std::size_t>(w);
  WorkerHeader h;
  std::memcpy(&h, message.data(), sizeof h);
  if (h.stop != 0 && !stopping_) {
    stopping_ = true;
    answer_pending();
  }
  switch (h.kind) {
    case WorkerKind::kDone:
      done_[wi] = true;
      pending_[wi] = false;
      answer_pending();  // the others no longer wait for this worker's clock
      return;
    case WorkerKind::kPush: {
      const std::size_t floats = (message.size() - sizeof h) / sizeof(float);
      if (floats != params_.size() || h.clock != clock_[wi]) {
        throw std::runtime_error(fmt::format(
            "parameter server {}: push from worker rank {} has {} floats at clock {} (expected {} at clock {})", shard_,
            source, floats, h.clock, params_.size(), clock_[wi]));
      }
      apply_push(w, h, reinterpret_cast<const float*>(message.data() + sizeof h));
      pending_[wi] = true;
      answer_pending();
      return;
    }
    case WorkerKind::kPull:
      pending_[wi] = true;
      try_answer(w);
      return;
  }
  throw std::runtime_error(fmt::format("parameter server {}: unknown message kind {} from rank {}", shard_,
                                       static_cast<int>(h.kind), source));
}

void ParameterServer::apply_push(int w, const WorkerHeader& h, const float* grad) {
  const auto wi = static_cast<std::size_t>(w);
  staleness_[wi] = h.clock - h.version;
  delay_[wi] = updates_ - h.updates;
  loss_sum_ += h.loss_sum;
  count_ += h.count;
  ++clock_[wi];
  const double epoch = static_cast<double>(segment_.epoch);
  if (max_staleness_ == 0) {
    const std::size_t n = params_.size();
    std::copy_n(grad, n, round_grads_.begin() + static_cast<std::ptrdiff_t>(wi * n));
    if (++round_count_ < workers_) return;
    // Every worker's gradient of this round is in: one step with their mean, summed in
    // worker order and scaled with the last addition, as ParameterServerAllreduce does.
    const float inv = 1.0f / static_cast<float>(workers_);
    std::copy_n(round_grads_.begin(), n, round_sum_.begin());
    for (int w2 = 1; w2 < workers_; ++w2) {
      const float* g = round_grads_.data() + static_cast<std::size_t>(w2) * n;
      if (w2 + 1 == workers_) {
        for (std::size_t i = 0; i < n; ++i) round_sum_[i] = (round_sum_[i] + g[i]) * inv;
      } else {
        for (std::size_t i = 0; i < n; ++i) round_sum_[i] += g[i];
      }
    }
    if (workers_ == 1) {
      for (float& g : round_sum_) g *= inv;
    }
    const std::int64_t round = segment_.ticket_begin / workers_ + synced_clocks_;
    const double lr = schedule_.lr(epoch + static_cast<double>(round * workers_) / static_cast<double>(tickets_per_epoch_));
    if (optimizer_) optimizer_->step(params_, round_sum_, lr);
    round_count_ = 0;
    ++synced_clocks_;
    ++updates_;
    return;
  }
  const double lr = schedule_.lr(epoch + static_cast<double>(segment_.ticket_begin + applied_) /
                                             static_cast<double>(tickets_per_epoch_));
  if (optimizer_) optimizer_->step(params_, std::span<const float>(grad, params_.size()), lr);
  ++applied_;
  ++updates_;
}

void ParameterServer::answer_pending() {
  for (int w = 0; w < workers_; ++w) {
    if (pending_[static_cast<std::size_t>(w)]) try_answer(w);
  }
}

bool ParameterServer::try_answer(int w) {
  const auto wi = static_cast<std::size_t>(w);
  if (stopping_) {
    answer(w, ReplyKind::kEnd, -1);
    return true;
  }
  if (max_staleness_ >= 0 && version() < clock_[wi] - max_staleness_) return false;
  if (shard_ != 0) {
    answer(w, ReplyKind::kParams, -1);
    return true;
  }
  std::int64_t ticket = 0;
  if (max_staleness_ == 0) {
    ticket = clock_[wi] * workers_ + w;
  } else {
    ticket = next_ticket_;
  }
  if (ticket >= segment_.ticket_limit) {
    answer(w, ReplyKind::kEnd, -1);
    return true;
  }
  if (max_staleness_ != 0) ++next_ticket_;
  answer(w, ReplyKind::kParams, ticket);
  return true;
}

void ParameterServer::answer(int w, ReplyKind kind, std::int64_t ticket) {
  const auto wi = static_cast<std::size_t>(w);
  pending_[wi] = false;
  channel_.wait(&sends_[wi]);  // the previous reply to w (w has it already: it asked again)
  ReplyHeader r;
  r.kind = kind;
  r.version = version();
  r.updates = updates_;
  r.ticket = ticket;
  r.staleness = staleness_[wi];
  r.delay = delay_[wi];
  staleness_[wi] = delay_[wi] = -1;
  std::vector<std::byte>& out = outbox_[wi];
  std::memcpy(out.data(), &r, sizeof r);
  std::size_t bytes = sizeof r;
  if (kind == ReplyKind::kParams) {
    std::memcpy(out.data() + sizeof r, params_.data(), params_.size() * sizeof(float));
    bytes += params_.size() * sizeof(float);
  }
  sends_[wi] = channel_.isend(std::span<const std::byte>(out.data(), bytes), servers_ + w, async::kToWorkerTag);
}

void ParameterServer::complete_sends(bool block) {
  for (MPI_Request& r : sends_) {
    if (block) {
      channel_.wait(&r);
    } else {
      channel_.test(&r);
    }
  }
}

}  // namespace ringtrain
