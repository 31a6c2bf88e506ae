// What every training run does around its steps, whichever loop takes them (TrainingRun.h).
#include "run/TrainingRun.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

#include "checkpoint/CheckpointIo.h"
#include "collectives/StallRecord.h"
#include "checkpoint/RunCheckpoint.h"
#include "common/CollectiveError.h"
#include "common/Cores.h"
#include "common/Fnv1a.h"
#include "run/Agreement.h"
#include "run/Evaluate.h"
#include "run/StopSignals.h"
#include "run/Versions.h"
#include "tensorboard/TensorBoardLog.h"

namespace ringtrain {
namespace {

double seconds_since(TrainingRun::Clock::time_point t) {
  return std::chrono::duration<double>(TrainingRun::Clock::now() - t).count();
}

// runs/<local time>-<model>-np<N><suffix>: rank 0's clock decides (broadcast by the caller).
std::string default_run_dir(const std::string& model, int world, std::string_view suffix) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("runs/{}-{}-np{}{}", stamp, model, world, suffix);
}

// The settings that tell runs apart, as a markdown table for TensorBoard's Text tab.
std::string settings_markdown(const Json& config) {
  std::string md = "| setting | value |\n|---|---|\n";
  for (const char* key : {"model", "dataset", "precision", "world_size", "threads_per_rank", "batch_size",
                          "global_batch_size", "optimizer", "lr", "allreduce", "compress", "mode", "seed"}) {
    if (const Json* v = config.find(key)) md += fmt::format("| {} | {} |\n", key, v->is_string() ? v->as_string() : v->dump());
  }
  return md;
}

std::string epoch_line(const EpochMetrics& m, int epochs, double seconds) {
  return fmt::format("epoch {:>3}/{}  train loss {:.4f} acc {:.4f}  test loss {} acc {}  {:.1f}s  {:.0f} img/s",
                     m.epoch, epochs, m.train_loss, m.train_accuracy,
                     std::isnan(m.test_loss) ? "-" : fmt::format("{:.4f}", m.test_loss),
                     std::isnan(m.test_accuracy) ? "-" : fmt::format("{:.4f}", m.test_accuracy), seconds,
                     m.images_per_s);
}

}  // namespace

TrainingRun::TrainingRun(TrainConfig c, Communicator& comm_) : config(std::move(c)), comm(comm_) {}
TrainingRun::~TrainingRun() = default;

const Model& TrainingRun::model() const {
  if (!model_) throw std::logic_error("the model is built when the run starts");
  return *model_;
}

void TrainingRun::identify() {
  rank = comm.rank();
  world = comm.size();
  hosts = comm.allgather(comm.host_name());
  set_threads();
}

void TrainingRun::set_threads() {
  threads_ = choose_threads(config.threads, std::getenv("OMP_NUM_THREADS"), comm.ranks_on_node(), host_cores(),
                            affinity_cores());
  // Before any OpenMP region (the model's init and oneDNN's primitives start the team).
  omp_set_num_threads(threads_.threads);
  // Once per node: from its first rank (by host name).
  const auto first = std::find(hosts.begin(), hosts.end(), hosts[static_cast<std::size_t>(rank)]);
  if (config.quiet || first - hosts.begin() != rank) return;
  if (const auto warning = oversubscription_warning(comm.ranks_on_node(), threads_.threads, host_cores())) {
    fmt::print(stderr, "ringtrain: [rank {}] warning: {} (threads from {})\n", rank, *warning, threads_.source);
    std::fflush(stderr);
  }
}

std::string TrainingRun::placement() const {
  return fmt::format("{} compute, {} thread(s) per rank, run dir {}, model -> {}", config.precision,
                     threads_.threads, run_dir.string(), model_path().string());
}

