// Private to the trainer: the state Trainer::run() works on, shared by Trainer.cpp (set-up
// and the loop), TrainerCheckpoint.cpp (save, resume) and TrainerSummary.cpp (logs, summary).
// What every run does around its steps is TrainingRun's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/SnapshotWriter.h"
#include "optim/Optimizer.h"
#include "overlap/ExactShardSum.h"
#include "overlap/GradientSync.h"
#include "overlap/OverlapPolicy.h"
#include "run/TrainingRun.h"
#include "logs/PhaseTimes.h"
#include "step/TrainStep.h"
#include "train/Trainer.h"

namespace ringtrain {

struct Trainer::State : TrainingRun {
  using TrainingRun::comm;    // Trainer::run() hands them to AsyncTrainer in --mode async
  using TrainingRun::config;
  AllreduceAlgo algo = AllreduceAlgo::kRing;
  OverlapPolicy overlap_policy;  // what --overlap auto resolves to on this rank
  bool overlap = false;          // config.overlap as resolved, where the communicator allows it
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<GradientSync> sync;
  std::unique_ptr<ExactShardSum> shard_sum;  // --logical-shards: the exact gradient sum (else null)

  // RAM snapshots (--snapshot-every): where this run's go and --resume auto looks for them
  // (rank 0's path), the writer (null when off), the main thread's (wall) seconds on them.
  std::filesystem::path snapshot_root;
  std::unique_ptr<SnapshotWriter> snapshots;
  double snapshot_seconds = 0.0;
  double snapshot_cpu_seconds = 0.0;  // the same, in the main thread's CPU time
  Json resumed_from;  // null, or what --resume continued from: kind, path, step, holder rank

  LoopPosition pos;   // where the run stands (restored from a checkpoint)
  PhaseTimes totals;  // every step's phases (checkpoints and evaluations: TrainingRun's counters)

  // The steps one rank-<r>.jsonl step record gathers (up to --log-every).
  struct PendingSteps {
    PhaseTimes times;
    int steps = 0;
    double loss = 0.0, accuracy = 0.0;  // sums of the steps' means
    double lr = 0.0;                    // the last step's
    std::vector<std::pair<double, double>> slices;  // the last step's communication, elapsed() clock
  } pending;

  struct ResourceMark {
    Clock::time_point time;
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    double wait = 0.0;
  } last_resource;

  State(TrainConfig c, Communicator& comm_) : TrainingRun(std::move(c), comm_) {}

  void setup();
  void setup_local();  // the part before any collective
  void resolve_batch();  // --global-batch-size, --logical-shards
  void check_steps_per_epoch() const;
  // Samples per optimizer step over all ranks.
  int global_batch() const;
  void maybe_resume();
  // Snapshots (TrainerCheckpoint.cpp): the root and writer; one at pos (collective);
  // removing the run's snapshots on every node (collective).
  void setup_snapshots();
  void take_snapshot();
  // The metadata of a snapshot of this step (what a checkpoint of it would hold).
  Json snapshot_meta() const;
  void remove_snapshots();
  TrainResult train();

  // The loop's parts (Trainer.cpp).
  TrainStep make_step();
  // What the loader threads did (write_summary): their count, busy and capacity seconds.
  std::vector<double> loader_row;
  std::size_t samples_per_epoch = 0;  // training samples an epoch uses on all ranks
  void announce();
  std::string batch_text() const;  // "2 rank(s) x batch 64", for the start line
  // One step at pos; returns true when the run stops after it (a signal, --max-steps).
  bool train_one_step(TrainStep& step, std::int64_t steps_per_epoch);
  void stop_inside_step(StepResult& r);

  // TrainingRun's hooks: the mean buffers (the parameters are alike everywhere), a
  // checkpoint of pos and the epoch's sums so far (TrainerCheckpoint.cpp).
  void gather_model() override;
  LoopCheckpoint checkpoint_data() override;

  // Logs (TrainerSummary.cpp).
  void log_step(const StepResult& r, double lr, bool flush);
  void flush_steps();
  // A resource record once at least a second has passed since the previous one.
  void maybe_record_resources();
  void write_summary();

  // What the gradient all-reduce runs as for each bucket size actually used (auto's choice
  // and the predictions it came from, or the forced algorithm): the start line's words and
  // summary.json's "allreduce_plan" (TrainerSummary.cpp).
  struct BucketPlan {
    std::size_t bytes = 0;
    int buckets = 0;
    AllreducePlan plan;
  };
  std::vector<BucketPlan> bucket_plans() const;
  std::string plan_text() const;
  Json plan_json() const;
};

}  // namespace ringtrain
