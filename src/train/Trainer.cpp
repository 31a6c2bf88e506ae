// The training loop: set-up (data, model, broadcast, configuration check, resume), then per
// step data -> forward -> backward -> gradient all-reduce -> optimizer, with evaluation,
// logging and checkpoints around it.
#include "train/Trainer.h"

#include <csignal>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <vector>

#include <fmt/format.h>

#include "collectives/StallRecord.h"
#include "common/Random.h"
#include "datasets/DistributedSampler.h"
#include "nn/Model.h"
#include "optim/LrSchedule.h"
#include "optim/Optimizer.h"
#include "train/Checkpoint.h"
#include "train/Agreement.h"
#include "train/CheckpointIo.h"
#include "train/Evaluate.h"
#include "train/GradientSync.h"
#include "train/Progress.h"
#include "train/ResourceMonitor.h"
#include "train/RunLog.h"
#include "train/TrainerState.h"
#include "train/Versions.h"

namespace ringtrain {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int) { g_stop.store(true, std::memory_order_relaxed); }

std::string default_run_dir(const std::string& model, int world) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("runs/{}-{}-np{}", stamp, model, world);
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  // Restart interrupted system calls: a signal must not turn a log write or an fsync into
  // an error; the flag is looked at between steps.
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}
void request_stop() noexcept { g_stop.store(true, std::memory_order_relaxed); }
bool stop_requested() noexcept { return g_stop.load(std::memory_order_relaxed); }
void clear_stop_request() noexcept { g_stop.store(false, std::memory_order_relaxed); }

std::uint64_t fingerprint64(std::string_view text) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

Trainer::Trainer(TrainConfig config, Communicator& comm) : s_(std::make_unique<State>(std::move(config), comm)) {}
Trainer::~Trainer() = default;

const Model& Trainer::model() const {
  if (!s_->model) throw std::logic_error("Trainer::model() before run()");
  return *s_->model;
}

TrainResult Trainer::run() {
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
  if (config.lr_scaling == "linear") {
    const int base = config.lr_base_batch > 0 ? config.lr_base_batch : config.batch_size;
    config.schedule.base_lr = scale_lr_linear(config.schedule.base_lr, global_batch, base);
    // Goyal et al.'s gradual warmup starts from the unscaled rate.
    config.schedule.warmup_start_factor = static_cast<double>(base) / global_batch;
  }
  if (config.eval_batch_size == 0) config.eval_batch_size = std::max(config.batch_size, 256);

  data = load_dataset(config.data);
  config.check_batch_memory(data.train->shape());
  model = std::make_unique<Model>(config.model, data.train->shape(), data.train->classes());
  model->init(config.seed);

  optimizer = Optimizer::create(config.optimizer, model->param_infos(), model->num_params());
  schedule = std::make_unique<LrSchedule>(config.schedule);
  sync = std::make_unique<GradientSync>(comm, algo, model->num_params(), config.bucket_mb);

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
  // Everything before the first collective is local and alike on every rank; a failure
  // anywhere (bad flag, missing data on one node) reaches every rank as the same error.
  run_agreed(comm, [&] { setup_local(); });

  // Before any collective whose size depends on the model: ranks with other flags or data
  // shapes would otherwise meet in a broadcast of different lengths.
  check_configuration_agrees();

  // Same start everywhere: rank 0's parameters (identical anyway from the seed, but a
  // broadcast makes that a guarantee rather than an assumption).
  comm.broadcast(model->params(), 0);
  if (!model->buffers().empty()) comm.broadcast(model->buffers(), 0);

  // One run directory name for all ranks: rank 0's clock decides.
  std::string dir = config.run_dir.empty() ? default_run_dir(config.model, world) : config.run_dir;
  dir = broadcast_string(comm, dir, 0);
  run_dir = dir;
  checkpoint_dir = config.checkpoint_dir.empty() ? run_dir / "checkpoints" : std::filesystem::path(config.checkpoint_dir);
  hosts = comm.allgather(comm.host_name());

  maybe_resume();

  const std::string versions = root() ? versions_json(comm).dump() : std::string();
  run_agreed(comm, [&] {
    log = std::make_unique<RunLog>(run_dir, rank, root(), /*append=*/global_step > 0);
    progress = std::make_unique<Progress>(root() && !config.quiet, config.epochs, Progress::parse_style(config.progress));

    if (root()) {
      Json j = config.to_json();
      j.set("batch_size", config.batch_size);
      j.set("global_batch_size", config.batch_size * world * config.accumulate);
      j.set("lr_effective", config.schedule.base_lr);
      j.set("eval_batch_size", config.eval_batch_size);
      j.set("world_size", world);
      Json hs = Json::array();
      for (const auto& h : hosts) hs.push(h);
      j.set("hosts", std::move(hs));
      j.set("threads_per_rank", threads_per_rank());
      j.set("input_shape", data.train->shape().str());
      j.set("classes", data.train->classes());
      j.set("train_samples", data.train->size());
      j.set("test_samples", data.test->size());
      j.set("num_params", model->num_params());
      j.set("flops_per_image", model->flops_per_image());
      j.set("buckets", sync->buckets().size());
      j.set("checkpoint_dir", checkpoint_dir.string());
      j.set("versions", Json::parse(versions));
      log->write_json("config.json", j);
    }
  });
}

