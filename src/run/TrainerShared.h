// What the synchronous loop (Trainer) and the asynchronous one (AsyncTrainer) share: the run
// directory's default name, the cross-rank configuration check, and the fields of
// config.json, checkpoints, epoch lines and summary.json that both write, so a field is
// written in one place whichever mode the run is in.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/Communicator.h"
#include "common/Json.h"
#include "datasets/Dataset.h"
#include "checkpoint/Checkpoint.h"
#include "common/LoopPosition.h"
#include "logs/ResourceMonitor.h"
#include "logs/RunLog.h"
#include "config/TrainConfig.h"
#include "run/TrainResult.h"

namespace ringtrain {

class Model;

// runs/<local time>-<model>-np<N><suffix>: rank 0's clock decides (broadcast by the caller).
std::string default_run_dir(const std::string& model, int world, std::string_view suffix = {});

// Throws CollectiveError on every rank unless every rank has rank 0's flags and model.
void check_configuration_agrees(Communicator& comm, const TrainConfig& config, const Model& model);

// config.json's fields common to both modes; the caller adds its own (global batch, buckets
// or shards) before writing. versions: versions_json() as text.
Json base_config_json(const TrainConfig& config, int world, const std::vector<std::string>& hosts,
                      const DatasetSplits& data, const Model& model, const std::filesystem::path& checkpoint_dir,
                      const std::string& versions);

// --resume: the checkpoint to continue from, read collectively and checked against the model;
// nothing when --resume is empty, or "auto" and checkpoint_dir holds none.
struct ResumeCheckpoint {
  CheckpointData data;
  std::filesystem::path path;
};
std::optional<ResumeCheckpoint> load_resume_checkpoint(Communicator& comm, const std::string& resume,
                                                     const std::filesystem::path& checkpoint_dir, const Model& model);

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
};

// The checkpoint metadata both modes write; the async trainer adds its position in tickets.
Json checkpoint_meta(const TrainConfig& config, const Model& model, int world, const CheckpointPoint& point);

// Root only: writes ck as checkpoint_dir/<step's file>, prunes to --keep-checkpoints and logs a
// checkpoint record (t: elapsed() once written, seconds: since started). Returns the path.
std::filesystem::path write_checkpoint(const CheckpointData& ck, const TrainConfig& config,
                                       const std::filesystem::path& checkpoint_dir, const LoopPosition& at,
                                       RunLog& log, const std::function<double()>& elapsed,
                                       std::chrono::steady_clock::time_point started);

// An eval record of rank-<r>.jsonl.
Json eval_record(double t, int epoch, std::int64_t step, double test_loss, double test_accuracy, double seconds);

// A resource record of rank-<r>.jsonl: the sample and the traffic over the last dt seconds.
Json resource_record(double t, const ResourceSample& sample, std::uint64_t bytes_sent, std::uint64_t bytes_received,
                     double dt);

// The progress line at the end of an epoch.
std::string epoch_line(const EpochMetrics& m, int epochs, double seconds);

// Every rank's row of per-rank figures (all rows the same width), on every rank: row r of the
// result is rank r's `mine`.
std::vector<double> gather_rows(Communicator& comm, const std::vector<double>& mine);

// summary.json's fields about how the run ended.
void set_result_fields(Json& summary, const TrainResult& result, const TrainConfig& config);

}  // namespace ringtrain
