// The data-parallel training loop (design.md §4): every rank holds a replica, trains on its
// shard, averages gradients with the chosen all-reduce each step, evaluates exactly across
// ranks, logs where its time went, and checkpoints/resumes through rank 0.
#pragma once

#include <memory>

#include "collectives/Communicator.h"
#include "common/CollectiveError.h"
#include "config/TrainConfig.h"
#include "run/TrainResult.h"

namespace ringtrain {

class Model;
class AsyncTrainer;

class Trainer {
 public:
  Trainer(TrainConfig config, Communicator& comm);
  ~Trainer();

  // Trains to the end of config.epochs, --max-steps, the target accuracy, or a stop request
  // (StopSignals.h). Ranks agree on a stop inside a step (TrainStep): all of them discard
  // that step's update together and rank 0 checkpoints the last completed step.
  TrainResult run();

  // Collective, after a run that ended normally: deletes the run's RAM snapshots on every
  // node (a run that fails or is stopped by a signal keeps them for --resume auto).
  void remove_snapshots();

  // The model after run() (tests compare parameters across runs).
  const Model& model() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
  std::unique_ptr<AsyncTrainer> async_;  // --mode async runs here instead
};

}  // namespace ringtrain
