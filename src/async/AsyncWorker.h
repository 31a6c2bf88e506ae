// One worker of asynchronous training (--mode async): pulls the servers' shards, computes a
// gradient on the batch server 0 assigns (with TrainStep::compute_gradients, the local half
// of a sync step), pushes it (which is also its next pull), until a server ends the segment.
// Keeps per-step timings and the staleness of its gradients.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "collectives/PeerChannel.h"
#include "datasets/Dataset.h"
#include "nn/Model.h"
#include "async/AsyncProtocol.h"
#include "async/ShardLayout.h"
#include "step/TrainStep.h"

namespace ringtrain {

// Seconds of one or more worker steps.
struct WorkerTimes {
  double data = 0, forward = 0, backward = 0, exchange = 0, wait = 0;
};

// What one step (or a few, between two log records) did.
struct WorkerRecord {
  WorkerTimes times;
  int steps = 0;
  double loss_sum = 0.0;
  double count = 0.0;
  std::vector<std::int64_t> staleness;  // of each gradient applied since the previous record
  std::vector<std::int64_t> delay;
};

struct WorkerSegmentResult {
  std::int64_t steps = 0;
  double loss_sum = 0.0, correct = 0.0, count = 0.0;
};

class AsyncWorker {
 public:
  // The worker's batches come from `train` via the same W sampler shards a sync run of W
  // ranks uses; model holds the parameters it pulls and the gradients it pushes.
  AsyncWorker(PeerChannel& channel, const ShardLayout& layout, int max_staleness, Model& model, const Dataset& train,
              int batch_size, std::uint64_t seed, bool augment, double straggler_ms);

  std::int64_t batches_per_shard() const noexcept { return batches_per_shard_; }

  // One segment of `epoch` starting at ticket_begin; on_record gets the step records, every
  // `log_every` steps and at the end.
  WorkerSegmentResult run(int epoch, std::int64_t ticket_begin, int log_every,
                          const std::function<void(const WorkerRecord&)>& on_record);

  // Staleness of every gradient this worker pushed (clocks; index = staleness), and the
  // server-update delay, over the whole run.
  const std::vector<std::int64_t>& staleness_histogram() const noexcept { return staleness_hist_; }
  const std::vector<std::int64_t>& delay_histogram() const noexcept { return delay_hist_; }

 private:
  // Forward and backward of batch `ticket`: fills model.grads() and returns the batch's sums.
  StepTotals compute_gradient(int epoch, std::int64_t ticket, WorkerTimes& t);
  void send_all(async::WorkerKind kind, std::int64_t clock, std::int64_t ticket, const StepTotals* loss);
  // Waits for every server's reply; copies kParams shards into the model. False on kEnd.
  bool receive_replies(WorkerRecord& rec);

  PeerChannel& channel_;
  ShardLayout layout_;
  int servers_;
  int workers_;
  int max_staleness_;
  Model& model_;
  // Step r computes the batches of sampler shard r of W, as sync rank r of W ranks would (the
  // same batches, augmentation and dropout streams): ticket t is batch t / W of shard t % W.
  std::vector<TrainStep> steps_;
  std::int64_t batches_per_shard_ = 0;

  std::vector<std::vector<std::byte>> outbox_;  // one message in flight per server
  std::vector<MPI_Request> sends_;
  std::vector<std::byte> inbox_;
  std::vector<std::int64_t> version_;  // per server, from its last reply
  std::vector<std::int64_t> updates_;
  std::int64_t ticket_ = -1;
  std::vector<std::int64_t> staleness_hist_;
  std::vector<std::int64_t> delay_hist_;
};

}  // namespace ringtrain
