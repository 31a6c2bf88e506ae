// Checkpoints of a training run: rank 0 saves the flat buffers and the loop's position;
// every rank restores them on --resume (rank 0 reads, then broadcasts).
#include <algorithm>

#include <fmt/format.h>

#include "checkpoint/Checkpoint.h"
#include "checkpoint/CheckpointIo.h"
#include "run/TrainerShared.h"
#include "train/TrainerState.h"

namespace ringtrain {

void Trainer::State::maybe_resume() {
  std::optional<ResumeCheckpoint> resume = load_resume_checkpoint(comm, config.resume, checkpoint_dir, *model);
  if (!resume) return;
  const CheckpointData& ck = resume->data;
  const std::filesystem::path& path = resume->path;

  std::copy(ck.params.begin(), ck.params.end(), model->params().begin());
  std::copy(ck.buffers.begin(), ck.buffers.end(), model->buffers().begin());
  const auto state = optimizer->state();
  check_checkpoint_optimizer(ck, optimizer->name(), state.size(), path.string());
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
    ck.meta = checkpoint_meta(config, *model, world,
                              {at, totals, elapsed(), optimizer->name(), optimizer->steps_taken(),
                               schedule->lr(static_cast<double>(at.epoch)), last_test_accuracy});
    const auto p = model->params();
    ck.params.assign(p.begin(), p.end());
    const auto b = model->buffers();
    ck.buffers.assign(b.begin(), b.end());
    const auto st = optimizer->state();
    ck.optimizer_state.assign(st.begin(), st.end());
    last_checkpoint = write_checkpoint(ck, config, checkpoint_dir, at, *log, [this] { return elapsed(); }, t0);
  }
  return seconds_since(t0);
}

}  // namespace ringtrain
