// A training run's checkpoints, whichever loop writes them (RunCheckpoint.h).
#include "checkpoint/RunCheckpoint.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "checkpoint/CheckpointIo.h"
#include "checkpoint/SnapshotStore.h"
#include "collectives/StallRecord.h"
#include "common/CollectiveError.h"
#include "nn/Model.h"

namespace ringtrain {

namespace {

// The newest complete snapshot any node's leader sees under root, if its step is above
// `above`: read by the lowest rank holding it and broadcast to every rank.
std::optional<ResumeCheckpoint> newest_snapshot_anywhere(Communicator& comm, const std::filesystem::path& root,
                                                         std::int64_t above) {
  const NodePlace place = comm.node_place();
  std::optional<FoundSnapshot> mine;
  if (!root.empty() && place.leader_of(place.node) == comm.rank()) {
    mine = newest_complete_snapshot(root, [&](const std::string& why) {
      fmt::print(stderr, "ringtrain: [rank {}] warning: skipping snapshot {}; trying the previous one\n", comm.rank(),
                 why);
      std::fflush(stderr);
    });
  }
  // step + 1 (0: none) from every rank: the highest wins, the lowest rank holding it sends.
  const std::vector<std::uint64_t> steps = comm.allgather(mine ? static_cast<std::uint64_t>(mine->file.step) + 1 : 0);
  const auto best = std::max_element(steps.begin(), steps.end());
  if (*best == 0 || static_cast<std::int64_t>(*best) - 1 <= above) return std::nullopt;
  const int holder = static_cast<int>(best - steps.begin());
  const bool held = comm.rank() == holder;
  std::uint64_t size = held ? mine->bytes.size() : 0;
  comm.broadcast(std::as_writable_bytes(std::span(&size, 1)), holder);
  std::vector<std::byte> bytes = held ? std::move(mine->bytes) : std::vector<std::byte>(size);
  comm.broadcast(std::span(bytes), holder);
  const std::string path = broadcast_string(comm, held ? mine->file.path.string() : std::string(), holder);
  return ResumeCheckpoint{Checkpoint::deserialize(bytes, path), path, "snapshot", holder};
}

// The step in a checkpoint's name (ckpt-<step>.rtck, as Checkpoint::latest_in found it).
std::int64_t step_in_name(const std::filesystem::path& path) {
  return std::stoll(path.filename().string().substr(5, 9));
}

}  // namespace

std::optional<ResumeCheckpoint> load_resume_checkpoint(Communicator& comm, const std::string& resume,
                                                     const std::filesystem::path& checkpoint_dir, const Model& model,
                                                     const std::filesystem::path& snapshot_root) {
  if (resume.empty()) return std::nullopt;
  std::filesystem::path path = resume;
  if (resume == "auto") {
    // Rank 0's directory listing decides for everyone.
    path = broadcast_string(comm, Checkpoint::latest_in(checkpoint_dir).string(), 0);
    const std::int64_t checkpoint_step = path.empty() ? -1 : step_in_name(path);
    if (auto snapshot = newest_snapshot_anywhere(comm, snapshot_root, checkpoint_step)) {
      check_checkpoint_matches(snapshot->data, model, snapshot->path.string());
      return snapshot;
    }
    if (path.empty()) {
      if (comm.rank() == 0) {
        fmt::print("ringtrain: no checkpoint in {}{}; starting fresh\n", checkpoint_dir.string(),
                   snapshot_root.empty() ? std::string() : " and no snapshot in " + snapshot_root.string());
      }
      return std::nullopt;
    }
  }
  ResumeCheckpoint r{load_checkpoint_collective(comm, path), path};
  check_checkpoint_matches(r.data, model, path.string());
  return r;
}

void check_checkpoint_optimizer(const CheckpointData& ck, const std::string& name, std::size_t state_size,
                                const std::string& source) {
  const std::string saved = ck.meta.at("optimizer").as_string();
  if (ck.optimizer_state.size() != state_size || saved != name) {
    throw CollectiveError(fmt::format(
        "{}: optimizer: the checkpoint holds {} state for '{}', this run uses '{}' with {} (pass the same "
        "--optimizer)",
        source, ck.optimizer_state.size(), saved, name, state_size));
  }
}

Json checkpoint_meta(const TrainConfig& config, const Model& model, int world, const CheckpointPoint& point) {
  Json meta = Json::object();
  meta.set("format_version", Checkpoint::kFormatVersion);
  meta.set("model", config.model);
  meta.set("signature", model.signature());
  meta.set("input_shape", model.input_shape().str());
  meta.set("classes", model.classes());
  meta.set("num_params", model.num_params());
  meta.set("world_size", world);
  meta.set("batch_size", config.batch_size);
  // The position is in global (step, shard) terms then: any rank count that divides S resumes it.
  if (config.logical_shards > 0) meta.set("logical_shards", config.logical_shards);
  meta.set("global_step", point.at.global_step);
  meta.set("epoch", point.at.epoch);
  meta.set("step_in_epoch", point.at.step_in_epoch);
  meta.set("elapsed_s", point.elapsed_s);
  meta.set("epoch_loss_sum", point.totals.loss_sum);
  meta.set("epoch_correct", point.totals.correct);
  meta.set("epoch_count", point.totals.count);
  meta.set("epoch_seconds", point.totals.seconds);
  meta.set("seed", config.seed);
  meta.set("rng", "counter-based: every stream is derived from (seed, purpose, epoch, step)");
  meta.set("optimizer", point.optimizer);
  meta.set("optimizer_steps", point.optimizer_steps);
  meta.set("lr", point.lr);
  meta.set("test_accuracy", point.test_accuracy);
  meta.set("config", config.to_json());
  return meta;
}

CheckpointPoint checkpoint_point(const Json& meta) {
  CheckpointPoint p;
  p.at.global_step = meta.at("global_step").as_int();
  p.at.epoch = static_cast<int>(meta.at("epoch").as_int());
  p.at.step_in_epoch = meta.at("step_in_epoch").as_int();
  p.totals.loss_sum = meta.at("epoch_loss_sum").as_double();
  p.totals.correct = meta.at("epoch_correct").as_double();
  p.totals.count = meta.at("epoch_count").as_double();
  p.totals.seconds = meta.at("epoch_seconds").as_double();
  p.elapsed_s = meta.at("elapsed_s").as_double();
  p.optimizer = meta.at("optimizer").as_string();
  p.optimizer_steps = static_cast<std::uint64_t>(meta.at("optimizer_steps").as_int());
  p.world_size = static_cast<int>(meta.at("world_size").as_int());
  p.batch_size = static_cast<int>(meta.at("batch_size").as_int());
  if (const Json* s = meta.find("logical_shards")) p.logical_shards = static_cast<int>(s->as_int());
  return p;
}

void restore_model(const CheckpointData& ck, Model& model) {
  std::copy(ck.params.begin(), ck.params.end(), model.params().begin());
  std::copy(ck.buffers.begin(), ck.buffers.end(), model.buffers().begin());
}

std::filesystem::path write_checkpoint(const CheckpointView& ck, const TrainConfig& config,
                                       const std::filesystem::path& checkpoint_dir, const LoopPosition& at,
                                       RunLog& log, const std::function<double()>& elapsed,
                                       std::chrono::steady_clock::time_point started) {
  // A rank stopped or slow in here is named as last seen writing the checkpoint, not merely in
  // the checkpoint phase, whose collectives the other ranks wait in meanwhile.
  const StallPhase phase("writing checkpoint");
  const std::filesystem::path path = checkpoint_dir / Checkpoint::file_name(at.global_step);
  const std::size_t bytes = Checkpoint::write(path, ck);
  Checkpoint::prune(checkpoint_dir, config.keep_checkpoints);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  Json rec = Json::object();
  rec.set("type", "checkpoint");
  rec.set("t", elapsed());
  rec.set("epoch", at.epoch);
  rec.set("step", at.global_step);
  rec.set("seconds", seconds);
  rec.set("bytes", bytes);
  rec.set("path", path.string());
  log.record(rec);
  return path;
}

}  // namespace ringtrain
