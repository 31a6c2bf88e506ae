// The data-parallel training loop (design.md §4): every rank holds a replica, trains on its
// shard, averages gradients with the chosen all-reduce each step, evaluates exactly across
// ranks, logs where its time went, and checkpoints/resumes through rank 0.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "collectives/Communicator.h"
#include "run/TrainConfig.h"

namespace ringtrain {

class Model;
class AsyncTrainer;

// An error every rank raises together (a configuration mismatch, a bad checkpoint, a NaN
// loss): the apps report it on every rank and exit without MPI_Abort.
class CollectiveError : public std::runtime_error {
 public:
  explicit CollectiveError(const std::string& message, int exit_code = 1)
      : std::runtime_error(message), exit_code_(exit_code) {}
  // 2 for a configuration (usage) error, 1 for anything else.
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

struct TrainResult {
  int epochs_completed = 0;
  std::int64_t steps = 0;
  double final_train_loss = 0.0;
  double final_test_loss = 0.0;
  double final_test_accuracy = 0.0;
  double wall_s = 0.0;
  std::optional<double> time_to_target_s;
  std::string stopped_by;  // epochs | max_steps | target_accuracy | signal
  std::filesystem::path run_dir;
  std::filesystem::path last_checkpoint;
};

class Trainer {
 public:
  Trainer(TrainConfig config, Communicator& comm);
  ~Trainer();

  // Trains to the end of config.epochs, --max-steps, the target accuracy, or a stop request
  // (StopSignals.h). Ranks agree on a stop inside a step (TrainStep): all of them discard
  // that step's update together and rank 0 checkpoints the last completed step.
  TrainResult run();

  // The model after run() (tests compare parameters across runs).
  const Model& model() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
  std::unique_ptr<AsyncTrainer> async_;  // --mode async runs here instead
};

// FNV-1a 64, for configuration fingerprints.
std::uint64_t fingerprint64(std::string_view text) noexcept;

}  // namespace ringtrain
