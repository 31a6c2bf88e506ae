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

#include "common/Random.h"
#include "datasets/DistributedSampler.h"
#include "nn/Model.h"
#include "optim/LrSchedule.h"
#include "optim/Optimizer.h"
#include "train/Checkpoint.h"
#include "train/CheckpointIo.h"
#include "train/Evaluate.h"
#include "train/GradientSync.h"
#include "train/Progress.h"
#include "train/ResourceMonitor.h"
#include "train/RunLog.h"
#include "train/Versions.h"

namespace ringtrain {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int) { g_stop.store(true, std::memory_order_relaxed); }

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Per-phase seconds of one or more steps.
struct PhaseTimes {
  double data = 0, forward = 0, backward = 0, allreduce = 0, wait = 0, optimizer = 0, checkpoint = 0, eval = 0;
  PhaseTimes& operator+=(const PhaseTimes& o) {
    data += o.data;
    forward += o.forward;
    backward += o.backward;
    allreduce += o.allreduce;
    wait += o.wait;
    optimizer += o.optimizer;
    checkpoint += o.checkpoint;
    eval += o.eval;
    return *this;
  }
  Json to_json() const {
    Json j = Json::object();
    j.set("data", data);
    j.set("forward", forward);
    j.set("backward", backward);
    j.set("allreduce", allreduce);
    j.set("wait", wait);
    j.set("optimizer", optimizer);
    j.set("checkpoint", checkpoint);
    j.set("eval", eval);
    return j;
  }
};

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

struct Trainer::State {
  TrainConfig config;
  Communicator& comm;
  int rank = 0;
  int world = 1;
  AllreduceAlgo algo = AllreduceAlgo::kRing;

  DatasetSplits data;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<GradientSync> sync;
  std::unique_ptr<RunLog> log;
  std::unique_ptr<Progress> progress;
  ResourceMonitor monitor;
  std::filesystem::path run_dir;
  std::filesystem::path checkpoint_dir;
  std::filesystem::path last_checkpoint;
  std::vector<std::string> hosts;

  // Position and running totals (restored from a checkpoint).
  int epoch = 0;                   // current epoch, 0-based
  std::int64_t step_in_epoch = 0;  // optimizer steps done in the current epoch
  std::int64_t global_step = 0;
  double prior_elapsed = 0.0;      // training seconds before a resume
  double epoch_loss_sum = 0.0;
  double epoch_correct = 0.0;
  double epoch_count = 0.0;
  double epoch_seconds = 0.0;

  PhaseTimes totals;
  Clock::time_point train_start;
  double last_test_loss = std::nan("");
  double last_test_accuracy = std::nan("");
  double last_train_loss = std::nan("");
  std::int64_t last_eval_step = -1;

  State(TrainConfig c, Communicator& comm_) : config(std::move(c)), comm(comm_) {}

  double elapsed() const { return prior_elapsed + seconds_since(train_start); }
  bool root() const { return rank == 0; }

  void setup();
  void check_configuration_agrees();
  void maybe_resume();
  void average_buffers();
  std::pair<double, double> evaluate();
  double save_checkpoint();
  TrainResult train();
  void write_summary(const TrainResult& result);
};

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

