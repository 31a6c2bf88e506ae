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
#include "train/GradientSync.h"
#include "train/Json.h"
#include "train/Progress.h"
#include "train/ResourceMonitor.h"
#include "train/RunLog.h"
#include "train/Trainer.h"

namespace ringtrain {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Per-phase seconds of one or more steps.
struct PhaseTimes {
  double data = 0, forward = 0, backward = 0, allreduce = 0, wait = 0, optimizer = 0, checkpoint = 0, eval = 0;
  PhaseTimes& operator+=(const PhaseTimes& o) {
    data += o.data;
    forward += o.forward;
    backward += o.backward;
    allreduce += o.allreduce;
    wait += o.wait;
    optimizer += o.optimizer;
    checkpoint += o.checkpoint;
    eval += o.eval;
    return *this;
  }
  Json to_json() const {
    Json j = Json::object();
    j.set("data", data);
    j.set("forward", forward);
    j.set("backward", backward);
    j.set("allreduce", allreduce);
    j.set("wait", wait);
    j.set("optimizer", optimizer);
    j.set("checkpoint", checkpoint);
    j.set("eval", eval);
    return j;
  }
};

struct Trainer::State {
  TrainConfig config;
  Communicator& comm;
  int rank = 0;
  int world = 1;
  AllreduceAlgo algo = AllreduceAlgo::kRing;

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

  // Position and running totals (restored from a checkpoint).
  int epoch = 0;                   // current epoch, 0-based
  std::int64_t step_in_epoch = 0;  // optimizer steps done in the current epoch
  std::int64_t global_step = 0;
  double prior_elapsed = 0.0;      // training seconds before a resume
  double epoch_loss_sum = 0.0;
  double epoch_correct = 0.0;
  double epoch_count = 0.0;
  double epoch_seconds = 0.0;

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
  void check_configuration_agrees();
  void maybe_resume();
  void average_buffers();
  std::pair<double, double> evaluate();
  double save_checkpoint();
  TrainResult train();
  void write_summary(const TrainResult& result);
  // rank-<r>.jsonl records.
  void record_steps(const PhaseTimes& t, int steps, double mean_loss, double mean_accuracy, double lr,
                    std::int64_t images);
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
