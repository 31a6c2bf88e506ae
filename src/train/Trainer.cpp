// The training loop: set-up (data, model, broadcast, configuration check, resume), then
// epochs of TrainStep::run with stopping, evaluation, logging and checkpoints around it.
#include "train/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "collectives/StallRecord.h"
#include "common/Random.h"
#include "nn/Model.h"
#include "optim/LrSchedule.h"
#include "optim/Optimizer.h"
#include "checkpoint/Checkpoint.h"
#include "run/Agreement.h"
#include "checkpoint/CheckpointIo.h"
#include "run/Evaluate.h"
#include "overlap/GradientSync.h"
#include "logs/Progress.h"
#include "logs/ResourceMonitor.h"
#include "logs/RunLog.h"
#include "tensorboard/TensorBoardLog.h"
#include "async/AsyncTrainer.h"
#include "run/StopSignals.h"
#include "run/TrainerShared.h"
#include "train/TrainerState.h"
#include "step/TrainStep.h"
#include "run/Versions.h"

namespace ringtrain {
Trainer::Trainer(TrainConfig config, Communicator& comm) : s_(std::make_unique<State>(std::move(config), comm)) {}
Trainer::~Trainer() = default;

const Model& Trainer::model() const {
  if (async_) return async_->model();
  if (!s_->model) throw std::logic_error("Trainer::model() before run()");
  return *s_->model;
}

TrainResult Trainer::run() {
  if (s_->config.mode == "async") {
    async_ = std::make_unique<AsyncTrainer>(s_->config, s_->comm);
    return async_->run();
  }
  s_->setup();
  return s_->train();
}

void Trainer::State::setup_local() {
  config.validate();
  algo = parse_allreduce_algo(config.allreduce);

  if (config.global_batch_size > 0) {
    // The global batch is what one optimizer step sees: ranks x micro-batches x batch.
    const int parts = world * config.accumulate;
    if (config.global_batch_size % parts != 0) {
      throw std::invalid_argument(
          config.accumulate == 1
              ? fmt::format("--global-batch-size {} is not divisible by the {} ranks", config.global_batch_size,
                            world)
              : fmt::format("--global-batch-size {} is not divisible by the {} ranks x --accumulate {}",
                            config.global_batch_size, world, config.accumulate));
    }
    config.batch_size = config.global_batch_size / parts;
  }
  const int global_batch = config.batch_size * world * config.accumulate;
  // The cosine schedule anneals over the whole run, whoever built the configuration.
  config.schedule.total_epochs = config.epochs;
  if (config.lr_scaling == "linear") {
    const int base = config.lr_base_batch > 0 ? config.lr_base_batch : config.batch_size;
    config.schedule.base_lr = scale_lr_linear(config.schedule.base_lr, global_batch, base);
    // Goyal et al.'s gradual warmup starts from the unscaled rate.
    config.schedule.warmup_start_factor = static_cast<double>(base) / global_batch;
  }
  if (config.eval_batch_size == 0) config.eval_batch_size = std::max(config.batch_size, 256);

  data = load_dataset(config.data);
  config.check_batch_memory(data.train->shape());  // sizes from flags, before any allocation
  model = std::make_unique<Model>(config.model, data.train->shape(), data.train->classes());
  model->init(config.seed);

  optimizer = Optimizer::create(config.optimizer, model->param_infos(), model->num_params());
  schedule = std::make_unique<LrSchedule>(config.schedule);
  // The communication thread makes MPI calls: only if the library allows that; `auto` also
  // asks whether it can hide anything here (OverlapPolicy).
  const bool wanted = config.overlap == "on" || (config.overlap == "auto" && overlap_policy.pays());
  overlap = wanted && world > 1 && comm.allows_serialized_threads();
  sync = std::make_unique<GradientSync>(comm, algo, model->num_params(), config.bucket_mb, overlap,
                                        parse_compression(config.compress));

  const std::size_t per_rank = data.train->size() / static_cast<std::size_t>(world);
  if (per_rank / static_cast<std::size_t>(config.batch_size) / static_cast<std::size_t>(config.accumulate) == 0) {
    throw std::invalid_argument(fmt::format(
        "--batch-size {} x --accumulate {} is larger than each rank's share of the training set ({} of {} "
        "samples over {} ranks): no step would run",
        config.batch_size, config.accumulate, per_rank, data.train->size(), world));
  }
}

void Trainer::State::setup() {
  rank = comm.rank();
  world = comm.size();
  hosts = comm.allgather(comm.host_name());
  // How the ranks share nodes (MPI's locality) decides what --overlap auto does; setup_local
  // builds GradientSync with it.
  overlap_policy = OverlapPolicy::here(world, comm.ranks_on_node(), threads_per_rank());
  // Everything before the first collective is local and alike on every rank; a failure
  // anywhere (bad flag, missing data on one node) reaches every rank as the same error.
  run_agreed(comm, [&] { setup_local(); });

  // Before any collective whose size depends on the model: ranks with other flags or data
  // shapes would otherwise meet in a broadcast of different lengths.
  check_configuration_agrees(comm, config, *model);

  // Same start everywhere: rank 0's parameters (identical anyway from the seed, but a
  // broadcast makes that a guarantee rather than an assumption).
  comm.broadcast(model->params(), 0);
  if (!model->buffers().empty()) comm.broadcast(model->buffers(), 0);

  // One run directory name for all ranks: rank 0's clock decides.
  std::string dir = config.run_dir.empty() ? default_run_dir(config.model, world) : config.run_dir;
  dir = broadcast_string(comm, dir, 0);
  run_dir = dir;
  checkpoint_dir = config.checkpoint_dir.empty() ? run_dir / "checkpoints" : std::filesystem::path(config.checkpoint_dir);

  maybe_resume();

  const std::string versions = root() ? versions_json(comm).dump() : std::string();
  run_agreed(comm, [&] {
    log = std::make_unique<RunLog>(run_dir, rank, root(), /*append=*/pos.global_step > 0);
    if (config.tensorboard) {
      log->add_sink(std::make_unique<TensorBoardLog>(run_dir, rank, world, log->appending()));
    }
    progress = std::make_unique<Progress>(root() && !config.quiet, config.epochs, Progress::parse_style(config.progress));

    if (root()) {
      Json j = base_config_json(config, world, hosts, data, *model, checkpoint_dir, versions);
      j.set("global_batch_size", config.batch_size * world * config.accumulate);
      j.set("buckets", sync->buckets().size());
      j.set("overlap_active", overlap);
      log->write_json("config.json", j);
      if (!config.rerun_config.empty()) log->write_text("config.toml", config.rerun_config);
    }
  });
}

void Trainer::State::average_buffers() {
  if (world > 1 && !model->buffers().empty()) comm.allreduce(model->buffers(), AllreduceAlgo::kMpi, /*mean=*/true);
}

std::pair<double, double> Trainer::State::evaluate() {
  average_buffers();
  const EvalResult r = evaluate_model(comm, *model, *data.test, config.eval_batch_size);
  return {r.loss, r.accuracy};
}

TrainResult Trainer::State::train() {
  TrainResult result;
  result.run_dir = run_dir;
  result.stopped_by = "epochs";

  TrainStepConfig step_config{config.batch_size, config.accumulate, config.seed, config.data.augment};
  if (rank == world - 1) step_config.straggler_ms = config.straggler_ms;  // the last rank, as in async mode
  TrainStep step(*model, *optimizer, *data.train, step_config, rank, world);
  const std::int64_t steps_per_epoch = step.steps_per_epoch();
  const std::int64_t images_per_step = static_cast<std::int64_t>(config.batch_size) * config.accumulate;

  // From here a stop signal is a request this loop answers after the step (StopSignals.h).
  set_stop_signals_polled(true);
  train_start = Clock::now();
  last_resource = {Clock::now(), comm.bytes_sent(), comm.bytes_received(), comm.wait_seconds()};

  // One rank-<r>.jsonl step record gathers up to --log-every steps.
  PhaseTimes pending;
  int pending_steps = 0;
  double pending_loss = 0.0;
  double pending_accuracy = 0.0;
  double pending_lr = 0.0;  // the last step's
  std::vector<std::pair<double, double>> last_slices;  // the last step's communication, elapsed() clock
  const auto flush_pending = [&] {
    if (pending_steps == 0) return;
    record_steps(pending, pending_steps, pending_loss / pending_steps, pending_accuracy / pending_steps, pending_lr,
                 pending_steps * images_per_step, last_slices);
    totals += pending;
    pending = {};
    pending_steps = 0;
    pending_loss = pending_accuracy = 0.0;
  };
  bool stop = false;

  if (root() && pos.global_step == 0) {
    progress->note(fmt::format("ringtrain: {} on {} ({} train / {} test, {}), {} rank(s) x batch {}{}, {} params, "
                               "all-reduce {}{}, run dir {}",
                               config.model, config.data.name, data.train->size(), data.test->size(),
                               data.train->shape().str(), world, config.batch_size,
                               config.accumulate > 1 ? fmt::format(" x accumulate {}", config.accumulate) : std::string(),
                               model->num_params(), config.allreduce, overlap ? " overlapped with backward" : "",
                               run_dir.string()));
  }
  if (root() && config.overlap == "auto" && world > 1 && !overlap_policy.pays()) {
    progress->note(overlap_policy.why_off());
  } else if (root() && config.overlap != "off" && world > 1 && !overlap) {
    progress->note(
        "ringtrain: note: the MPI library does not allow MPI calls from a second thread (MPI_THREAD_SERIALIZED): "
        "--overlap off");
  }

  while (pos.epoch < config.epochs && !stop) {
    progress->begin_epoch(pos.epoch + 1, steps_per_epoch);
    const auto epoch_start = Clock::now();
    const double epoch_seconds_before = epoch_totals.seconds;
    const auto epoch_seconds = [&] { return epoch_seconds_before + seconds_since(epoch_start); };

    while (pos.step_in_epoch < steps_per_epoch) {
      StallRecord::instance().set_step(pos.global_step + 1);  // what the stall watchdog reports
      const double lr = schedule->lr(static_cast<double>(pos.epoch) +
                                     static_cast<double>(pos.step_in_epoch) / static_cast<double>(steps_per_epoch));
      const double step_start = elapsed();
      StepResult r = step.run(pos, lr, *sync);
      last_slices.clear();
      for (const auto& [a, b] : r.comm_slices) last_slices.emplace_back(step_start + a, step_start + b);

      if (!r.applied) {
        // A stop was agreed inside this step: its update is discarded, and the checkpoint
        // holds the last completed step (resuming redoes this one, bit-identically).
        stop = true;
        result.stopped_by = "signal";
        epoch_totals.seconds = epoch_seconds();
        flush_pending();
        r.times.checkpoint = save_checkpoint(pos, epoch_totals);
        totals += r.times;
        break;
      }
      pos = pos.after_step();
      epoch_totals.loss_sum += r.totals.loss_sum;
      epoch_totals.correct += r.totals.correct;
      epoch_totals.count += r.totals.count;
      const bool step_limit = config.max_steps > 0 && pos.global_step >= config.max_steps;
      if (config.checkpoint_every_steps > 0 && pos.global_step % config.checkpoint_every_steps == 0) {
        epoch_totals.seconds = epoch_seconds();
        r.times.checkpoint = save_checkpoint(pos, epoch_totals);
      }

      pending += r.times;
      ++pending_steps;
      pending_loss += r.totals.loss_sum / r.totals.count;
      pending_accuracy += r.totals.correct / r.totals.count;
      pending_lr = lr;
      if (pending_steps >= config.log_every || step_limit || pos.step_in_epoch == steps_per_epoch) flush_pending();
      maybe_record_resources();
      progress->step(pos.step_in_epoch, r.totals.loss_sum / r.totals.count,
                     epoch_totals.count / std::max(epoch_seconds(), 1e-9));
      if (step_limit) {
        result.stopped_by = "max_steps";
        stop = true;
        epoch_totals.seconds = epoch_seconds();
        break;
      }
    }
    if (stop && pos.step_in_epoch < steps_per_epoch) {
      // Stopped mid-epoch: no epoch summary; the checkpoint (if any) holds the position.
      if (result.stopped_by == "signal") {
        progress->note(fmt::format("ringtrain: stopped by signal after step {} (epoch {}); checkpoint {}",
                                   pos.global_step, pos.epoch + 1, last_checkpoint.string()));
      }
      break;
    }

    epoch_totals.seconds = epoch_seconds();
    const double train_loss = epoch_totals.loss_sum / std::max(epoch_totals.count, 1.0);
    const double train_acc = epoch_totals.correct / std::max(epoch_totals.count, 1.0);
    last_train_loss = train_loss;
    const double images_per_s = epoch_totals.count / std::max(epoch_totals.seconds, 1e-9);

    EpochMetrics m;
    m.epoch = pos.epoch + 1;
    m.step = pos.global_step;
    m.lr = schedule->lr(static_cast<double>(pos.epoch) + 1.0 - 1.0 / static_cast<double>(steps_per_epoch));
    m.train_loss = train_loss;
    m.train_accuracy = train_acc;
    m.test_loss = std::nan("");
    m.test_accuracy = std::nan("");
    const bool last_epoch = pos.epoch + 1 == config.epochs || stop;
    if ((config.eval_every > 0 && (pos.epoch + 1) % config.eval_every == 0) || last_epoch ||
        config.target_accuracy > 0.0) {
      const auto te = Clock::now();
      std::tie(last_test_loss, last_test_accuracy) = evaluate();
      last_eval_step = pos.global_step;
      const double eval_s = seconds_since(te);
      totals.eval += eval_s;
      m.test_loss = last_test_loss;
      m.test_accuracy = last_test_accuracy;
      record_eval(eval_s);
    }
    m.elapsed_s = elapsed();
    m.images_per_s = images_per_s;
    if (root()) log->metrics(m);
    progress->end_epoch(epoch_line(m, config.epochs, epoch_totals.seconds));
    result.epochs_completed = pos.epoch + 1;

    if (config.target_accuracy > 0.0 && last_test_accuracy >= config.target_accuracy) {
      result.time_to_target_s = elapsed();
      result.stopped_by = "target_accuracy";
      progress->note(fmt::format("ringtrain: reached test accuracy {:.4f} >= {} after {:.1f}s (epoch {}, step {})",
                                 last_test_accuracy, config.target_accuracy, *result.time_to_target_s, pos.epoch + 1,
                                 pos.global_step));
      record_event(fmt::format("target accuracy {} reached", config.target_accuracy));
      stop = true;
    }
    pos = pos.next_epoch();
    epoch_totals = {};
    if (config.checkpoint_every > 0 && pos.epoch % config.checkpoint_every == 0 &&
        !(config.checkpoint_every_steps > 0 && pos.global_step % config.checkpoint_every_steps == 0)) {
      totals.checkpoint += save_checkpoint(pos, epoch_totals);
    }
    log->flush();
  }
  if (result.epochs_completed == 0 && pos.epoch > 0) result.epochs_completed = pos.epoch;

  result.steps = pos.global_step;
  if (last_eval_step != pos.global_step && result.stopped_by != "signal") {
    // Stopped mid-epoch (--max-steps): the final figures are of the final parameters.
    const auto te = Clock::now();
    std::tie(last_test_loss, last_test_accuracy) = evaluate();
    totals.eval += seconds_since(te);
    if (root()) {
      EpochMetrics m;
      m.epoch = pos.epoch + 1;
      m.step = pos.global_step;
      m.lr = schedule->lr(static_cast<double>(pos.epoch));
      m.train_loss = epoch_totals.count > 0 ? epoch_totals.loss_sum / epoch_totals.count : std::nan("");
      m.train_accuracy = epoch_totals.count > 0 ? epoch_totals.correct / epoch_totals.count : std::nan("");
      m.test_loss = last_test_loss;
      m.test_accuracy = last_test_accuracy;
      m.elapsed_s = elapsed();
      m.images_per_s = epoch_totals.count / std::max(epoch_totals.seconds, 1e-9);
      log->metrics(m);
    }
    progress->note(fmt::format("ringtrain: stopped at step {} (--max-steps): test loss {:.4f} acc {:.4f}",
                               pos.global_step, last_test_loss, last_test_accuracy));
  }
  // Stopped before any epoch ended: the train loss of the steps this epoch did take.
  if (std::isnan(last_train_loss) && epoch_totals.count > 0) last_train_loss = epoch_totals.loss_sum / epoch_totals.count;
  result.final_train_loss = last_train_loss;
  result.final_test_loss = last_test_loss;
  result.final_test_accuracy = last_test_accuracy;
  result.wall_s = elapsed();
  result.last_checkpoint = last_checkpoint;
  flush_pending();
  write_summary(result);
  log->flush();
  return result;
}

}  // namespace ringtrain