void TrainingRun::load_data_and_model() {
  // Before the data: a CPU without native bf16 is refused at once (on every rank, agreed).
  const Precision precision = parse_precision(config.precision);
  if (const std::string why = precision_refusal_here(precision); !why.empty()) throw std::invalid_argument(why);
  if (config.eval_batch_size == 0) config.eval_batch_size = std::max(config.batch_size, 256);
  // The cosine schedule anneals over the whole run, whoever built the configuration.
  config.schedule.total_epochs = config.epochs;
  data = load_dataset(config.data);
  config.check_batch_memory(data.train->shape());  // sizes from flags, before any allocation
  model_ = std::make_unique<Model>(config.model, data.train->shape(), data.train->classes());
  model_->init(config.seed);
  model_->set_precision(precision);
  schedule = std::make_unique<LrSchedule>(config.schedule);
}

void TrainingRun::agree_on_start() {
  // Before any collective whose size depends on the model: ranks with other flags or data
  // shapes would otherwise meet in a broadcast of different lengths.
  const std::string text = config.fingerprint_text() + "\n" + model_->signature();
  const std::vector<std::uint64_t> all = comm.allgather(fnv1a64(text));
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
  // Same start everywhere: rank 0's parameters (identical anyway from the seed, but a
  // broadcast makes that a guarantee rather than an assumption).
  comm.broadcast(model_->params(), 0);
  if (!model_->buffers().empty()) comm.broadcast(model_->buffers(), 0);
}

void TrainingRun::choose_run_dir(std::string_view suffix) {
  // One run directory name for all ranks: rank 0's clock decides.
  const std::string dir = config.run_dir.empty() ? default_run_dir(config.model, world, suffix) : config.run_dir;
  run_dir = broadcast_string(comm, dir, 0);
  checkpoint_dir = config.checkpoint_dir.empty() ? run_dir / "checkpoints" : std::filesystem::path(config.checkpoint_dir);
}

Json TrainingRun::base_config_json() const {
  // The data as loaded: the default directory, and the mean/std computed from the training
  // set when no flag gave them (the checkpoint's config keeps the flags' values).
  TrainConfig loaded = config;
  loaded.data.data_dir = data.data_dir;
  loaded.data.norm_mean = data.norm_mean;
  loaded.data.norm_std = data.norm_std;
  Json j = loaded.to_json();
  j.set("batch_size", config.batch_size);
  j.set("lr_effective", config.schedule.base_lr);
  j.set("eval_batch_size", config.eval_batch_size);
  j.set("world_size", world);
  Json hs = Json::array();
  for (const auto& h : hosts) hs.push(h);
  j.set("hosts", std::move(hs));
  j.set("threads_per_rank", threads_per_rank());
  j.set("threads_from", threads_.source);
  j.set("input_shape", data.train->shape().str());
  j.set("classes", data.train->classes());
  j.set("train_samples", data.train->size());
  j.set("test_samples", data.test->size());
  j.set("num_params", model_->num_params());
  j.set("flops_per_image", model_->flops_per_image());
  j.set("checkpoint_dir", checkpoint_dir.string());
  return j;
}

void TrainingRun::open_logs(bool append, bool tensorboard, const Json& config_json) {
  // The library versions are gathered from every rank (a collective), before the agreed part.
  const std::string versions = root() ? versions_json(comm).dump() : std::string();
  run_agreed(comm, [&] {
    log = std::make_unique<RunLog>(run_dir, rank, root(), append);
    if (tensorboard) {
      auto tb = std::make_unique<TensorBoardLog>(run_dir, rank, world, append);
      if (!append) tb->text("run/config", settings_markdown(config_json));
      log->add_sink(std::move(tb));
    }
    progress = std::make_unique<Progress>(root() && !config.quiet, config.epochs, Progress::parse_style(config.progress));
    if (!root()) return;
    Json j = config_json;
    j.set("versions", Json::parse(versions));
    log->write_json("config.json", j);
    if (!config.rerun_config.empty()) log->write_text("config.toml", config.rerun_config);
  });
}

