// What a training run does around its steps, whichever loop takes them (Trainer's
// synchronous steps, AsyncTrainer's segments of asynchronous work): the set-up both share
// (data, model, run directory, configuration check, logs), evaluation when due, the epoch's
// metrics row and line, the target accuracy, the checkpoint cadence, the stop notes, the
// run's final figures and the parts of summary.json every run has. A loop derives from it
// and says how every rank gets the whole model (to evaluate it) and how to checkpoint.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/Communicator.h"
#include "checkpoint/Checkpoint.h"
#include "common/Cores.h"
#include "common/Json.h"
#include "common/LoopPosition.h"
#include "config/TrainConfig.h"
#include "datasets/Dataset.h"
#include "logs/Progress.h"
#include "logs/ResourceMonitor.h"
#include "logs/RunLog.h"
#include "nn/Model.h"
#include "optim/LrSchedule.h"
#include "run/TrainResult.h"
#include "logs/PhaseTimes.h"

namespace ringtrain {

class TrainingRun {
 public:
  using Clock = std::chrono::steady_clock;

  TrainingRun(TrainConfig config, Communicator& comm);
  virtual ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // The model after the run (tests compare parameters across runs).
  const Model& model() const;

 protected:
  // ---- What the loop supplies.
  // Every rank ends up holding the parameters and the (mean) buffers to evaluate with.
  virtual void gather_model() = 0;
  // What a checkpoint of where the loop stands holds, once gather_model() has run
  // (collective; meta and optimizer_state are filled on rank 0 only): the metadata and where
  // the optimizer state in the sync layout lives; the parameters and buffers are the
  // model's own. Written from where it lives, nothing is copied.
  struct LoopCheckpoint {
    LoopPosition at;
    Json meta;
    std::span<const float> optimizer_state;
    // What optimizer_state points into when the state had to be gathered (async: the
    // servers' shards). On the heap, so the span survives moving; not copyable.
    std::unique_ptr<const std::vector<float>> gathered;

    CheckpointView view(const Model& model) const { return {meta, model.params(), model.buffers(), optimizer_state}; }
  };
  virtual LoopCheckpoint checkpoint_data() = 0;

  // --loader-threads resolved (TrainConfig::loader_threads): the threads each rank's
  // BatchLoader runs, 0 for none.
  int loader_threads() const;

  // ---- Set-up, in this order.
  // Rank, world, hosts and the OpenMP threads per rank (set_threads); call before anything else.
  void identify();
  // The dataset (config.data), the model initialised from the seed, the LR schedule, after
  // the checks every mode makes of the configuration.
  void load_data_and_model();
  // --model-file: the network and its weights from ONNX (load_data_and_model's other half).
  void load_model_file();
  // Every rank has rank 0's flags and model (else CollectiveError on every rank), and rank
  // 0's initial parameters and buffers.
  void agree_on_start();
  // run_dir (rank 0's name for it; `suffix` after the default name) and checkpoint_dir.
  void choose_run_dir(std::string_view suffix);
  // The run log (append: a resumed run's files are kept; tensorboard: with TensorBoard's
  // event files), progress, and rank 0's config.json (`config_json`: base_config_json()
  // plus the loop's own fields) and config.toml.
  void open_logs(bool append, bool tensorboard, const Json& config_json);
  // config.json's fields every run has.
  Json base_config_json() const;

  // ---- The loop.
  // From here a stop signal is a request the loop answers (StopSignals.h); the clocks start.
  void begin_training();
  // Epoch `epoch` (0-based) of `steps` steps begins: its clock and progress bar.
  void begin_epoch(int epoch, std::int64_t steps);
  // Training seconds of the current epoch so far (a resumed epoch counts its earlier part).
  double epoch_seconds() const;
  // Seconds of training in the run, earlier runs of a resume included.
  double elapsed() const;
  bool root() const { return rank == 0; }

  // Whether the step or epoch just completed is one to checkpoint after.
  bool checkpoint_due_after_step(std::int64_t global_step) const;
  bool checkpoint_due_after_epoch(int epochs_done, std::int64_t global_step) const;
  // save_checkpoint(), its seconds counted; returns them.
  double checkpoint_now();
  // The start line's end: threads per rank, run directory, where the model will be saved.
  std::string placement() const;
  // <run-dir>/model.rtck, where a finished run keeps its model (TrainResult::model).
  std::filesystem::path model_path() const { return run_dir / "model.rtck"; }

