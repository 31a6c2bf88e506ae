// The training step.
#include "step/TrainStep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "common/Random.h"
#include "run/StopSignals.h"
#include "common/CollectiveError.h"
#include "common/Seconds.h"

namespace ringtrain {
namespace {

using Clock = std::chrono::steady_clock;

// bf16: each block of new weights is narrowed into the layers' bf16 copies as soon as the
// optimizer has written it, while it is still in cache, rather than in a second pass over
// the whole arena at the next forward. The observer holds the model, not a step (which may
// be moved); fp32 has none and keeps the optimizer's unblocked loops.
Optimizer::UpdateObserver standing_observer(Model& model) {
  if (model.precision() != Precision::kBf16) return nullptr;
  return [&model](std::size_t offset, std::size_t count) { model.params_updated(offset, count); };
}

}  // namespace

TrainStep::TrainStep(Model& model, Optimizer& optimizer, const Dataset& train, TrainStepConfig config, int rank,
                     int world)
    : TrainStep(model, train, config, rank, world) {
  optimizer_ = &optimizer;
  if (auto narrow = standing_observer(model)) optimizer.set_update_observer(std::move(narrow));
}

TrainStep::TrainStep(Model& model, const Dataset& train, TrainStepConfig config, int rank, int world)
    : model_(model),
      optimizer_(nullptr),
      train_(train),
      config_(config),
      rank_(rank),
      // Logical shards: one global permutation, cut by shard rather than by rank.
      sampler_(train.size(), config.logical_shards > 0 ? 0 : rank, config.logical_shards > 0 ? 1 : world, config.seed,
               DistributedSampler::Mode::kTrain) {
  if (config_.shuffle_block_bytes > 0) {
    BlockShuffle blocks{train.block_starts(config_.shuffle_block_bytes)};
    if (blocks.starts.empty()) throw std::invalid_argument("--shuffle block: the training data has no blocks (--dataset packed)");
    sampler_.set_blocks(std::move(blocks));
  }
  const auto batch = static_cast<std::size_t>(config_.batch_size);
  const int parts = config_.logical_shards > 0 ? config_.logical_shards : config_.accumulate;
  steps_per_epoch_ = static_cast<std::int64_t>(sampler_.steps(batch)) / parts;
  samples_per_epoch_ = static_cast<std::size_t>(steps_per_epoch_) * static_cast<std::size_t>(parts) * batch *
                       static_cast<std::size_t>(config_.logical_shards > 0 ? 1 : world);
  src_.resize(batch * train.shape().numel());
  labels_.resize(batch);
  if (config_.accumulate > 1) accumulated_.resize(model.num_params());
  if (config_.loader_threads > 0) loader_ = std::make_unique<BatchLoader>(train, config_.loader_threads, config_.prefetch);
}

std::size_t TrainStep::fetch(std::uint64_t epoch, std::size_t number, std::uint64_t augment_key, bool ahead) {
  const auto batch = static_cast<std::size_t>(config_.batch_size);
  if (!loader_) {
    const auto idx = sampler_.batch(number, batch);
    load_batch(train_, idx, src_.data(), labels_.data(), augment_key);
    return idx.size();
  }
  // The epoch's batches in order: run() takes micro-batches step * k + micro, one after
  // another. Anything else (a resume, a new epoch, --logical-shards' strided numbers)
  // starts the queue again at `number`.
  const auto parts = static_cast<std::size_t>(config_.logical_shards > 0 ? config_.logical_shards : config_.accumulate);
  const std::size_t last = ahead ? static_cast<std::size_t>(steps_per_epoch_) * parts : number + 1;
  auto top_up = [&] {
    while (queue_next_ < last) {
      const auto idx = sampler_.batch(queue_next_, batch);
      if (!loader_->request({{epoch, queue_next_}, {idx.begin(), idx.end()}, augment_key})) break;
      ++queue_next_;
    }
  };
  BatchId front;
  if (!loader_->front(front) || !(front == BatchId{epoch, number})) {
    loader_->clear();
    queue_next_ = number;
  }
  top_up();
  loader_->take(src_, labels_);
  top_up();
  return labels_.size();
}

void TrainStep::throw_if_data_failure(const StepTotals& sum, const LoopPosition& at, Communicator& comm) {
  if (sum.stop < kDataFailureStop) return;
  std::string mine;
  if (data_error_) {
    std::exception_ptr e = std::exchange(data_error_, nullptr);
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& error) {
      mine = error.what();
    }
  }
  // Every rank is here (the agreed sum says so): one more collective gives all of them the
  // same line to report, the lowest failing rank's.
  const std::vector<std::string> all = comm.allgather(mine);
  for (std::size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty())
      throw CollectiveError(fmt::format("rank {} could not load its batch of step {}: {}", r, at.global_step + 1, all[r]));
  throw CollectiveError(fmt::format("a rank could not load its batch of step {}", at.global_step + 1));
}

std::uint64_t TrainStep::augment_key(const LoopPosition& at) const {
  return config_.augment ? derive_seed(config_.seed, {static_cast<std::uint64_t>(RngPurpose::kAugment),
                                                      static_cast<std::uint64_t>(at.epoch)})
                         : 0;
}

