// Asynchronous parameter-server training (--mode async --servers S [--max-staleness K]):
// ranks 0..S-1 run ParameterServer over contiguous shards, ranks S..N-1 run AsyncWorker.
// Between workers there is no barrier; all ranks meet only where the run needs all of them:
// at epoch ends (metrics, evaluation on the servers' parameters sharded over every rank),
// checkpoints and stops. Logs, checkpoints and --resume as in sync mode, plus each worker's
// steps/s and staleness histogram and each server's updates/s and traffic.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/Communicator.h"
#include "config/TrainConfig.h"
#include "run/TrainResult.h"

namespace ringtrain {

class Model;

class AsyncTrainer {
 public:
  AsyncTrainer(TrainConfig config, Communicator& comm);
  ~AsyncTrainer();

  TrainResult run();

  // After run(): the servers' final parameters, on every rank.
  const Model& model() const;
  // After run(), on every rank: how many pushed gradients had each staleness (index, in
  // SSP clocks), over all workers; the last bucket counts everything at or past it.
  const std::vector<std::int64_t>& staleness_histogram() const;

  static constexpr int kHistogramBuckets = 64;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ringtrain