void TrainingRun::begin_training() {
  result.run_dir = run_dir;
  result.stopped_by = "epochs";
  set_stop_signals_polled(true);
  train_start_ = Clock::now();
  StallRecord::instance().set_phase("training");  // what a stall reports a rank was doing
}

void TrainingRun::begin_epoch(int epoch, std::int64_t steps) {
  progress->begin_epoch(epoch + 1, steps);
  epoch_start_ = Clock::now();
  epoch_seconds_before_ = epoch_totals.seconds;
}

double TrainingRun::epoch_seconds() const { return epoch_seconds_before_ + seconds_since(epoch_start_); }

double TrainingRun::elapsed() const { return prior_elapsed + seconds_since(train_start_); }

bool TrainingRun::checkpoint_due_after_step(std::int64_t global_step) const {
  return config.checkpoint_every_steps > 0 && global_step % config.checkpoint_every_steps == 0;
}

bool TrainingRun::checkpoint_due_after_epoch(int epochs_done, std::int64_t global_step) const {
  // Not twice at one position: a step checkpoint that fell on the epoch's end is enough, and
  // a signal's stop has written its own.
  return config.checkpoint_every > 0 && epochs_done % config.checkpoint_every == 0 &&
         !checkpoint_due_after_step(global_step) && result.stopped_by != "signal";
}

double TrainingRun::save_checkpoint() {
  const StallPhase phase("evaluation");
  const auto t0 = Clock::now();
  gather_model();
  const LoopCheckpoint ck = checkpoint_data();
  if (root()) {
    last_checkpoint =
        write_checkpoint(ck.view(model()), config, checkpoint_dir, ck.at, *log, [this] { return elapsed(); }, t0);
  }
  last_checkpoint = broadcast_string(comm, last_checkpoint.string(), 0);
  return seconds_since(t0);
}

void TrainingRun::save_model(std::int64_t global_step) {
  // The final evaluation gathered the model at this step; gathering again would average
  // the buffers a second time (not always bit-identical).
  if (last_eval_step != global_step) gather_model();
  const LoopCheckpoint ck = checkpoint_data();
  if (root()) {
    const std::size_t bytes = Checkpoint::write(model_path(), ck.view(model()));
    log->record(Json(Json::Object{{"type", "model"}, {"t", elapsed()}, {"step", global_step},
                                  {"bytes", bytes}, {"path", model_path().string()}}));
  }
  result.model = model_path();
}

double TrainingRun::checkpoint_now() {
  const StallPhase phase("checkpoint");
  const double s = save_checkpoint();
  checkpoint_seconds += s;
  return s;
}

double TrainingRun::evaluate_now(std::int64_t global_step) {
  const auto t0 = Clock::now();
  gather_model();
  const EvalResult r = evaluate_model(comm, *model_, *data.test, config.eval_batch_size);
  last_test_loss = r.loss;
  last_test_accuracy = r.accuracy;
  last_eval_step = global_step;
  const double s = seconds_since(t0);
  eval_seconds += s;
  return s;
}