void Trainer::State::setup() {
  rank = comm.rank();
  world = comm.size();
  config.validate();
  algo = parse_allreduce_algo(config.allreduce);

  if (config.global_batch_size > 0) {
    if (config.global_batch_size % world != 0) {
      throw std::invalid_argument(fmt::format("--global-batch-size {} is not divisible by the {} ranks",
                                              config.global_batch_size, world));
    }
    config.batch_size = config.global_batch_size / world;
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
  model = std::make_unique<Model>(config.model, data.train->shape(), data.train->classes());
  model->init(config.seed);
  // Same start everywhere: rank 0's parameters (identical anyway from the seed, but a
  // broadcast makes that a guarantee rather than an assumption).
  comm.broadcast(model->params(), 0);
  if (!model->buffers().empty()) comm.broadcast(model->buffers(), 0);

  optimizer = Optimizer::create(config.optimizer, model->param_infos(), model->num_params());
  schedule = std::make_unique<LrSchedule>(config.schedule);
  sync = std::make_unique<GradientSync>(comm, algo, model->num_params(), config.bucket_mb);

  check_configuration_agrees();

  // One run directory name for all ranks: rank 0's clock decides.
  std::string dir = config.run_dir.empty() ? default_run_dir(config.model, world) : config.run_dir;
  dir = broadcast_string(comm, dir, 0);
  run_dir = dir;
  checkpoint_dir = config.checkpoint_dir.empty() ? run_dir / "checkpoints" : std::filesystem::path(config.checkpoint_dir);
  hosts = comm.allgather(comm.host_name());

  maybe_resume();

  log = std::make_unique<RunLog>(run_dir, rank, root(), /*append=*/global_step > 0);
  progress = std::make_unique<Progress>(root() && !config.quiet, config.epochs, Progress::parse_style(config.progress));

  if (root()) {
    Json j = config.to_json();
    j.set("batch_size", config.batch_size);
    j.set("global_batch_size", global_batch);
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
    j.set("versions", versions_json(comm));
    log->write_json("config.json", j);
  }
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

void Trainer::State::maybe_resume() {
  if (config.resume.empty()) return;
  std::filesystem::path path = config.resume;
  if (config.resume == "auto") {
    path = Checkpoint::latest_in(checkpoint_dir);
    const bool none = broadcast_string(comm, path.string(), 0).empty();
    if (none) {
      if (root()) fmt::print("ringtrain: no checkpoint in {}; starting fresh\n", checkpoint_dir.string());
      return;
    }
  }
  CheckpointData ck = load_checkpoint_collective(comm, path);
  check_checkpoint_matches(ck, *model, path.string());

  std::copy(ck.params.begin(), ck.params.end(), model->params().begin());
  std::copy(ck.buffers.begin(), ck.buffers.end(), model->buffers().begin());
  const auto state = optimizer->state();
  if (ck.optimizer_state.size() != state.size() || ck.meta.at("optimizer").as_string() != optimizer->name()) {
    throw CollectiveError(fmt::format(
        "{}: optimizer: the checkpoint holds {} state for '{}', this run uses '{}' with {} (pass the same "
        "--optimizer)",
        path.string(), ck.optimizer_state.size(), ck.meta.at("optimizer").as_string(), optimizer->name(),
        state.size()));
  }
  std::copy(ck.optimizer_state.begin(), ck.optimizer_state.end(), state.begin());
  optimizer->set_steps_taken(static_cast<std::uint64_t>(ck.meta.at("optimizer_steps").as_int()));

  global_step = ck.meta.at("global_step").as_int();
  epoch = static_cast<int>(ck.meta.at("epoch").as_int());
  step_in_epoch = ck.meta.at("step_in_epoch").as_int();
  prior_elapsed = ck.meta.at("elapsed_s").as_double();
  const int saved_world = static_cast<int>(ck.meta.at("world_size").as_int());
  const int saved_batch = static_cast<int>(ck.meta.at("batch_size").as_int());
  if (saved_world == world && saved_batch == config.batch_size) {
    epoch_loss_sum = ck.meta.at("epoch_loss_sum").as_double();
    epoch_correct = ck.meta.at("epoch_correct").as_double();
    epoch_count = ck.meta.at("epoch_count").as_double();
    epoch_seconds = ck.meta.at("epoch_seconds").as_double();
    if (root()) {
      fmt::print("ringtrain: resumed from {} at epoch {} step {} (global step {})\n", path.string(), epoch + 1,
                 step_in_epoch, global_step);
    }
  } else {
    // Another world size (or per-rank batch) shards the epoch differently: the position
    // inside the epoch has no equivalent, so the epoch starts again from its beginning.
    if (root()) {
      fmt::print(
          "ringtrain: note: checkpoint {} was written by {} rank(s) with batch {}; this run has {} with batch {}: "
          "continuing from the start of epoch {} (global step {})\n",
          path.string(), saved_world, saved_batch, world, config.batch_size, epoch + 1, global_step);
    }
    step_in_epoch = 0;
  }
  if (root()) fmt::print("ringtrain: resume: {}\n", path.string());
}

void Trainer::State::average_buffers() {
  if (world > 1 && !model->buffers().empty()) comm.allreduce(model->buffers(), AllreduceAlgo::kMpi, /*mean=*/true);
}

std::pair<double, double> Trainer::State::evaluate() {
  average_buffers();
  const EvalResult r = evaluate_model(comm, *model, *data.test, config.eval_batch_size);
  return {r.loss, r.accuracy};
}

double Trainer::State::save_checkpoint() {
  average_buffers();
  const auto t0 = Clock::now();
  if (root()) {
    CheckpointData ck;
    Json meta = Json::object();
    meta.set("format_version", Checkpoint::kFormatVersion);
    meta.set("model", config.model);
    meta.set("signature", model->signature());
    meta.set("input_shape", model->input_shape().str());
    meta.set("classes", model->classes());
    meta.set("num_params", model->num_params());
    meta.set("world_size", world);
    meta.set("batch_size", config.batch_size);
    meta.set("global_step", global_step);
    meta.set("epoch", epoch);
    meta.set("step_in_epoch", step_in_epoch);
    meta.set("elapsed_s", elapsed());
    meta.set("epoch_loss_sum", epoch_loss_sum);
    meta.set("epoch_correct", epoch_correct);
    meta.set("epoch_count", epoch_count);
    meta.set("epoch_seconds", epoch_seconds);
    meta.set("seed", config.seed);
    meta.set("rng", "counter-based: every stream is derived from (seed, purpose, epoch, step)");
    meta.set("optimizer", optimizer->name());
    meta.set("optimizer_steps", optimizer->steps_taken());
    meta.set("lr", schedule->lr(static_cast<double>(epoch)));
    meta.set("test_accuracy", last_test_accuracy);
    meta.set("config", config.to_json());
    ck.meta = std::move(meta);
    const auto p = model->params();
    ck.params.assign(p.begin(), p.end());
    const auto b = model->buffers();
    ck.buffers.assign(b.begin(), b.end());
    const auto st = optimizer->state();
    ck.optimizer_state.assign(st.begin(), st.end());
    const auto bytes = Checkpoint::serialize(ck);
    last_checkpoint = checkpoint_dir / Checkpoint::file_name(global_step);
    Checkpoint::write(last_checkpoint, bytes);
    Checkpoint::prune(checkpoint_dir, config.keep_checkpoints);
    const double secs = seconds_since(t0);
    Json rec = Json::object();
    rec.set("type", "checkpoint");
    rec.set("t", elapsed());
    rec.set("epoch", epoch);
    rec.set("step", global_step);
    rec.set("seconds", secs);
    rec.set("bytes", bytes.size());
    rec.set("path", last_checkpoint.string());
    log->record(rec);
  }
  return seconds_since(t0);
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
  if (steps_per_epoch == 0) {
    throw std::invalid_argument(fmt::format(
        "--batch-size {} x --accumulate {} is larger than this rank's share of the training set ({} of {} "
        "samples over {} ranks): no step would run",
        batch, k, data.train->size() / static_cast<std::size_t>(world), data.train->size(), world));
  }

  install_stop_signal_handlers();
  train_start = Clock::now();
  auto last_resource = Clock::now();
  std::uint64_t last_sent = comm.bytes_sent();
  std::uint64_t last_recv = comm.bytes_received();
  double last_wait = comm.wait_seconds();

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
        Json rec = Json::object();
        rec.set("type", "step");
        rec.set("t", elapsed());
        rec.set("epoch", epoch + 1);
        rec.set("step", global_step);
        rec.set("steps", pending_steps);
        rec.set("data_s", pending.data);
        rec.set("forward_s", pending.forward);
        rec.set("backward_s", pending.backward);
        rec.set("allreduce_s", pending.allreduce);
        rec.set("wait_s", pending.wait);
        rec.set("optimizer_s", pending.optimizer);
        rec.set("checkpoint_s", pending.checkpoint);
        rec.set("bytes_sent", comm.bytes_sent());
        rec.set("bytes_received", comm.bytes_received());
        rec.set("loss", pending_loss / pending_steps);
        rec.set("images", pending_images);
        log->record(rec);
        totals += pending;
        pending = {};
        pending_steps = 0;
        pending_loss = 0.0;
        pending_images = 0;
      }

      if (seconds_since(last_resource) >= 1.0) {
        const double dt = seconds_since(last_resource);
        last_resource = Clock::now();
        const ResourceSample rs = monitor.sample();
        const std::uint64_t sent = comm.bytes_sent();
        const std::uint64_t recv = comm.bytes_received();
        Json rec = Json::object();
        rec.set("type", "resource");
        rec.set("t", elapsed());
        rec.set("cpu_percent", rs.cpu_percent);
        rec.set("rss_mb", rs.rss_mb);
        rec.set("peak_rss_mb", rs.peak_rss_mb);
        rec.set("net_send_mbps", static_cast<double>(sent - last_sent) / 1e6 / dt);
        rec.set("net_recv_mbps", static_cast<double>(recv - last_recv) / 1e6 / dt);
        rec.set("wait_share", (comm.wait_seconds() - last_wait) / dt);
        log->record(rec);
        last_sent = sent;
        last_recv = recv;
        last_wait = comm.wait_seconds();
      }

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
      Json rec = Json::object();
      rec.set("type", "eval");
      rec.set("t", elapsed());
      rec.set("epoch", epoch + 1);
      rec.set("step", global_step);
      rec.set("test_loss", last_test_loss);
      rec.set("test_accuracy", last_test_accuracy);
      rec.set("seconds", eval_s);
      log->record(rec);
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
      Json rec = Json::object();
      rec.set("type", "event");
      rec.set("t", elapsed());
      rec.set("message", fmt::format("target accuracy {} reached", config.target_accuracy));
      log->record(rec);
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

void Trainer::State::write_summary(const TrainResult& result) {
  const ResourceSample rs = monitor.sample();
  // Each rank's own figures, gathered to every rank as fixed-size rows.
  const double images = static_cast<double>(result.steps) * config.batch_size * config.accumulate;
  std::vector<double> mine = {result.wall_s,
                              totals.data,
                              totals.forward,
                              totals.backward,
                              totals.allreduce,
                              totals.wait,
                              totals.optimizer,
                              totals.checkpoint,
                              totals.eval,
                              std::max(monitor.peak_rss_mb(), rs.peak_rss_mb),
                              monitor.mean_cpu_percent(),
                              static_cast<double>(comm.bytes_sent()) / 1e6,
                              static_cast<double>(comm.bytes_received()) / 1e6};
  const std::size_t width = mine.size();
  std::vector<double> all(width * static_cast<std::size_t>(world), 0.0);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(width * static_cast<std::size_t>(rank)));
  comm.allreduce_sum(all);
  if (!root()) return;

  Json j = Json::object();
  j.set("model", config.model);
  j.set("dataset", config.data.name);
  j.set("world_size", world);
  j.set("batch_size", config.batch_size);
  j.set("global_batch_size", config.batch_size * world * config.accumulate);
  j.set("allreduce", config.allreduce);
  j.set("wall_s", result.wall_s);
  j.set("images_per_s", result.wall_s > 0 ? images * world / result.wall_s : 0.0);
  j.set("final_train_loss", result.final_train_loss);
  j.set("final_test_loss", result.final_test_loss);
  j.set("final_test_accuracy", result.final_test_accuracy);
  j.set("epochs_completed", result.epochs_completed);
  j.set("steps", result.steps);
  j.set("time_to_target_s", result.time_to_target_s ? Json(*result.time_to_target_s) : Json());
  j.set("target_accuracy", config.target_accuracy);
  j.set("stopped_by", result.stopped_by);
  j.set("last_checkpoint", result.last_checkpoint.string());
  Json ranks = Json::array();
  for (int r = 0; r < world; ++r) {
    const double* row = all.data() + width * static_cast<std::size_t>(r);
    Json rj = Json::object();
    rj.set("rank", r);
    rj.set("host", hosts[static_cast<std::size_t>(r)]);
    rj.set("wall_s", row[0]);
    rj.set("images_per_s", row[0] > 0 ? images / row[0] : 0.0);
    PhaseTimes p;
    p.data = row[1];
    p.forward = row[2];
    p.backward = row[3];
    p.allreduce = row[4];
    p.wait = row[5];
    p.optimizer = row[6];
    p.checkpoint = row[7];
    p.eval = row[8];
    rj.set("phases_s", p.to_json());
    rj.set("peak_rss_mb", row[9]);
    rj.set("mean_cpu_percent", row[10]);
    rj.set("mb_sent", row[11]);
    rj.set("mb_received", row[12]);
    ranks.push(std::move(rj));
  }
  j.set("ranks", std::move(ranks));
  log->write_json("summary.json", j);
}

}  // namespace ringtrain
