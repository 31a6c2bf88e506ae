// Everything a training run is configured by, resolved from the command line. The apps
// parse into this struct; the trainer validates it (validate()) and owns the rest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/Dataset.h"
#include "optim/LrSchedule.h"
#include "optim/Optimizer.h"
#include "common/Json.h"

namespace ringtrain {

struct TrainConfig {
  // What to train on.
  std::string model = "lenet5";
  // A network read from this ONNX file instead of a zoo model (model becomes "onnx:<stem>").
  std::string model_file;
  bool init_weights = false;  // with model_file: initialise as the zoo would, not from the file
  // Set by the run for a model_file: its graph without weights (base64 ONNX), which every
  // checkpoint carries. Not a flag, not in to_json().
  std::string model_graph;
  DatasetConfig data;

  // How long.
  int epochs = 10;
  std::int64_t max_steps = 0;        // optimizer steps; 0 = no limit
  double target_accuracy = 0.0;      // stop when test accuracy >= this; 0 = off

  // Batch and learning rate.
  int batch_size = 64;               // per rank
  int global_batch_size = 0;         // if > 0: batch_size = global / world (must divide)
  int eval_batch_size = 0;           // per rank; 0 = max(batch_size, 256)
  int accumulate = 1;                // micro-batches summed per all-reduce
  // S > 0: the global batch is S logical shards of batch_size samples each, S / ranks per
  // rank, summed exactly (int64): the parameters do not depend on the rank count. 0: off.
  int logical_shards = 0;
  OptimizerConfig optimizer;
  // Cosine annealing over the run's epochs by default: the final epochs average out SGD's
  // noise, which a constant rate does not (logreg on Fashion-MNIST: 0.830 constant vs 0.845
  // cosine). The trainer sets schedule.total_epochs to epochs.
  LrScheduleConfig schedule = [] {
    LrScheduleConfig s;
    s.name = "cosine";
    s.base_lr = 0.01;
    return s;
  }();
  std::string lr_scaling = "none";   // none | linear (Goyal et al. 2017)
  int lr_base_batch = 0;             // linear: the batch the given lr is for; 0 = batch_size
  std::uint64_t seed = 42;

  // Distribution.
  std::string allreduce = "ring";    // ring | hier | mpi | ps | rd | rab | auto
  // The cost model's parameters for --allreduce auto (allreduce_bench --calibrate writes
  // them); empty: the built-in defaults (AllreduceCostModel.h). Read on every rank.
  std::string tuning;
  std::string compress = "none";     // gradient transport: none | bf16 | fp16
  std::string precision = "fp32";    // compute: fp32 | bf16 (activations in bf16, fp32 master weights)
  double bucket_mb = 4.0;            // gradient bucket size
  // Reduce buckets beside backward on a communication thread: on | off | auto (on across
  // nodes or with a spare core per rank; OverlapPolicy).
  std::string overlap = "auto";
  std::string mode = "sync";         // sync (all-reduce) | async (parameter servers)
  int servers = 1;                   // async: ranks 0..servers-1 serve, the rest work
  int max_staleness = -1;            // async: SSP bound K in clocks; -1 unbounded, 0 synchronous
  // OpenMP threads per rank; 0: OMP_NUM_THREADS if set, else the node's cores / its ranks.
  int threads = 0;
  double straggler_ms = 0.0;         // the last rank sleeps this long per step (a straggler), either mode
  // Loader threads per rank (BatchLoader); -1: for --dataset folder the cores this node's
  // ranks leave free (at least 1), for the in-memory sets 0 (each batch copied inline).
  int loader_threads = -1;
  int prefetch = 3;                  // batches the loader threads keep ready
  // The training order (DistributedSampler): exact (a full permutation per epoch) or block
  // (--dataset packed: blocks of about shuffle_block_mb of records in a random order,
  // samples shuffled within a window of blocks).
  std::string shuffle = "exact";
  double shuffle_block_mb = 4.0;

  // Evaluation and logging.
  int eval_every = 1;                // epochs
  // Steps per rank-<r>.jsonl step record (their sums; a TensorBoard point each). 10: a
  // 10-epoch LeNet-5 run on Fashion-MNIST at np 2 logs ~1 MB instead of 7.9 MB at 1 (measured,
  // docs/run-directory.md), and the mean of 10 steps still shows every phase's trend.
  int log_every = 10;
  std::string run_dir;               // empty: runs/<timestamp>-<model>-np<N>
  bool quiet = false;
  std::string progress = "auto";     // auto | bar | plain (rank 0's console)
  bool tensorboard = true;           // <run_dir>/tensorboard/ event files
  std::string rerun_config;          // if set, rank 0 writes it as <run_dir>/config.toml

  // Checkpoints.
  std::string checkpoint_dir;        // empty: <run_dir>/checkpoints when checkpointing
  int checkpoint_every = 0;          // epochs; 0 = off
  std::int64_t checkpoint_every_steps = 0;  // optimizer steps; 0 = off
  int keep_checkpoints = 3;          // 0 = keep all
  std::string resume;                // "", "auto" or a checkpoint path

  // RAM snapshots (SnapshotWriter.h): every N steps to each node's RAM and the next node's; 0 = off.
  std::int64_t snapshot_every = 0;
  std::string snapshot_dir;          // empty: /dev/shm/ringtrain-<run id> (SnapshotStore.h)

  // Throws std::invalid_argument naming the flag for an inconsistent configuration.
  void validate() const;
  // Throws std::invalid_argument naming --batch-size or --eval-batch-size when one batch
  // of `sample`-shaped floats alone would not fit in this machine's memory (after the
  // eval batch default is resolved; the data set's shape is known only then).
  void check_batch_memory(const ImageShape& sample) const;

  // The resolved configuration as JSON (config.json, the checkpoint's config section).
  Json to_json() const;

  // What must agree across ranks, as one canonical string (the fingerprint's input).
  std::string fingerprint_text() const;

 private:
  void set_folder_json(Json& j) const;
};

}  // namespace ringtrain
