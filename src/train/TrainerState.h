// Private to the trainer: the state Trainer::run() works on, shared by Trainer.cpp (set-up
// and the loop), TrainerCheckpoint.cpp (save, resume) and TrainerSummary.cpp (logs, summary).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "datasets/Dataset.h"
#include "nn/Model.h"
#include "optim/LrSchedule.h"
#include "optim/Optimizer.h"
#include "overlap/GradientSync.h"
#include "common/LoopPosition.h"
#include "overlap/OverlapPolicy.h"
#include "step/PhaseTimes.h"
#include "common/Json.h"
#include "logs/Progress.h"
#include "logs/ResourceMonitor.h"
#include "logs/RunLog.h"
#include "train/Trainer.h"

namespace ringtrain {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Trainer::State {
  TrainConfig config;
  Communicator& comm;
  int rank = 0;
  int world = 1;
  AllreduceAlgo algo = AllreduceAlgo::kRing;
  OverlapPolicy overlap_policy;  // what --overlap auto resolves to on this rank
  bool overlap = false;          // config.overlap as resolved, where the communicator allows it

  DatasetSplits data;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<GradientSync> sync;
  std::unique_ptr<RunLog> log;
  std::unique_ptr<Progress> progress;
  ResourceMonitor monitor;
  std::filesystem::path run_dir;
  std::filesystem::path checkpoint_dir;
  std::filesystem::path last_checkpoint;
  std::vector<std::string> hosts;

  // Where the run stands and the current epoch's sums (both restored from a checkpoint).
  LoopPosition pos;
  EpochTotals epoch_totals;
  double prior_elapsed = 0.0;      // training seconds before a resume

  PhaseTimes totals;
  Clock::time_point train_start;
  double last_test_loss = std::nan("");
  double last_test_accuracy = std::nan("");
  double last_train_loss = std::nan("");
  std::int64_t last_eval_step = -1;

  State(TrainConfig c, Communicator& comm_) : config(std::move(c)), comm(comm_) {}

  double elapsed() const { return prior_elapsed + seconds_since(train_start); }
  bool root() const { return rank == 0; }

  void setup();
  void setup_local();  // the part before any collective
  void maybe_resume();
  void average_buffers();
  std::pair<double, double> evaluate();
  // Writes the state after the steps `at` counts, with the epoch's sums so far; returns
  // the seconds it took.
  double save_checkpoint(const LoopPosition& at, const EpochTotals& totals);
  TrainResult train();
  void write_summary(const TrainResult& result);
  // rank-<r>.jsonl records. comm_slices: the last step's communication operations as
  // (start, end) on the elapsed() clock.
  void record_steps(const PhaseTimes& t, int steps, double mean_loss, double mean_accuracy, double lr,
                    std::int64_t images, const std::vector<std::pair<double, double>>& comm_slices);
  void record_eval(double seconds);
  void record_event(const std::string& message);
  // A resource record once at least a second has passed since the previous one.
  void maybe_record_resources();

  struct ResourceMark {
    Clock::time_point time;
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    double wait = 0.0;
  } last_resource;
};

}  // namespace ringtrain
