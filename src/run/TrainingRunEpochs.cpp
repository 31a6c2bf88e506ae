// TrainingRun's part inside the loop: the clocks, the checkpoint cadence and writes,
// evaluation when due, the end of each epoch, the stop notes and the run's final figures.
#include "run/TrainingRun.h"

#include <algorithm>

#include <fmt/format.h>

#include "checkpoint/CheckpointIo.h"
#include "checkpoint/RunCheckpoint.h"
#include "run/Evaluate.h"
#include "run/StopSignals.h"

namespace ringtrain {
namespace {

double seconds_since(TrainingRun::Clock::time_point t) {
  return std::chrono::duration<double>(TrainingRun::Clock::now() - t).count();
}

std::string epoch_line(const EpochMetrics& m, int epochs, double seconds) {
  return fmt::format("epoch {:>3}/{}  train loss {:.4f} acc {:.4f}  test loss {} acc {}  {:.1f}s  {:.0f} img/s",
                     m.epoch, epochs, m.train_loss, m.train_accuracy,
                     std::isnan(m.test_loss) ? "-" : fmt::format("{:.4f}", m.test_loss),
                     std::isnan(m.test_accuracy) ? "-" : fmt::format("{:.4f}", m.test_accuracy), seconds,
                     m.images_per_s);
}

}  // namespace

void TrainingRun::begin_training() {
  result.run_dir = run_dir;
  result.stopped_by = "epochs";
  set_stop_signals_polled(true);
  train_start_ = Clock::now();
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
  const double s = save_checkpoint();
  checkpoint_seconds += s;
  return s;
}

double TrainingRun::evaluate_now(std::int64_t global_step) {
  const auto t0 = Clock::now();
  gather_model();
  const EvalResult r = evaluate_model(comm, *model_, *data.test, config.eval_batch_size, loader_threads());
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

}  // namespace ringtrain