bool TrainingRun::end_epoch(int epoch, std::int64_t global_step, std::int64_t steps_per_epoch, bool stopping) {
  epoch_totals.seconds = epoch_seconds();
  EpochMetrics m;
  m.epoch = epoch + 1;
  m.step = global_step;
  m.lr = schedule->lr(static_cast<double>(epoch) + 1.0 - 1.0 / static_cast<double>(steps_per_epoch));
  m.train_loss = epoch_totals.loss_sum / std::max(epoch_totals.count, 1.0);
  m.train_accuracy = epoch_totals.correct / std::max(epoch_totals.count, 1.0);
  m.test_loss = m.test_accuracy = std::nan("");
  last_train_loss = m.train_loss;
  const bool last_epoch = epoch + 1 == config.epochs || stopping;
  if ((config.eval_every > 0 && (epoch + 1) % config.eval_every == 0) || last_epoch || config.target_accuracy > 0.0) {
    const double s = evaluate_now(global_step);
    m.test_loss = last_test_loss;
    m.test_accuracy = last_test_accuracy;
    log->record(Json(Json::Object{{"type", "eval"}, {"t", elapsed()}, {"epoch", epoch + 1}, {"step", global_step},
                                  {"test_loss", last_test_loss}, {"test_accuracy", last_test_accuracy},
                                  {"seconds", s}}));
  }
  m.elapsed_s = elapsed();
  m.images_per_s = epoch_totals.count / std::max(epoch_totals.seconds, 1e-9);
  if (root()) log->metrics(m);
  progress->end_epoch(epoch_line(m, config.epochs, epoch_totals.seconds));
  result.epochs_completed = epoch + 1;
  if (config.target_accuracy <= 0.0 || last_test_accuracy < config.target_accuracy) return false;
  result.time_to_target_s = elapsed();
  result.stopped_by = "target_accuracy";
  progress->note(fmt::format("ringtrain: reached test accuracy {:.4f} >= {} after {:.1f}s (epoch {}, step {})",
                             last_test_accuracy, config.target_accuracy, *result.time_to_target_s, epoch + 1,
                             global_step));
  record_event(fmt::format("target accuracy {} reached", config.target_accuracy));
  return true;
}

void TrainingRun::note_stopped_mid_epoch(int epoch, std::int64_t global_step) const {
  if (result.stopped_by != "signal") return;
  progress->note(fmt::format("ringtrain: stopped by signal after step {} (epoch {}); checkpoint {}", global_step,
                             epoch + 1, last_checkpoint.string()));
}

void TrainingRun::final_evaluation(int epoch, std::int64_t global_step) {
  evaluate_now(global_step);
  if (root()) {
    EpochMetrics m;
    m.epoch = epoch + 1;
    m.step = global_step;
    m.lr = schedule->lr(static_cast<double>(epoch));
    const bool any = epoch_totals.count > 0;
    m.train_loss = any ? epoch_totals.loss_sum / epoch_totals.count : std::nan("");
    m.train_accuracy = any ? epoch_totals.correct / epoch_totals.count : std::nan("");
    m.test_loss = last_test_loss;
    m.test_accuracy = last_test_accuracy;
    m.elapsed_s = elapsed();
    m.images_per_s = epoch_totals.count / std::max(epoch_totals.seconds, 1e-9);
    log->metrics(m);
  }
  progress->note(fmt::format("ringtrain: stopped at step {} (--max-steps): test loss {:.4f} acc {:.4f}", global_step,
                             last_test_loss, last_test_accuracy));
}

void TrainingRun::finish(int epoch, std::int64_t global_step) {
  StallRecord::instance().set_phase("end of run");
  if (result.epochs_completed == 0 && epoch > 0) result.epochs_completed = epoch;
  result.steps = global_step;
  // Stopped mid-epoch (--max-steps): the final figures are of the final parameters.
  if (last_eval_step != global_step && result.stopped_by != "signal") final_evaluation(epoch, global_step);
  // Stopped before any epoch ended: the train loss of the steps this epoch did take.
  if (std::isnan(last_train_loss) && epoch_totals.count > 0) last_train_loss = epoch_totals.loss_sum / epoch_totals.count;
  result.final_train_loss = last_train_loss;
  result.final_test_loss = last_test_loss;
  result.final_test_accuracy = last_test_accuracy;
  result.wall_s = elapsed();
  result.last_checkpoint = last_checkpoint;
  if (result.stopped_by != "signal") save_model(global_step);
}

void TrainingRun::record_event(const std::string& message) {
  log->record(Json(Json::Object{{"type", "event"}, {"t", elapsed()}, {"message", message}}));
}

