// A training run's checkpoints, whichever loop writes them: the metadata both loops record,
// writing with pruning and a log record, and finding, loading and checking the one a run
// resumes from. The format itself is Checkpoint.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "checkpoint/Checkpoint.h"
#include "collectives/Communicator.h"
#include "common/Json.h"
#include "common/LoopPosition.h"
#include "config/TrainConfig.h"
#include "logs/RunLog.h"

namespace ringtrain {

class Model;

// --resume: the checkpoint to continue from, read collectively and checked against the model;
// nothing when --resume is empty, or "auto" and neither checkpoint_dir nor snapshot_root
// holds one. With "auto" and a snapshot_root (SnapshotStore.h), each node's leader looks for
// the newest complete snapshot it can see (skipping torn ones with a warning), the ranks
// agree on the newest step anywhere, and the lowest rank holding it broadcasts it; it wins
// over the newest checkpoint (rank 0's listing) when its step is higher.
struct ResumeCheckpoint {
  CheckpointData data;
  std::filesystem::path path;
  std::string kind = "checkpoint";  // or "snapshot"
  int holder = 0;                   // the rank that read it
};
std::optional<ResumeCheckpoint> load_resume_checkpoint(Communicator& comm, const std::string& resume,
                                                     const std::filesystem::path& checkpoint_dir, const Model& model,
                                                     const std::filesystem::path& snapshot_root = {});

// Throws CollectiveError unless the checkpoint's optimizer is `name` with `state_size` floats.
void check_checkpoint_optimizer(const CheckpointData& ck, const std::string& name, std::size_t state_size,
                                const std::string& source);

// A checkpoint's position and what it restores besides the buffers.
struct CheckpointPoint {
  LoopPosition at;
  EpochTotals totals;
  double elapsed_s = 0.0;
  std::string optimizer;
  std::uint64_t optimizer_steps = 0;
  double lr = 0.0;
  double test_accuracy = 0.0;
  int world_size = 1;  // of the run that wrote it
  int batch_size = 0;
  int logical_shards = 0;  // --logical-shards of the run that wrote it (0: off)
};

// The metadata both modes write; the async trainer adds its position in tickets.
Json checkpoint_meta(const TrainConfig& config, const Model& model, int world, const CheckpointPoint& point);
// The position, totals, optimizer and writer of a checkpoint already validated key by key
// (lr and test_accuracy, which nothing restores, stay at their defaults).
CheckpointPoint checkpoint_point(const Json& meta);

// Copies the checkpoint's parameters and buffers into the model.
void restore_model(const CheckpointData& ck, Model& model);

// Root only: writes ck as checkpoint_dir/<step's file>, prunes to --keep-checkpoints and logs a
// checkpoint record (t: elapsed() once written, seconds: since started). Returns the path.
std::filesystem::path write_checkpoint(const CheckpointView& ck, const TrainConfig& config,
                                       const std::filesystem::path& checkpoint_dir, const LoopPosition& at,
                                       RunLog& log, const std::function<double()>& elapsed,
                                       std::chrono::steady_clock::time_point started);

}  // namespace ringtrain