PhaseTimes TrainStep::compute_gradients(const LoopPosition& at, StepTotals& local, const Hooks& hooks) {
  if (sampler_.epoch() != static_cast<std::uint64_t>(at.epoch) || sampler_.indices().empty()) {
    sampler_.set_epoch(static_cast<std::uint64_t>(at.epoch));
  }
  const int k = config_.accumulate;
  const std::uint64_t augment = augment_key(at);
  const auto grads = model_.grads();
  const float inv = 1.0f / static_cast<float>(k);
  PhaseTimes t;
  local = {};
  for (int micro = 0; micro < k; ++micro) {
    if (config_.stop_cuts_step && stop_requested()) {
      // The step will be discarded: its remaining compute is wasted time before the stop.
      local.stop = 1.0;
      if (hooks.after_forward) hooks.after_forward(local);
      return t;
    }
    const bool last = micro + 1 == k;
    const auto t0 = Clock::now();
    std::size_t n = 0;
    try {
      n = fetch(static_cast<std::uint64_t>(at.epoch), static_cast<std::size_t>(at.step_in_epoch * k + micro), augment, true);
    } catch (const std::runtime_error&) {
      // A bad image: the other ranks hear of it at the agreement (kDataFailureStop), where
      // every rank throws; an asynchronous worker, with no agreement, throws now.
      if (!config_.stop_cuts_step || !hooks.after_forward) throw;
      data_error_ = std::current_exception();
      local.stop = kDataFailureStop;
      hooks.after_forward(local);
      return t;
    }
    const auto t1 = Clock::now();
    const std::uint64_t noise = derive_seed(
        config_.seed, {static_cast<std::uint64_t>(RngPurpose::kDropout), static_cast<std::uint64_t>(at.global_step),
                       static_cast<std::uint64_t>(rank_), static_cast<std::uint64_t>(micro)});
    const LossResult r = model_.forward(src_.data(), labels_.data(), static_cast<int>(n), Phase::kTrain, noise);
    const auto t2 = Clock::now();
    local.loss_sum += r.loss_sum;
    local.correct += static_cast<double>(r.correct);
    local.count += static_cast<double>(r.count);
    t.data += seconds_between(t0, t1);
    t.forward += seconds_between(t1, t2);
    if (last) {
      local.stop = stop_requested() ? 1.0 : 0.0;
      if (hooks.after_forward && !hooks.after_forward(local)) return t;
    }
    if (!last) {
      model_.backward();
      if (micro == 0) {
        std::copy(grads.begin(), grads.end(), accumulated_.begin());
      } else {
        for (std::size_t i = 0; i < grads.size(); ++i) accumulated_[i] += grads[i];
      }
    } else if (k == 1) {
      model_.backward(hooks.on_ready);
    } else {
      // The mean of K micro-batch means (the gradient of the mean over all K x B samples),
      // formed range by range as backward finishes them, so only this micro-batch overlaps.
      model_.backward([&](std::size_t offset, std::size_t count) {
        for (std::size_t i = offset; i < offset + count; ++i) grads[i] = (accumulated_[i] + grads[i]) * inv;
        if (hooks.on_ready) hooks.on_ready(offset, count);
      });
    }
    if (last && config_.straggler_ms > 0.0) {
      // Counted as backward: to the others this rank simply computes more slowly.
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(config_.straggler_ms));
    }
    t.backward += seconds_between(t2, Clock::now());
  }
  return t;
}

void TrainStep::update(double lr) {
  Optimizer::UpdateObserver observer = before_update_ ? before_update_() : nullptr;
  if (!observer) {
    optimizer_->step(model_.params(), model_.grads(), lr);
    return;
  }
  // For this update only, after the standing one (bf16's narrowing), which the next update
  // has alone again.
  Optimizer::UpdateObserver standing = standing_observer(model_);
  if (standing) {
    observer = [standing, observer = std::move(observer)](std::size_t offset, std::size_t count) {
      standing(offset, count);
      observer(offset, count);
    };
  }
  optimizer_->set_update_observer(std::move(observer));
  try {
    optimizer_->step(model_.params(), model_.grads(), lr);
  } catch (...) {
    optimizer_->set_update_observer(standing_observer(model_));
    throw;
  }
  optimizer_->set_update_observer(std::move(standing));
}

