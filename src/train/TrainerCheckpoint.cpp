// Checkpoints of a training run: rank 0 saves the flat buffers and the loop's position;
// every rank restores them on --resume (rank 0 reads, then broadcasts).
#include <algorithm>

#include <fmt/format.h>

#include "train/Checkpoint.h"
#include "train/CheckpointIo.h"
#include "train/TrainerState.h"

namespace ringtrain {

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

  pos.global_step = ck.meta.at("global_step").as_int();
  pos.epoch = static_cast<int>(ck.meta.at("epoch").as_int());
  pos.step_in_epoch = ck.meta.at("step_in_epoch").as_int();
  prior_elapsed = ck.meta.at("elapsed_s").as_double();
  const int saved_world = static_cast<int>(ck.meta.at("world_size").as_int());
  const int saved_batch = static_cast<int>(ck.meta.at("batch_size").as_int());
  if (saved_world == world && saved_batch == config.batch_size) {
    epoch_totals.loss_sum = ck.meta.at("epoch_loss_sum").as_double();
    epoch_totals.correct = ck.meta.at("epoch_correct").as_double();
    epoch_totals.count = ck.meta.at("epoch_count").as_double();
    epoch_totals.seconds = ck.meta.at("epoch_seconds").as_double();
    if (root()) {
      fmt::print("ringtrain: resumed from {} at epoch {} step {} (global step {})\n", path.string(), pos.epoch + 1,
                 pos.step_in_epoch, pos.global_step);
    }
  } else {
    // Another world size (or per-rank batch) shards the epoch differently: the position
    // inside the epoch has no equivalent, so the epoch starts again from its beginning.
    if (root()) {
      fmt::print(
          "ringtrain: note: checkpoint {} was written by {} rank(s) with batch {}; this run has {} with batch {}: "
          "continuing from the start of epoch {} (global step {})\n",
          path.string(), saved_world, saved_batch, world, config.batch_size, pos.epoch + 1, pos.global_step);
    }
    pos.step_in_epoch = 0;
  }
  if (root()) fmt::print("ringtrain: resume: {}\n", path.string());
}

double Trainer::State::save_checkpoint(const LoopPosition& at, const EpochTotals& totals) {
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
    meta.set("global_step", at.global_step);
    meta.set("epoch", at.epoch);
    meta.set("step_in_epoch", at.step_in_epoch);
    meta.set("elapsed_s", elapsed());
    meta.set("epoch_loss_sum", totals.loss_sum);
    meta.set("epoch_correct", totals.correct);
    meta.set("epoch_count", totals.count);
    meta.set("epoch_seconds", totals.seconds);
    meta.set("seed", config.seed);
    meta.set("rng", "counter-based: every stream is derived from (seed, purpose, epoch, step)");
    meta.set("optimizer", optimizer->name());
    meta.set("optimizer_steps", optimizer->steps_taken());
    meta.set("lr", schedule->lr(static_cast<double>(at.epoch)));
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
    last_checkpoint = checkpoint_dir / Checkpoint::file_name(at.global_step);
    Checkpoint::write(last_checkpoint, bytes);
    Checkpoint::prune(checkpoint_dir, config.keep_checkpoints);
    const double secs = seconds_since(t0);
    Json rec = Json::object();
    rec.set("type", "checkpoint");
    rec.set("t", elapsed());
    rec.set("epoch", at.epoch);
    rec.set("step", at.global_step);
    rec.set("seconds", secs);
    rec.set("bytes", bytes.size());
    rec.set("path", last_checkpoint.string());
    log->record(rec);
  }
  return seconds_since(t0);
}

}  // namespace ringtrain
