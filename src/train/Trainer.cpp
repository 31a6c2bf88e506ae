// The synchronous data-parallel loop: set-up (data, model, broadcast, configuration check,
// resume), then epochs of TrainStep::run with what every run does around its steps
// (TrainingRun: evaluation, checkpoints, stops, logs). --mode async runs AsyncTrainer.
#include "train/Trainer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "async/AsyncTrainer.h"
#include "collectives/AllreduceCostModel.h"
#include "collectives/CostModelFile.h"
#include "collectives/StallRecord.h"
#include "common/CollectiveError.h"
#include "checkpoint/CheckpointIo.h"
#include "checkpoint/SnapshotStore.h"
#include "run/Agreement.h"
#include "run/Versions.h"
#include "train/TrainerState.h"

namespace ringtrain {

Trainer::Trainer(TrainConfig config, Communicator& comm) : s_(std::make_unique<State>(std::move(config), comm)) {}
Trainer::~Trainer() = default;

const Model& Trainer::model() const { return async_ ? async_->model() : s_->model(); }

void Trainer::remove_snapshots() {
  if (!async_) s_->remove_snapshots();
}

TrainResult Trainer::run() {
  if (s_->config.mode == "async") {
    async_ = std::make_unique<AsyncTrainer>(s_->config, s_->comm);
    return async_->run();
  }
  s_->setup();
  return s_->train();
}

TrainResult Trainer::State::train() {
  TrainStep step = make_step();
  const std::int64_t steps_per_epoch = step.steps_per_epoch();
  begin_training();
  last_resource = {Clock::now(), comm.bytes_sent(), comm.bytes_received(), comm.wait_seconds()};
  announce();

  bool stop = false;
  while (!stop && pos.epoch < config.epochs) {
    begin_epoch(pos.epoch, steps_per_epoch);
    while (!stop && pos.step_in_epoch < steps_per_epoch) stop = train_one_step(step, steps_per_epoch);
    if (pos.step_in_epoch < steps_per_epoch) {  // stopped mid-epoch: no epoch summary
      note_stopped_mid_epoch(pos.epoch, pos.global_step);
      break;
    }
    stop = end_epoch(pos.epoch, pos.global_step, steps_per_epoch, stop) || stop;
    pos = pos.next_epoch();
    epoch_totals = {};
    if (checkpoint_due_after_epoch(pos.epoch, pos.global_step)) checkpoint_now();
    log->flush();
  }
  finish(pos.epoch, pos.global_step);
  const LoaderStats loaders = step.loader_stats();
  loader_row = {static_cast<double>(step.loader_threads()), loaders.busy_seconds, loaders.wall_seconds};
  samples_per_epoch = step.samples_per_epoch();
  if (snapshots) snapshots->finish();
  flush_steps();
  write_summary();
  log->flush();
  return result;
}

bool Trainer::State::train_one_step(TrainStep& step, std::int64_t steps_per_epoch) {
  StallRecord::instance().set_step(pos.global_step + 1);  // what the stall watchdog reports
  const double lr = schedule->lr(static_cast<double>(pos.epoch) +
                                 static_cast<double>(pos.step_in_epoch) / static_cast<double>(steps_per_epoch));
  const double step_start = elapsed();
  StepResult r = shard_sum ? step.run_shards(pos, lr, *shard_sum) : step.run(pos, lr, *sync);
  pending.slices.clear();
  for (const auto& [a, b] : r.comm_slices) pending.slices.emplace_back(step_start + a, step_start + b);
  if (!r.applied) {
    if (snapshots) snapshots->disarm();  // no update ran (arm() comes just before it): for safety
    stop_inside_step(r);
    return true;
  }
  pos = pos.after_step();
  epoch_totals.loss_sum += r.totals.loss_sum;
  epoch_totals.correct += r.totals.correct;
  epoch_totals.count += r.totals.count;
  const bool step_limit = config.max_steps > 0 && pos.global_step >= config.max_steps;
  if (step_limit) {
    result.stopped_by = "max_steps";
    epoch_totals.seconds = epoch_seconds();
  }
  if (checkpoint_due_after_step(pos.global_step)) {
    epoch_totals.seconds = epoch_seconds();
    r.times.checkpoint = checkpoint_now();
  }
  // Timed only at the steps where snapshots do something, and in CPU time only at the
  // snapshot steps: a thread CPU clock is a system call (no vDSO), ~10 us on this project's
  // VMs, twice per step was 1.6% of lenet5's step; between snapshots a leader that exchanges
  // with other nodes only tests and probes (its digests are 40 bytes, SnapshotWriter.h),
  // which the wall clock (vDSO) times.
  const bool snapshot_due = snapshots && pos.global_step % config.snapshot_every == 0;
  if (snapshot_due || (snapshots && snapshots->exchanges())) {
    const auto t0 = Clock::now();
    const double cpu0 = snapshot_due ? SnapshotWriter::thread_cpu_seconds() : 0.0;
    if (snapshot_due) take_snapshot();
    const StallPhase phase("snapshot exchange");
    snapshots->progress();
    snapshot_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    if (snapshot_due) snapshot_cpu_seconds += SnapshotWriter::thread_cpu_seconds() - cpu0;
  }
  if (snapshots) snapshots->warm();  // once, after this launch's first step (SnapshotWriter.h)
  log_step(r, lr, step_limit || pos.step_in_epoch == steps_per_epoch);
  note_first_step(pos.global_step);
  maybe_record_resources();
  progress->step(pos.step_in_epoch, r.totals.loss_sum / r.totals.count,
                 epoch_totals.count / std::max(epoch_seconds(), 1e-9));
  return step_limit;
}

void Trainer::State::stop_inside_step(StepResult& r) {
  // A stop was agreed inside this step: its update is discarded, and the checkpoint holds
  // the last completed step (resuming redoes this one, bit-identically).
  result.stopped_by = "signal";
  epoch_totals.seconds = epoch_seconds();
  flush_steps();
  r.times.checkpoint = checkpoint_now();
  totals += r.times;
}

TrainStep Trainer::State::make_step() {
  // A crop is the folder's augmentation: training draws it from the step's augment key.
  TrainStepConfig step_config{config.batch_size, config.accumulate, config.seed,
                              config.data.augment || config.data.crop.size > 0};
  step_config.loader_threads = loader_threads();
  step_config.prefetch = config.prefetch;
  step_config.logical_shards = config.logical_shards;
  if (config.shuffle == "block")
    step_config.shuffle_block_bytes = static_cast<std::uint64_t>(std::llround(config.shuffle_block_mb * 1e6));
  if (rank == world - 1) step_config.straggler_ms = config.straggler_ms;  // the last rank, as in async mode
  TrainStep step(*model_, *optimizer, *data.train, step_config, rank, world);
  // The update of a step whose end takes a snapshot writes the new state into the snapshot
  // file block by block, from cache (SnapshotWriter::arm). Otherwise (or when it cannot) a
  // snapshot's thread copies the parameters and optimizer state after take() returns;
  // nothing else writes them while the loop runs (the set-up's broadcast and resume come
  // before the writer exists; evaluation and checkpoints only read them; finish() and the
  // writer's destructor, before the model's, wait for the thread).
  step.set_before_update([this]() -> Optimizer::UpdateObserver {
    if (!snapshots) return nullptr;
    snapshots->fence();
    if ((pos.global_step + 1) % config.snapshot_every != 0) return nullptr;  // pos: before this step
    if (!snapshots->arm(std::as_const(*model_).params(), optimizer->state(), std::as_const(*model_).buffers().size_bytes())) {
      return nullptr;
    }
    return [w = snapshots.get()](std::size_t offset, std::size_t count) { w->capture(offset, count); };
  });
  return step;
}

std::string Trainer::State::batch_text() const {
  if (config.logical_shards > 0) {
    return fmt::format("{} rank(s) x {} logical shard(s) of batch {} ({} shards, exact int64 gradient sum)", world,
                       config.logical_shards / world, config.batch_size, config.logical_shards);
  }
  return fmt::format("{} rank(s) x batch {}{}", world, config.batch_size,
                     config.accumulate > 1 ? fmt::format(" x accumulate {}", config.accumulate) : std::string());
}

void Trainer::State::announce() {
  if (!root()) return;
  if (pos.global_step == 0) {
    progress->note(fmt::format("ringtrain: {} on {} ({} train / {} test, {}{}), {}, {} params, all-reduce {}{}{}, {}",
                               config.model, config.data.name, data.train->size(), data.test->size(),
                               data.train->shape().str(),
                               loader_threads() > 0 ? fmt::format(", {} loader thread(s)", loader_threads()) : "",
                               batch_text(), model_->num_params(),
                               config.logical_shards > 0 ? "mpi (int64)" : config.allreduce,
                               config.logical_shards > 0 ? std::string() : plan_text(),
                               overlap ? " overlapped with backward" : "", placement()));
  }
  if (config.logical_shards > 0) {
    if (config.overlap != "off" && world > 1) {
      progress->note(
          "ringtrain: note: --logical-shards sums the gradients once, after the last local shard (the scale needs "
          "every shard's max): --overlap off");
    }
  } else if (config.overlap == "auto" && world > 1 && !overlap_policy.pays()) {
    progress->note(overlap_policy.why_off());
  } else if (config.overlap != "off" && world > 1 && !overlap) {
    progress->note(
        "ringtrain: note: the MPI library does not allow MPI calls from a second thread (MPI_THREAD_SERIALIZED): "
        "--overlap off");
  }
}

void Trainer::State::resolve_batch() {
  const int shards = config.logical_shards;
  if (shards > 0 && shards % world != 0) {
    throw std::invalid_argument(fmt::format(
        "--logical-shards {} is not divisible by the {} ranks: run at a rank count that divides it", shards, world));
  }
  if (config.global_batch_size > 0) {
    // The global batch is what one optimizer step sees: ranks x micro-batches x batch, or
    // S shards x batch.
    const int parts = shards > 0 ? shards : world * config.accumulate;
    if (config.global_batch_size % parts != 0) {
      throw std::invalid_argument(
          shards > 0 ? fmt::format("--global-batch-size {} is not divisible by --logical-shards {}",
                                   config.global_batch_size, shards)
          : config.accumulate == 1
              ? fmt::format("--global-batch-size {} is not divisible by the {} ranks", config.global_batch_size,
                            world)
              : fmt::format("--global-batch-size {} is not divisible by the {} ranks x --accumulate {}",
                            config.global_batch_size, world, config.accumulate));
    }
    config.batch_size = config.global_batch_size / parts;
  }
}

int Trainer::State::global_batch() const {
  return config.logical_shards > 0 ? config.batch_size * config.logical_shards
                                   : config.batch_size * world * config.accumulate;
}

void Trainer::State::check_steps_per_epoch() const {
  const std::size_t n = data.train->size();
  if (config.logical_shards > 0) {
    if (n / static_cast<std::size_t>(global_batch()) == 0) {
      throw std::invalid_argument(fmt::format(
          "--batch-size {} x --logical-shards {} is larger than the training set ({} samples): no step would run",
          config.batch_size, config.logical_shards, n));
    }
    return;
  }
  const std::size_t per_rank = n / static_cast<std::size_t>(world);
  if (per_rank / static_cast<std::size_t>(config.batch_size) / static_cast<std::size_t>(config.accumulate) == 0) {
    throw std::invalid_argument(fmt::format(
        "--batch-size {} x --accumulate {} is larger than each rank's share of the training set ({} of {} "
        "samples over {} ranks): no step would run",
        config.batch_size, config.accumulate, per_rank, n, world));
  }
}

void Trainer::State::setup_local() {
  config.validate();
  algo = parse_allreduce_algo(config.allreduce);
  resolve_batch();
  if (config.lr_scaling == "linear") {
    const int base = config.lr_base_batch > 0 ? config.lr_base_batch : config.batch_size;
    config.schedule.base_lr = scale_lr_linear(config.schedule.base_lr, global_batch(), base);
    // Goyal et al.'s gradual warmup starts from the unscaled rate.
    config.schedule.warmup_start_factor = static_cast<double>(base) / global_batch();
  }
  load_data_and_model();
  optimizer = Optimizer::create(config.optimizer, model_->param_infos(), model_->num_params());
  // The communication thread makes MPI calls: only if the library allows that; `auto` also
  // asks whether it can hide anything here (OverlapPolicy). Logical shards reduce once,
  // after the last local shard's backward (the exact sum needs every shard's max first).
  const bool wanted = config.overlap == "on" || (config.overlap == "auto" && overlap_policy.pays());
  overlap = wanted && world > 1 && comm.allows_serialized_threads() && config.logical_shards == 0;
  sync = std::make_unique<GradientSync>(comm, algo, model_->num_params(), config.bucket_mb, overlap,
                                        parse_compression(config.compress));
  if (config.logical_shards > 0) {
    shard_sum = std::make_unique<ExactShardSum>(comm, sync->buckets(), model_->num_params(),
                                                model_->buffers().size(), config.logical_shards);
  }
  check_steps_per_epoch();
}

void Trainer::State::setup() {
  identify();
  // How the ranks share nodes (MPI's locality) decides what --overlap auto does; setup_local
  // builds GradientSync with it.
  overlap_policy = OverlapPolicy::here(world, comm.ranks_on_node(), threads_per_rank());
  // Everything before the first collective is local and alike on every rank; a failure
  // anywhere (bad flag, missing data on one node) reaches every rank as the same error.
  run_agreed(comm, [&] { setup_local(); });
  // The cost model auto chooses by: read on every rank, the same everywhere or an error
  // on every rank (a tuning file missing or different on one node).
  try {
    comm.set_cost_model(read_cost_model_everywhere(comm, config.tuning));
  } catch (const std::runtime_error& e) {
    throw CollectiveError(e.what(), 1);
  }
  agree_on_start();
  choose_run_dir("");
  // The default is rank 0's (it names the run); a --snapshot-dir is each node's own path, as
  // --data-dir is (each node has its own RAM, and tests give each emulated node its own).
  snapshot_root = config.snapshot_dir.empty() ? std::filesystem::path(broadcast_string(
                                                    comm, default_snapshot_root(run_dir).string(), 0))
                                              : std::filesystem::path(config.snapshot_dir);
  maybe_resume();
  Json j = base_config_json();
  j.set("global_batch_size", global_batch());
  j.set("buckets", sync->buckets().size());
  j.set("overlap_active", overlap);
  j.set("snapshot_dir", snapshot_root.string());
  open_logs(/*append=*/pos.global_step > 0, config.tensorboard, j);
  setup_snapshots();
}

void Trainer::State::gather_model() {
  // Logical shards: every rank already holds the same buffers (the mean over shards), and
  // a mean over ranks of equal values need not give them back bit for bit.
  if (config.logical_shards == 0 && world > 1 && !model_->buffers().empty()) comm.allreduce(model_->buffers(), AllreduceAlgo::kMpi, /*mean=*/true);
}

}  // namespace ringtrain
