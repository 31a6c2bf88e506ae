// One training step (design.md §4): data -> forward -> backward, handing each finished
// gradient range to GradientSync as backward produces it -> wait for the all-reduce ->
// optimizer. It returns the step's timings; the loop around it (Trainer) owns epochs,
// stopping, evaluation, logging and checkpoints. Its local half (compute_gradients) is also
// what an asynchronous worker runs (AsyncWorker), with the parameter servers as the update.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "datasets/BatchLoader.h"
#include "datasets/Dataset.h"
#include "datasets/DistributedSampler.h"
#include "nn/Model.h"
#include "optim/Optimizer.h"
#include "overlap/ExactShardSum.h"
#include "overlap/GradientSync.h"
#include "common/LoopPosition.h"
#include "logs/PhaseTimes.h"

namespace ringtrain {

struct TrainStepConfig {
  int batch_size = 64;     // per rank and micro-batch
  int accumulate = 1;      // micro-batches per step
  std::uint64_t seed = 42;
  bool augment = false;
  // An emulated slower node (--straggler-ms): this rank pauses this long after its backward
  // each step. The caller picks the rank (the last one).
  double straggler_ms = 0.0;
  // true: a stop requested before a micro-batch cuts the step short (its update is discarded
  // anyway). false: the step is computed whole (an asynchronous worker owes its servers the
  // gradient of the batch it was handed; they decide what a stop discards).
  bool stop_cuts_step = true;
  // --logical-shards S (0: off). batch_size is then one shard's batch; the sampler walks the
  // epoch's global permutation, and run_shards() replaces run().
  int logical_shards = 0;
  // Loader threads (BatchLoader): 0 loads each batch inline when the step needs it; N > 0
  // fills up to `prefetch` batches ahead on N threads. The bits are the same either way.
  int loader_threads = 0;
  int prefetch = 3;
  // --shuffle block: the training order by the data set's blocks of about this many bytes
  // (Dataset::block_starts); 0: the exact permutation.
  std::uint64_t shuffle_block_bytes = 0;
};

// A rank whose batch could not be made (a bad image mid-epoch) adds this to the step's
// agreed stop value, so every rank learns of it at the agreement it already holds, and all
// throw together instead of leaving the others in a collective: signals add 1 each, so any
// sum from this on is a data failure (exact in double for up to 2^21 failing ranks).
inline constexpr double kDataFailureStop = 4294967296.0;

struct StepResult {
  PhaseTimes times;
  StepTotals totals;   // summed over ranks
  bool applied = true; // false: a stop was agreed and the update discarded (no optimizer step)
  std::vector<std::pair<double, double>> comm_slices;  // SyncTimes::slices of this step
};

class TrainStep {
 public:
  TrainStep(Model& model, Optimizer& optimizer, const Dataset& train, TrainStepConfig config, int rank, int world);
  // Without an optimizer: only compute_gradients() (the update happens elsewhere); rank and
  // world name the sampler shard the batches come from.
  TrainStep(Model& model, const Dataset& train, TrainStepConfig config, int rank, int world);

  // Optimizer steps per epoch: this rank's share of the training set in whole micro-batches,
  // over accumulate (the same on every rank).
  std::int64_t steps_per_epoch() const noexcept { return steps_per_epoch_; }
  // Training samples each epoch uses across all ranks; the rest of the data set (fewer than
  // one global batch) is left out of that epoch.
  std::size_t samples_per_epoch() const noexcept { return samples_per_epoch_; }

  // What compute_gradients() calls on its way.
  struct Hooks {
    // After the last micro-batch's forward, with this rank's loss sums and stop flag; return
    // false to skip the rest (backward): the step is discarded anyway.
    std::function<bool(StepTotals&)> after_forward;
    // As backward finishes each range of the final gradient (the mean over micro-batches).
    GradReadyFn on_ready;
  };

  // The local half of step `at`, without any communication (usable by other update schemes):
  // data, forward and backward of every micro-batch; leaves the mean gradient of this rank's
  // samples in model.grads() and this rank's sums in local. If a stop is requested before a
  // micro-batch (and config.stop_cuts_step), the remaining compute is skipped and local.stop
  // is 1 (its gradient is discarded); after_forward is called exactly once either way.
  PhaseTimes compute_gradients(const LoopPosition& at, StepTotals& local, const Hooks& hooks = {});

  // The synchronous data-parallel step at `at`: compute_gradients, the loss/stop agreement
  // and the bucketed all-reduce through sync (overlapped with backward if sync is), then the
  // optimizer at lr unless a stop was agreed. Throws CollectiveError on every rank if the
  // summed loss is not finite; std::logic_error if built without an optimizer.
  StepResult run(const LoopPosition& at, double lr, GradientSync& sync);

  // --logical-shards: step `at` as shards sum.first_shard() .. + sum.local_shards() - 1 of
  // the global batch, in order. Shard k of step t takes positions [(tS + k) B, (tS + k + 1) B)
  // of the epoch's permutation, the dropout stream (seed, step, k) and its own batch-norm
  // statistics (every shard's forward starts from the step's running statistics); then the
  // agreement, the exact sum and the optimizer. Nothing in it depends on the rank count.
  StepResult run_shards(const LoopPosition& at, double lr, ExactShardSum& sum);

  // Called by run() and run_shards() just before the optimizer update, the only write of
  // the parameters and optimizer state in a step (a RAM snapshot's thread may still be
  // reading them: SnapshotWriter::fence). What it returns, if not empty, observes that one
  // update block by block (Optimizer::set_update_observer; a RAM snapshot captures the state
  // from cache: SnapshotWriter::capture). Its time and the observer's count as the optimizer's.
  using BeforeUpdate = std::function<Optimizer::UpdateObserver()>;
  void set_before_update(BeforeUpdate fn) { before_update_ = std::move(fn); }

  // The loader threads' figures (zero without loader threads).
  LoaderStats loader_stats() const { return loader_ ? loader_->stats() : LoaderStats{}; }
  int loader_threads() const noexcept { return loader_ ? loader_->threads() : 0; }

 private:
  Model& model_;
  Optimizer* optimizer_;  // null: compute_gradients() only
  const Dataset& train_;
  TrainStepConfig config_;
  int rank_;
  DistributedSampler sampler_;
  std::int64_t steps_per_epoch_ = 0;
  std::size_t samples_per_epoch_ = 0;
  std::vector<float> src_;           // (batch, C, H, W)
  std::vector<std::int32_t> labels_;
  std::vector<float> accumulated_;   // accumulate > 1: the sum of the earlier micro-batches' gradients
  std::vector<float> step_buffers_;  // logical shards: the running statistics the step started with
  BeforeUpdate before_update_;
  std::unique_ptr<BatchLoader> loader_;
  std::size_t queue_next_ = 0;       // the next batch number of the epoch to ask the loader for
  std::exception_ptr data_error_;    // this rank's failed batch, thrown after the agreement

  // Batch `number` of epoch `epoch` into src_/labels_ (from the loader's queue when it
  // holds it, which it then tops up while `ahead`); returns its sample count.
  std::size_t fetch(std::uint64_t epoch, std::size_t number, std::uint64_t augment_key, bool ahead);
  // After the agreement: a data failure on any rank throws on every rank, every rank with
  // the same message (the lowest failing rank's error, gathered over comm).
  void throw_if_data_failure(const StepTotals& sum, const LoopPosition& at, Communicator& comm);

  PhaseTimes compute_shards(const LoopPosition& at, StepTotals& local, ExactShardSum& sum);
  std::uint64_t augment_key(const LoopPosition& at) const;
  void update(double lr);
};

}  // namespace ringtrain