void Trainer::State::check_configuration_agrees() {
  const std::string text = config.fingerprint_text() + "\n" + model->signature();
  const std::uint64_t mine = fingerprint64(text);
  const std::vector<std::uint64_t> all = comm.allgather(mine);
  std::vector<int> differ;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[static_cast<std::size_t>(r)] != all[0]) differ.push_back(r);
  }
  if (!differ.empty()) {
    throw CollectiveError(fmt::format(
        "configuration or model differs across ranks: rank(s) {} disagree with rank 0 (every rank must get the "
        "same flags and data shape)",
        fmt::join(differ, ", ")));
  }
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

  const std::size_t numel = data.train->shape().numel();
  const auto batch = static_cast<std::size_t>(config.batch_size);
  const int k = config.accumulate;
  std::vector<float> src(batch * numel);
  std::vector<std::int32_t> labels(batch);
  std::vector<float> accumulated(k > 1 ? model->num_params() : 0);

  DistributedSampler sampler(data.train->size(), rank, world, config.seed, DistributedSampler::Mode::kTrain);
  const auto micro_steps = static_cast<std::int64_t>(sampler.steps(batch));
  const std::int64_t steps_per_epoch = micro_steps / k;

  install_stop_signal_handlers();
  train_start = Clock::now();
  last_resource = {Clock::now(), comm.bytes_sent(), comm.bytes_received(), comm.wait_seconds()};

  PhaseTimes pending;  // accumulated for the next step record
  int pending_steps = 0;
  double pending_loss = 0.0;
  std::int64_t pending_images = 0;
  bool stop = false;

  if (root() && global_step == 0) {
    progress->note(fmt::format("ringtrain: {} on {} ({} train / {} test, {}), {} rank(s) x batch {}{}, {} params, "
                               "all-reduce {}, run dir {}",
                               config.model, config.data.name, data.train->size(), data.test->size(),
                               data.train->shape().str(), world, config.batch_size,
                               k > 1 ? fmt::format(" x accumulate {}", k) : std::string(), model->num_params(),
                               config.allreduce, run_dir.string()));
  }

  for (; epoch < config.epochs && !stop; ++epoch) {
    sampler.set_epoch(static_cast<std::uint64_t>(epoch));
    progress->begin_epoch(epoch + 1, steps_per_epoch);
    auto epoch_start = Clock::now();
    const double epoch_seconds_before = epoch_seconds;

    for (; step_in_epoch < steps_per_epoch; ++step_in_epoch) {
      StallRecord::instance().set_step(global_step + 1);  // what the stall watchdog reports
      PhaseTimes t;
      double step_loss = 0.0;
      double step_correct = 0.0;
      double step_count = 0.0;
      const double wait_before = comm.wait_seconds();

      for (int micro = 0; micro < k; ++micro) {
        const auto micro_index = static_cast<std::size_t>(step_in_epoch * k + micro);
        auto t0 = Clock::now();
        const auto idx = sampler.batch(micro_index, batch);
        const std::uint64_t augment_key =
            config.data.augment ? derive_seed(config.seed, {static_cast<std::uint64_t>(RngPurpose::kAugment),
                                                            static_cast<std::uint64_t>(epoch)})
                                : 0;
        load_batch(*data.train, idx, src.data(), labels.data(), augment_key);
        auto t1 = Clock::now();
        const std::uint64_t noise = derive_seed(
            config.seed, {static_cast<std::uint64_t>(RngPurpose::kDropout), static_cast<std::uint64_t>(global_step),
                          static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(micro)});
        const LossResult r = model->forward(src.data(), labels.data(), static_cast<int>(idx.size()), Phase::kTrain, noise);
        auto t2 = Clock::now();
        model->backward();
        if (k > 1) {
          const auto g = model->grads();
          if (micro == 0) {
            std::copy(g.begin(), g.end(), accumulated.begin());
          } else {
            for (std::size_t i = 0; i < g.size(); ++i) accumulated[i] += g[i];
          }
        }
        auto t3 = Clock::now();
        t.data += std::chrono::duration<double>(t1 - t0).count();
        t.forward += std::chrono::duration<double>(t2 - t1).count();
        t.backward += std::chrono::duration<double>(t3 - t2).count();
        step_loss += r.loss_sum;
        step_correct += static_cast<double>(r.correct);
        step_count += static_cast<double>(r.count);
      }
      if (k > 1) {
        // The mean of K micro-batch means: the gradient of the mean over all K x B samples.
        const auto g = model->grads();
        const float inv = 1.0f / static_cast<float>(k);
        for (std::size_t i = 0; i < g.size(); ++i) g[i] = accumulated[i] * inv;
      }

      auto t3 = Clock::now();
      sync->average(model->grads());
      // Loss, accuracy and the stop flag, summed over ranks: every rank sees the same
      // values, so all of them stop (or fail on a NaN) at the same step.
      double agreed[4] = {step_loss, step_correct, step_count, stop_requested() ? 1.0 : 0.0};
      comm.allreduce_sum(agreed);
      auto t4 = Clock::now();
      t.allreduce = std::chrono::duration<double>(t4 - t3).count();
      t.wait = comm.wait_seconds() - wait_before;

      if (!std::isfinite(agreed[0])) {
        throw CollectiveError(fmt::format("loss became {} at step {} (epoch {}, step {} of {}); lower --lr",
                                          std::isnan(agreed[0]) ? "NaN" : "Inf", global_step + 1, epoch + 1,
                                          step_in_epoch + 1, steps_per_epoch));
      }
      const double progress_epoch =
          static_cast<double>(epoch) + static_cast<double>(step_in_epoch) / static_cast<double>(steps_per_epoch);
      const double lr = schedule->lr(progress_epoch);
      optimizer->step(model->params(), model->grads(), lr);
      auto t5 = Clock::now();
      t.optimizer = std::chrono::duration<double>(t5 - t4).count();

      ++global_step;
      epoch_loss_sum += agreed[0];
      epoch_correct += agreed[1];
      epoch_count += agreed[2];
      if (agreed[3] > 0.0) stop = true;
      const bool step_limit = config.max_steps > 0 && global_step >= config.max_steps;

      if (stop || (config.checkpoint_every_steps > 0 && global_step % config.checkpoint_every_steps == 0)) {
        ++step_in_epoch;  // the checkpoint records this step as done
        epoch_seconds = epoch_seconds_before + seconds_since(epoch_start);
        t.checkpoint = save_checkpoint();
        --step_in_epoch;
      }

      pending += t;
      ++pending_steps;
      pending_loss += agreed[0] / agreed[2];
      pending_images += static_cast<std::int64_t>(step_count);
      if (pending_steps >= config.log_every || stop || step_limit || step_in_epoch + 1 == steps_per_epoch) {
        record_steps(pending, pending_steps, pending_loss / pending_steps, pending_images);
        totals += pending;
        pending = {};
        pending_steps = 0;
        pending_loss = 0.0;
        pending_images = 0;
      }

      maybe_record_resources();

      const double epoch_elapsed = epoch_seconds_before + seconds_since(epoch_start);
      progress->step(step_in_epoch + 1, agreed[0] / agreed[2],
                     epoch_count / std::max(epoch_elapsed, 1e-9) );
      if (stop) {
        result.stopped_by = "signal";
        ++step_in_epoch;
        break;
      }
      if (step_limit) {
        result.stopped_by = "max_steps";
        stop = true;
        ++step_in_epoch;
        break;
      }
    }
    if (stop && step_in_epoch < steps_per_epoch) {
      // Stopped mid-epoch: no epoch summary; the checkpoint (if any) holds the position.
      if (result.stopped_by == "signal") {
        progress->note(fmt::format("ringtrain: stopped by signal at step {} (epoch {}); checkpoint {}", global_step,
                                   epoch + 1, last_checkpoint.string()));
      }
      break;
    }

    epoch_seconds = epoch_seconds_before + seconds_since(epoch_start);
    const double train_loss = epoch_loss_sum / std::max(epoch_count, 1.0);
    const double train_acc = epoch_correct / std::max(epoch_count, 1.0);
    last_train_loss = train_loss;
    const double images_per_s = epoch_count / std::max(epoch_seconds, 1e-9);

    EpochMetrics m;
    m.epoch = epoch + 1;
    m.step = global_step;
    m.lr = schedule->lr(static_cast<double>(epoch) + 1.0 - 1.0 / static_cast<double>(steps_per_epoch));
    m.train_loss = train_loss;
    m.train_accuracy = train_acc;
    m.test_loss = std::nan("");
    m.test_accuracy = std::nan("");
    const bool last_epoch = epoch + 1 == config.epochs || stop;
    if ((config.eval_every > 0 && (epoch + 1) % config.eval_every == 0) || last_epoch ||
        config.target_accuracy > 0.0) {
      const auto te = Clock::now();
      std::tie(last_test_loss, last_test_accuracy) = evaluate();
      last_eval_step = global_step;
      const double eval_s = seconds_since(te);
      totals.eval += eval_s;
      m.test_loss = last_test_loss;
      m.test_accuracy = last_test_accuracy;
      record_eval(eval_s);
    }
    m.elapsed_s = elapsed();
    m.images_per_s = images_per_s;
    if (root()) log->metrics(m);
    progress->end_epoch(fmt::format(
        "epoch {:>3}/{}  train loss {:.4f} acc {:.4f}  test loss {} acc {}  {:.1f}s  {:.0f} img/s", epoch + 1,
        config.epochs, train_loss, train_acc, std::isnan(m.test_loss) ? "-" : fmt::format("{:.4f}", m.test_loss),
        std::isnan(m.test_accuracy) ? "-" : fmt::format("{:.4f}", m.test_accuracy), epoch_seconds, images_per_s));

    epoch_loss_sum = epoch_correct = epoch_count = epoch_seconds = 0.0;
    step_in_epoch = 0;
    result.epochs_completed = epoch + 1;

    if (config.target_accuracy > 0.0 && last_test_accuracy >= config.target_accuracy) {
      result.time_to_target_s = elapsed();
      result.stopped_by = "target_accuracy";
      progress->note(fmt::format("ringtrain: reached test accuracy {:.4f} >= {} after {:.1f}s (epoch {}, step {})",
                                 last_test_accuracy, config.target_accuracy, *result.time_to_target_s, epoch + 1,
                                 global_step));
      record_event(fmt::format("target accuracy {} reached", config.target_accuracy));
      stop = true;
    }
    if (config.checkpoint_every > 0 && (epoch + 1) % config.checkpoint_every == 0 &&
        !(config.checkpoint_every_steps > 0 && global_step % config.checkpoint_every_steps == 0)) {
      ++epoch;  // the checkpoint's position is the start of the next epoch
      totals.checkpoint += save_checkpoint();
      --epoch;
    }
    log->flush();
  }
  if (result.epochs_completed == 0 && epoch > 0) result.epochs_completed = epoch;

  result.steps = global_step;
  result.final_train_loss = last_train_loss;
  if (last_eval_step != global_step && result.stopped_by != "signal") {
    // Stopped mid-epoch (--max-steps): the final figures are of the final parameters.
    const auto te = Clock::now();
    std::tie(last_test_loss, last_test_accuracy) = evaluate();
    totals.eval += seconds_since(te);
    if (root()) {
      EpochMetrics m;
      m.epoch = epoch + 1;
      m.step = global_step;
      m.lr = schedule->lr(static_cast<double>(epoch));
      m.train_loss = epoch_count > 0 ? epoch_loss_sum / epoch_count : std::nan("");
      m.train_accuracy = epoch_count > 0 ? epoch_correct / epoch_count : std::nan("");
      m.test_loss = last_test_loss;
      m.test_accuracy = last_test_accuracy;
      m.elapsed_s = elapsed();
      m.images_per_s = epoch_count / std::max(epoch_seconds, 1e-9);
      log->metrics(m);
    }
    if (std::isnan(last_train_loss) && epoch_count > 0) last_train_loss = epoch_loss_sum / epoch_count;
    progress->note(fmt::format("ringtrain: stopped at step {} (--max-steps): test loss {:.4f} acc {:.4f}", global_step,
                               last_test_loss, last_test_accuracy));
  }
  result.final_test_loss = last_test_loss;
  result.final_test_accuracy = last_test_accuracy;
  result.wall_s = elapsed();
  result.last_checkpoint = last_checkpoint;
  totals += pending;
  write_summary(result);
  log->flush();
  return result;
}

}  // namespace ringtrain
