// Private to AsyncTrainer: the state its run works on, shared by AsyncTrainer.cpp (set-up and
// the loop) and AsyncTrainerRecords.cpp (checkpoints, resume, logs, summary). What every run
// does around its steps is TrainingRun's.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "async/AsyncTrainer.h"
#include "async/AsyncWorker.h"
#include "async/ParameterServer.h"
#include "async/ShardLayout.h"
#include "collectives/PeerChannel.h"
#include "run/TrainingRun.h"

namespace ringtrain {

struct AsyncTrainer::State : TrainingRun {
  int servers = 1;
  int workers = 1;
  std::unique_ptr<ShardLayout> layout;
  std::unique_ptr<PeerChannel> channel;
  std::unique_ptr<ParameterServer> server;  // ranks < servers
  std::unique_ptr<AsyncWorker> worker;      // the others
  std::size_t state_slots = 0;              // optimizer state floats per parameter
  std::string optimizer_name;

  // Position (restored from a checkpoint): batches ("tickets") of the epoch done, and the
  // servers' optimizer updates, which is what "step" means in async mode.
  int epoch = 0;
  std::int64_t tickets_per_epoch = 0;  // workers x batches per sampler shard
  std::int64_t tickets_done = 0;
  std::int64_t global_step = 0;

  // This rank's totals.
  WorkerTimes worker_totals;
  std::int64_t worker_steps = 0;
  std::int64_t logged_steps = 0;  // worker steps already in step records (resumed runs count anew)
  double segment_seconds = 0.0;  // time inside serve()/run(): what steps/s and updates/s divide by
  std::vector<std::int64_t> staleness_all;  // after run: every worker's, summed

  Clock::time_point epoch_started;
  struct Mark {
    Clock::time_point time;
    std::uint64_t sent = 0, received = 0;
    std::int64_t updates = 0;
  } last_tick;

  State(TrainConfig c, Communicator& comm_) : TrainingRun(std::move(c), comm_) {}

  bool is_server() const { return rank < servers; }
  // One optimizer update takes this many tickets: K = 0 updates once per round of W.
  std::int64_t tickets_per_update() const { return config.max_staleness == 0 ? workers : 1; }
  std::int64_t updates_per_epoch() const { return tickets_per_epoch / tickets_per_update(); }
  std::uint64_t bytes_sent() const { return comm.bytes_sent() + channel->stats().bytes_sent; }
  std::uint64_t bytes_received() const { return comm.bytes_received() + channel->stats().bytes_received; }

  void setup();
  void setup_local();
  void start_roles();
  Json config_json() const;
  TrainResult train();
  void announce();
  // One segment of work, then the agreement on where the run stands; true when it stops.
  bool run_segment();
  // Where the next segment ends (tickets), and whether a checkpoint is due there.
  std::pair<std::int64_t, bool> segment_end() const;
  // This rank's part of a segment: {stop, tickets done, updates, loss sum, correct, count}.
  std::array<double, 6> work(std::int64_t limit);

  // TrainingRun's hooks: every rank gets the servers' parameters and the workers' mean
  // buffers; a checkpoint in the sync layout plus the async position.
  void gather_model() override;
  LoopCheckpoint checkpoint_data() override;

  void maybe_resume();
  void record_worker(const WorkerRecord& r);
  void on_tick();  // about once a second during a segment
  void record_resources();
  void write_summary();
  // Rank r's summary entry: its common figures and its role's (hist: where its histograms start).
  Json rank_json(int r, const double* row, std::size_t hist) const;
};

}  // namespace ringtrain