void TrainingRun::note_first_step(std::int64_t global_step) {
  if (first_step_noted_) return;
  first_step_noted_ = true;
  const double unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  log->record(Json(Json::Object{{"type", "event"},
                                {"t", elapsed()},
                                {"message", fmt::format("first step of this launch: step {}", global_step)},
                                {"step", global_step},
                                {"unix_s", unix_s}}));
  log->flush();
}

Json TrainingRun::resource_record(const ResourceSample& sample, std::uint64_t bytes_sent, std::uint64_t bytes_received,
                                  double dt) const {
  return Json(Json::Object{{"type", "resource"},
                           {"t", elapsed()},
                           {"cpu_percent", sample.cpu_percent},
                           {"rss_mb", sample.rss_mb},
                           {"peak_rss_mb", sample.peak_rss_mb},
                           {"net_send_mbps", static_cast<double>(bytes_sent) / 1e6 / dt},
                           {"net_recv_mbps", static_cast<double>(bytes_received) / 1e6 / dt}});
}

std::vector<double> TrainingRun::common_row(PhaseTimes phases, std::uint64_t bytes_sent, std::uint64_t bytes_received) {
  const ResourceSample rs = monitor.sample();
  phases.checkpoint = checkpoint_seconds;
  phases.eval = eval_seconds;
  return {result.wall_s,
          phases.data,
          phases.forward,
          phases.backward,
          phases.allreduce,
          phases.exposed,
          phases.wait,
          phases.optimizer,
          phases.checkpoint,
          phases.eval,
          std::max(monitor.peak_rss_mb(), rs.peak_rss_mb),
          monitor.mean_cpu_percent(),
          static_cast<double>(bytes_sent) / 1e6,
          static_cast<double>(bytes_received) / 1e6};
}

Json TrainingRun::common_rank_json(int r, const double* row, double images) const {
  Json rj = Json::object();
  rj.set("rank", r);
  rj.set("host", hosts[static_cast<std::size_t>(r)]);
  rj.set("wall_s", row[0]);
  rj.set("images_per_s", row[0] > 0 ? images / row[0] : 0.0);
  const PhaseTimes p{.data = row[1], .forward = row[2], .backward = row[3], .allreduce = row[4], .exposed = row[5],
                     .wait = row[6], .optimizer = row[7], .checkpoint = row[8], .eval = row[9]};
  rj.set("phases_s", p.to_json());
  rj.set("peak_rss_mb", row[10]);
  rj.set("mean_cpu_percent", row[11]);
  rj.set("mb_sent", row[12]);
  rj.set("mb_received", row[13]);
  return rj;
}

Json TrainingRun::summary_head(double images) const {
  Json j = Json::object();
  j.set("model", config.model);
  j.set("dataset", config.data.name);
  j.set("mode", config.mode);
  j.set("world_size", world);
  j.set("batch_size", config.batch_size);
  j.set("precision", config.precision);
  j.set("threads_per_rank", threads_.threads);
  j.set("wall_s", result.wall_s);
  j.set("images_per_s", result.wall_s > 0 ? images / result.wall_s : 0.0);
  j.set("final_train_loss", result.final_train_loss);
  j.set("final_test_loss", result.final_test_loss);
  j.set("final_test_accuracy", result.final_test_accuracy);
  j.set("epochs_completed", result.epochs_completed);
  j.set("steps", result.steps);
  j.set("time_to_target_s", result.time_to_target_s ? Json(*result.time_to_target_s) : Json());
  j.set("target_accuracy", config.target_accuracy);
  j.set("stopped_by", result.stopped_by);
  j.set("last_checkpoint", result.last_checkpoint.string());
  j.set("model_file", result.model.string());
  return j;
}

std::vector<double> TrainingRun::gather_rows(const std::vector<double>& mine) {
  const std::size_t width = mine.size();
  std::vector<double> all(width * static_cast<std::size_t>(comm.size()), 0.0);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(width * static_cast<std::size_t>(comm.rank())));
  comm.allreduce_sum(all);
  return all;
}

}  // namespace ringtrain
