// Checkpoints of a synchronous run: rank 0 saves the flat buffers and the loop's position;
// every rank restores them on --resume (rank 0 reads, then broadcasts).
#include <algorithm>

#include <fmt/format.h>

#include "checkpoint/RunCheckpoint.h"
#include "train/TrainerState.h"

namespace ringtrain {

void Trainer::State::maybe_resume() {
  std::optional<ResumeCheckpoint> resume = load_resume_checkpoint(comm, config.resume, checkpoint_dir, *model_);
  if (!resume) return;
  const CheckpointData& ck = resume->data;
  const std::string path = resume->path.string();
  restore_model(ck, *model_);
  const auto state = optimizer->state();
  check_checkpoint_optimizer(ck, optimizer->name(), state.size(), path);
  std::copy(ck.optimizer_state.begin(), ck.optimizer_state.end(), state.begin());
  const CheckpointPoint saved = checkpoint_point(ck.meta);
  optimizer->set_steps_taken(saved.optimizer_steps);
  pos = saved.at;
  prior_elapsed = saved.elapsed_s;
  // With logical shards a step is S shards whatever the rank count: the position carries over.
  const bool same_cut =
      saved.logical_shards == config.logical_shards && (config.logical_shards > 0 || saved.world_size == world);
  if (same_cut && saved.batch_size == config.batch_size) {
    epoch_totals = saved.totals;
    if (root()) {
      fmt::print("ringtrain: resumed from {} at epoch {} step {} (global step {})\n", path, pos.epoch + 1,
                 pos.step_in_epoch, pos.global_step);
    }
  } else {
    // Another world size (or per-rank batch, or shard count) cuts the epoch differently: the
    // position inside the epoch has no equivalent, so the epoch starts again from its beginning.
    if (root()) {
      fmt::print(
          "ringtrain: note: checkpoint {} was written by {} rank(s) with batch {} and {} logical shard(s); this run "
          "has {} with batch {} and {}: continuing from the start of epoch {} (global step {})\n",
          path, saved.world_size, saved.batch_size, saved.logical_shards, world, config.batch_size,
          config.logical_shards, pos.epoch + 1, pos.global_step);
    }
    pos.step_in_epoch = 0;
  }
  if (root()) fmt::print("ringtrain: resume: {}\n", path);
}

TrainingRun::LoopCheckpoint Trainer::State::checkpoint_data() {
  LoopCheckpoint ck{pos, {}};
  if (root()) {
    Json meta = checkpoint_meta(config, *model_, world,
                                {pos, epoch_totals, elapsed(), optimizer->name(), optimizer->steps_taken(),
                                 schedule->lr(static_cast<double>(pos.epoch)), last_test_accuracy});
    ck.data = checkpoint_of(*model_, optimizer->state(), std::move(meta));
  }
  return ck;
}

}  // namespace ringtrain
