// Private to AsyncTrainer: the state its run works on, shared by AsyncTrainer.cpp (set-up and
// the loop) and AsyncTrainerRecords.cpp (checkpoints, resume, logs, summary).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "collectives/PeerChannel.h"
#include "datasets/Dataset.h"
#include "nn/Model.h"
#include "optim/LrSchedule.h"
#include "async/AsyncTrainer.h"
#include "async/AsyncWorker.h"
#include "common/LoopPosition.h"
#include "async/ParameterServer.h"
#include "logs/Progress.h"
#include "logs/ResourceMonitor.h"
#include "logs/RunLog.h"
#include "async/ShardLayout.h"

namespace ringtrain {

struct AsyncTrainer::State {
  using Clock = std::chrono::steady_clock;

  TrainConfig config;
  Communicator& comm;
  int rank = 0;
  int world = 1;
  int servers = 1;
  int workers = 1;

  DatasetSplits data;
  std::unique_ptr<Model> model;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<ShardLayout> layout;
  std::unique_ptr<PeerChannel> channel;
  std::unique_ptr<ParameterServer> server;  // ranks < servers
  std::unique_ptr<AsyncWorker> worker;      // the others
  std::size_t state_slots = 0;              // optimizer state floats per parameter
  std::string optimizer_name;

  std::unique_ptr<RunLog> log;
  std::unique_ptr<Progress> progress;
  ResourceMonitor monitor;
  std::filesystem::path run_dir;
  std::filesystem::path checkpoint_dir;
  std::filesystem::path last_checkpoint;
  std::vector<std::string> hosts;

  // Position (restored from a checkpoint): batches ("tickets") of the epoch done, and the
  // servers' optimizer updates, which is what "step" means in async mode.
  int epoch = 0;
  std::int64_t tickets_per_epoch = 0;  // workers x batches per sampler shard
  std::int64_t tickets_done = 0;
  std::int64_t global_step = 0;
  double prior_elapsed = 0.0;
  EpochTotals epoch_totals;

  // This rank's totals.
  WorkerTimes worker_totals;
  std::int64_t worker_steps = 0;
  std::int64_t logged_steps = 0;  // worker steps already in step records (resumed runs count anew)
  double segment_seconds = 0.0;  // time inside serve()/run(): what steps/s and updates/s divide by
  double checkpoint_seconds = 0.0;
  double eval_seconds = 0.0;
  std::vector<std::int64_t> staleness_all;  // after run: every worker's, summed

  Clock::time_point train_start;
  Clock::time_point epoch_started;
  double last_test_loss = std::nan("");
  double last_test_accuracy = std::nan("");
  double last_train_loss = std::nan("");
  std::int64_t last_eval_step = -1;

  struct Mark {
    Clock::time_point time;
    std::uint64_t sent = 0, received = 0;
    std::int64_t updates = 0;
  } last_tick;

  State(TrainConfig c, Communicator& comm_) : config(std::move(c)), comm(comm_) {}

  bool root() const { return rank == 0; }
  bool is_server() const { return rank < servers; }
  double elapsed() const { return prior_elapsed + std::chrono::duration<double>(Clock::now() - train_start).count(); }
  // One optimizer update takes this many tickets: K = 0 updates once per round of W.
  std::int64_t tickets_per_update() const { return config.max_staleness == 0 ? workers : 1; }
  std::uint64_t bytes_sent() const { return comm.bytes_sent() + channel->stats().bytes_sent; }
  std::uint64_t bytes_received() const { return comm.bytes_received() + channel->stats().bytes_received; }

  void setup();
  void setup_local();
  TrainResult train();
  // Every rank gets the servers' parameters and the workers' mean buffers.
  void gather_model();
  std::pair<double, double> evaluate();

  void maybe_resume();
  double save_checkpoint();
  void record_worker(const WorkerRecord& r);
  void on_tick();  // about once a second during a segment
  void record_resources();
  void write_summary(const TrainResult& result);
};

}  // namespace ringtrain