StepResult TrainStep::run(const LoopPosition& at, double lr, GradientSync& sync) {
  if (optimizer_ == nullptr) throw std::logic_error("TrainStep::run without an optimizer");
  StepResult result;
  sync.begin(model_.grads());
  Hooks hooks;
  hooks.after_forward = [&sync](StepTotals& totals) {
    sync.agree(totals);
    // Without overlap the sum is known here: a stopped step needs no backward.
    return sync.overlapped() || totals.stop == 0.0;
  };
  if (sync.overlapped()) hooks.on_ready = [&sync](std::size_t offset, std::size_t count) { sync.ready(offset, count); };
  result.times = compute_gradients(at, result.totals, hooks);
  SyncTimes s = sync.finish();
  result.times.allreduce = s.allreduce;
  result.times.exposed = s.exposed;
  result.times.wait = s.wait;
  result.comm_slices = std::move(s.slices);

  const StepTotals& sum = result.totals;
  throw_if_data_failure(sum, at, sync.comm());
  if (sum.stop > 0.0) {
    result.applied = false;
    return result;
  }
  if (!std::isfinite(sum.loss_sum)) {
    throw CollectiveError(fmt::format("loss became {} at step {} (epoch {}, step {} of {}); lower --lr",
                                      std::isnan(sum.loss_sum) ? "NaN" : "Inf", at.global_step + 1, at.epoch + 1,
                                      at.step_in_epoch + 1, steps_per_epoch_));
  }
  const auto t0 = Clock::now();
  update(lr);
  result.times.optimizer = seconds_between(t0, Clock::now());
  return result;
}

PhaseTimes TrainStep::compute_shards(const LoopPosition& at, StepTotals& local, ExactShardSum& sum) {
  if (sampler_.epoch() != static_cast<std::uint64_t>(at.epoch) || sampler_.indices().empty()) {
    sampler_.set_epoch(static_cast<std::uint64_t>(at.epoch));
  }
  const auto shards = static_cast<std::size_t>(config_.logical_shards);
  const std::uint64_t augment = augment_key(at);
  const auto buffers = model_.buffers();
  step_buffers_.assign(buffers.begin(), buffers.end());
  PhaseTimes t;
  local = {};
  for (int i = 0; i < sum.local_shards(); ++i) {
    if (config_.stop_cuts_step && stop_requested()) {
      local.stop = 1.0;  // the step will be discarded
      return t;
    }
    const auto shard = static_cast<std::size_t>(sum.first_shard() + i);
    const auto t0 = Clock::now();
    std::size_t n = 0;
    try {
      n = fetch(static_cast<std::uint64_t>(at.epoch), static_cast<std::size_t>(at.step_in_epoch) * shards + shard, augment,
                false);
    } catch (const std::runtime_error&) {
      data_error_ = std::current_exception();  // thrown on every rank after the agreement
      local.stop = kDataFailureStop;
      return t;
    }
    const auto t1 = Clock::now();
    // Each shard's batch statistics update the running ones from where the step began, as if
    // it were alone; ExactShardSum averages the S results in shard order.
    std::copy(step_buffers_.begin(), step_buffers_.end(), buffers.begin());
    const std::uint64_t noise =
        derive_seed(config_.seed, {static_cast<std::uint64_t>(RngPurpose::kDropout),
                                   static_cast<std::uint64_t>(at.global_step), shards, shard});
    const LossResult r = model_.forward(src_.data(), labels_.data(), static_cast<int>(n), Phase::kTrain, noise);
    const auto t2 = Clock::now();
    local.loss_sum += r.loss_sum;
    local.correct += static_cast<double>(r.correct);
    local.count += static_cast<double>(r.count);
    model_.backward();
    const auto t3 = Clock::now();
    // Keeping the shard's gradient and its max |g| is the exact sum's work, not backward's.
    sum.add(i, model_.grads(), buffers);
    const double kept = seconds_between(t3, Clock::now());
    t.data += seconds_between(t0, t1);
    t.forward += seconds_between(t1, t2);
    t.backward += seconds_between(t2, t3);
    t.allreduce += kept;
    t.exposed += kept;
    t.convert += kept;
  }
  if (config_.straggler_ms > 0.0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(config_.straggler_ms));
  }
  local.stop = stop_requested() ? 1.0 : 0.0;
  return t;
}

StepResult TrainStep::run_shards(const LoopPosition& at, double lr, ExactShardSum& sum) {
  if (optimizer_ == nullptr) throw std::logic_error("TrainStep::run_shards without an optimizer");
  StepResult result;
  sum.begin();
  result.times = compute_shards(at, result.totals, sum);
  const auto t0 = Clock::now();
  sum.agree(result.totals);
  const double agreement = seconds_between(t0, Clock::now());
  result.times.allreduce += agreement;
  result.times.exposed += agreement;
  const StepTotals& total = result.totals;
  throw_if_data_failure(total, at, sum.comm());
  if (total.stop > 0.0) {
    std::copy(step_buffers_.begin(), step_buffers_.end(), model_.buffers().begin());  // the step is discarded
    result.applied = false;
    return result;
  }
  if (!std::isfinite(total.loss_sum)) {
    throw CollectiveError(fmt::format("loss became {} at step {} (epoch {}, step {} of {}); lower --lr",
                                      std::isnan(total.loss_sum) ? "NaN" : "Inf", at.global_step + 1, at.epoch + 1,
                                      at.step_in_epoch + 1, steps_per_epoch_));
  }
  SyncTimes s = sum.reduce(model_.grads(), model_.buffers());
  result.times.allreduce += s.allreduce;
  result.times.exposed += s.exposed;
  result.times.wait = s.wait;
  result.times.convert += s.convert;
  result.comm_slices = std::move(s.slices);
  const auto t1 = Clock::now();
  update(lr);
  result.times.optimizer = seconds_between(t1, Clock::now());
  return result;
}

}  // namespace ringtrain