  // The end of epoch `epoch` (0-based) at `global_step`: the epoch's train figures, the
  // evaluation when due (every --eval-every epochs, the last epoch, a stopping run, or any
  // epoch with --target-accuracy), the metrics.csv row and the epoch line. Returns true when
  // the target accuracy is reached (the run stops).
  bool end_epoch(int epoch, std::int64_t global_step, std::int64_t steps_per_epoch, bool stopping);
  // The run stopped inside epoch `epoch`: says so when a signal stopped it.
  void note_stopped_mid_epoch(int epoch, std::int64_t global_step) const;
  // After the loop: the final evaluation if the last step was not evaluated (--max-steps),
  // result's figures, and unless a signal stopped the run, model_path() (collective).
  void finish(int epoch, std::int64_t global_step);

  // An event record in rank-<r>.jsonl.
  void record_event(const std::string& message);
  // Once per process, after its first completed step (global step `global_step`): an event
  // with the wall-clock time (`unix_s`), flushed at once. The rank logs' `t` counts training
  // seconds only, so this is what tells an elastic launcher (scripts/mpirun/elastic.py) when
  // a relaunch trained again and which step it resumed from.
  void note_first_step(std::int64_t global_step);
  // A resource record's common fields over the last dt seconds of traffic.
  Json resource_record(const ResourceSample& sample, std::uint64_t bytes_sent, std::uint64_t bytes_received,
                       double dt) const;

  // ---- summary.json.
  // This rank's common figures: wall time, phases (checkpoint and eval from this run's
  // counters), peak RSS, mean CPU, MB moved. Rows are gathered with gather_rows().
  std::vector<double> common_row(PhaseTimes phases, std::uint64_t bytes_sent, std::uint64_t bytes_received);
  static constexpr std::size_t kCommonRowWidth = 14;
  // rank r's common_row as its summary entry (rank, host, wall, phases, memory, CPU, traffic).
  Json common_rank_json(int r, const double* row, double images) const;
  // The run's fields every summary has; the loop adds its own and the ranks.
  Json summary_head(double images) const;
  // Every rank's row (all rows the same width), on every rank: row r is rank r's `mine`.
  std::vector<double> gather_rows(const std::vector<double>& mine);

  TrainConfig config;
  Communicator& comm;
  int rank = 0;
  int world = 1;
  std::vector<std::string> hosts;

  DatasetSplits data;
  std::unique_ptr<Model> model_;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<RunLog> log;
  std::unique_ptr<Progress> progress;
  ResourceMonitor monitor;
  std::filesystem::path run_dir;
  std::filesystem::path checkpoint_dir;
  std::filesystem::path last_checkpoint;

  EpochTotals epoch_totals;  // the current epoch's sums (restored from a checkpoint)
  double prior_elapsed = 0.0;  // training seconds before a resume
  double eval_seconds = 0.0;
  double checkpoint_seconds = 0.0;
  double last_test_loss = std::nan("");
  double last_test_accuracy = std::nan("");
  double last_train_loss = std::nan("");
  std::int64_t last_eval_step = -1;
  TrainResult result;

 private:
  // gather_model(), then the test set's loss and accuracy into last_*; returns seconds.
  double evaluate_now(std::int64_t global_step);
  void final_evaluation(int epoch, std::int64_t global_step);
  // gather_model() and checkpoint_data() into checkpoint_dir (pruned, logged) on rank 0;
  // every rank gets its path in last_checkpoint. Returns seconds.
  double save_checkpoint();
  // The final model, as a checkpoint (resumable, and what eval, inspect and export read),
  // written by rank 0 as model_path().
  void save_model(std::int64_t global_step);

  // --threads, else OMP_NUM_THREADS, else this rank's share of the node's cores (Cores.h),
  // applied with omp_set_num_threads; warns once per node when the node is oversubscribed.
  void set_threads();

  ThreadChoice threads_;
  Clock::time_point train_start_;
  Clock::time_point epoch_start_;
  double epoch_seconds_before_ = 0.0;
  bool first_step_noted_ = false;
};

}  // namespace ringtrain
