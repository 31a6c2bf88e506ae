// Checkpoints of a synchronous run: rank 0 saves the flat buffers and the loop's position;
// every rank restores them on --resume (rank 0 reads, then broadcasts).
#include <algorithm>
#include <cstdio>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "checkpoint/RunCheckpoint.h"
#include "collectives/StallRecord.h"
#include "checkpoint/SnapshotStore.h"
#include "train/TrainerState.h"

namespace ringtrain {
namespace {

// Snapshots kept per directory: the newest may be the one being written when a node fails.
constexpr int kKeepSnapshots = 2;

}  // namespace

void Trainer::State::maybe_resume() {
  std::optional<ResumeCheckpoint> resume =
      load_resume_checkpoint(comm, config.resume, checkpoint_dir, *model_, snapshot_root);
  if (!resume) return;
  const CheckpointData& ck = resume->data;
  // "snapshot /dev/shm/.../snap-000000020.rtck (read by rank 1)" or "checkpoint <path>".
  const std::string path = resume->kind == "snapshot" ? fmt::format("snapshot {} (read by rank {})",
                                                                    resume->path.string(), resume->holder)
                                                      : resume->path.string();
  resumed_from = Json(Json::Object{{"kind", resume->kind},
                                   {"path", resume->path.string()},
                                   {"step", ck.meta.at("global_step").as_int()},
                                   {"holder_rank", resume->holder}});
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

void Trainer::State::setup_snapshots() {
  // Snapshots past where this run starts belong to another history (a fresh run in the
  // directory of one that failed, or the torn ones a resume skipped): gone before this run
  // writes any, or they would outrank its own in pruning and in the next --resume auto.
  const NodePlace place = comm.node_place();
  if (place.leader_of(place.node) == rank) {
    for (const SnapshotFile& f : list_snapshots(snapshot_root)) {
      std::error_code ec;
      if (f.step > pos.global_step) std::filesystem::remove(f.path, ec);
    }
  }
  comm.barrier();
  if (config.snapshot_every == 0) return;
  const int r = rank;
  const std::size_t state_bytes =
      sizeof(float) * (model_->params().size() + model_->buffers().size() + optimizer->state().size());
  const std::size_t meta_bytes = snapshot_meta().dump(2).size();
  snapshots = std::make_unique<SnapshotWriter>(comm, snapshot_root, kKeepSnapshots, state_bytes, meta_bytes,
                                               [r](const std::string& message) {
    fmt::print(stderr, "ringtrain: [rank {}] warning: {}\n", r, message);
    std::fflush(stderr);
  });
  // A core that training leaves idle (OverlapPolicy: more cores for this rank than its
  // threads) and no communication thread to take it: the snapshot thread copies the state
  // there, off the step. Otherwise the optimizer update captures it (SnapshotWriter.h).
  snapshots->copy_on_thread(overlap_policy.spare_core() && !overlap);
  if (resumed_from.is_object()) record_event("resumed from " + resumed_from.at("kind").as_string() + " " +
                                             resumed_from.at("path").as_string());
}

void Trainer::State::take_snapshot() {
  const StallPhase phase("snapshot");
  // What a checkpoint of this step would hold: without logical shards the ranks' buffers
  // differ, and a checkpoint holds their mean. Averaged in a copy, so that training goes on
  // exactly as without snapshots.
  std::span<const float> buffers = model_->buffers();
  std::vector<float> mean_buffers;
  if (config.logical_shards == 0 && world > 1 && !buffers.empty()) {
    mean_buffers.assign(buffers.begin(), buffers.end());
    comm.allreduce(mean_buffers, AllreduceAlgo::kMpi, /*mean=*/true);
    buffers = mean_buffers;
  }
  if (!snapshots->leader()) return;
  // Read access (a ParamsSpan would mark the layers' weight copies stale). The thread copies
  // the parameters and optimizer state after take() returns: TrainStep's optimizer update
  // waits for it (make_step()).
  switch (snapshots->take(pos.global_step, std::as_const(*model_).params(), buffers, optimizer->state(),
                          snapshot_meta())) {
    case SnapshotWriter::Taken::kYes:
      break;
    case SnapshotWriter::Taken::kBusy:
      record_event(fmt::format("snapshot at step {} skipped: the previous one is still being written", pos.global_step));
      break;
    case SnapshotWriter::Taken::kFailed:
      record_event(fmt::format("snapshot at step {} not written (see the warning)", pos.global_step));
      break;
  }
}

Json Trainer::State::snapshot_meta() const {
  EpochTotals totals = epoch_totals;
  totals.seconds = epoch_seconds();
  return checkpoint_meta(config, *model_, world,
                         {pos, totals, elapsed(), optimizer->name(), optimizer->steps_taken(),
                          schedule->lr(static_cast<double>(pos.epoch)), last_test_accuracy});
}

void Trainer::State::remove_snapshots() {
  if (snapshot_root.empty()) return;
  snapshots.reset();  // its thread and channel first (finish() has delivered everything)
  comm.barrier();     // no node still writing a copy into the directory
  const NodePlace place = comm.node_place();
  if (place.leader_of(place.node) != rank) return;
  const std::string why = remove_snapshot_root(snapshot_root);
  if (!why.empty()) {
    fmt::print(stderr, "ringtrain: [rank {}] warning: snapshots not removed: {}\n", rank, why);
    std::fflush(stderr);
  }
}

TrainingRun::LoopCheckpoint Trainer::State::checkpoint_data() {
  LoopCheckpoint ck{pos, {}, {}, {}};
  if (root()) {
    ck.meta = checkpoint_meta(config, *model_, world,
                              {pos, epoch_totals, elapsed(), optimizer->name(), optimizer->steps_taken(),
                               schedule->lr(static_cast<double>(pos.epoch)), last_test_accuracy});
    ck.optimizer_state = optimizer->state();
  }
  return ck;
}

}  // namespace ringtrain
