// One parameter server of asynchronous training (--mode async): it owns a contiguous shard
// of the flat parameter vector and the optimizer state for it, applies every pushed
// gradient as it arrives, and answers each pull with its newest shard once the staleness
// bound allows (stale-synchronous parallel, Ho et al. 2013). A single-threaded event loop
// over non-blocking MPI; it sleeps between polls when idle (PeerChannel::back_off).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "collectives/PeerChannel.h"
#include "nn/ParamInfo.h"
#include "optim/LrSchedule.h"
#include "optim/Optimizer.h"
#include "async/AsyncProtocol.h"
#include "async/ShardLayout.h"

namespace ringtrain {

// A stretch of one epoch between two points where every rank meets.
struct ServerSegment {
  int epoch = 0;                    // 0-based
  std::int64_t ticket_begin = 0;    // batches of the epoch already done
  std::int64_t ticket_limit = 0;    // hand out batches up to here (exclusive)
};

struct ServerSegmentResult {
  bool stop_seen = false;           // a stop flag (own or a worker's) ended the segment
  std::int64_t tickets_done = 0;    // batches of the epoch applied, counted from its start
  std::int64_t updates = 0;         // optimizer updates applied in this segment
};

class ParameterServer {
 public:
  // Ranks 0..S-1 are servers (this one serves shard channel.rank()), S..N-1 workers.
  // max_staleness < 0: unbounded. tickets_per_epoch = workers x batches per worker.
  ParameterServer(PeerChannel& channel, const ShardLayout& layout, int max_staleness, const OptimizerConfig& config,
                  std::span<const ParamInfo> all_params, const LrSchedule& schedule, std::int64_t tickets_per_epoch);

  // The shard's parameters (set them before the first segment) and optimizer.
  std::span<float> params() noexcept { return params_; }
  std::span<float> optimizer_state() noexcept;
  std::uint64_t optimizer_steps() const noexcept;
  void set_optimizer_steps(std::uint64_t steps) noexcept;
  std::int64_t updates() const noexcept { return updates_; }
  void set_updates(std::int64_t updates) noexcept { updates_ = updates; }

  // Serves until every worker has sent kDone. on_tick runs about once a second (logs).
  ServerSegmentResult serve(const ServerSegment& segment, const std::function<void()>& on_tick);

  // Loss sums of the pushes applied in the current epoch (server 0's progress line).
  double epoch_loss_sum() const noexcept { return loss_sum_; }
  double epoch_count() const noexcept { return count_; }
  void reset_epoch_sums() noexcept { loss_sum_ = count_ = 0.0; }

 private:
  void handle(int source, std::span<const std::byte> message);
  void apply_push(int w, const async::WorkerHeader& h, const float* grad);
  void answer_pending();
  void answer(int w, async::ReplyKind kind, std::int64_t ticket);
  // Reply for worker w if the bound allows; returns false when it must wait.
  bool try_answer(int w);
  std::int64_t version() const;
  void complete_sends(bool block);

  PeerChannel& channel_;
  ShardLayout layout_;
  int shard_;
  int servers_;
  int workers_;
  int max_staleness_;
  const LrSchedule& schedule_;
  std::int64_t tickets_per_epoch_;
  std::vector<float> params_;
  std::unique_ptr<Optimizer> optimizer_;
  std::int64_t updates_ = 0;

  // Per segment.
  ServerSegment segment_;
  bool stopping_ = false;
  std::int64_t next_ticket_ = 0;        // server 0, unbounded or K > 0: first come, first served
  std::int64_t applied_ = 0;            // gradients applied in the segment
  std::int64_t synced_clocks_ = 0;      // K = 0: complete rounds applied in the segment
  std::vector<std::int64_t> clock_;     // pushes applied per worker in the segment
  std::vector<bool> done_;
  std::vector<bool> pending_;           // a pull waits for an answer
  std::vector<std::int64_t> staleness_; // of each worker's last push (-1: none)
  std::vector<std::int64_t> delay_;
  std::vector<float> round_grads_;      // K = 0: this round's gradients, one slot per worker
  std::vector<float> round_sum_;
  int round_count_ = 0;
  double loss_sum_ = 0.0;
  double count_ = 0.0;

  std::vector<std::byte> inbox_;
  std::vector<std::vector<std::byte>> outbox_;  // one reply in flight per worker
  std::vector<MPI_Request> sends_;
};

}  // namespace ringtrain
