// Evaluation of a checkpoint (ringtrain eval) and its description (ringtrain inspect).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "collectives/Communicator.h"
#include "datasets/Dataset.h"
#include "nn/Model.h"
#include "checkpoint/CheckpointMeta.h"
#include "common/Json.h"
#include "config/TrainConfig.h"

namespace ringtrain {

struct EvalResult {
  double loss = 0.0;
  double accuracy = 0.0;
  std::size_t samples = 0;
  std::string model;
};


// Evaluates model on every sample of `test` exactly once across the ranks (each rank a
// disjoint shard; sums all-reduced), so the result is identical on every rank and equal to
// a single process's up to summation order. loader_threads > 0: batches are made ahead on
// that many threads (BatchLoader), with the same bits. A batch that cannot be read throws
// CollectiveError on every rank. logits given: on rank 0 it becomes every test sample's
// logits in the test split's order (samples x classes, row i is sample i), gathered from the
// ranks' shards as computed (no arithmetic on the way); on the other ranks it is emptied.
EvalResult evaluate_model(Communicator& comm, Model& model, const Dataset& test, int batch_size, int loader_threads = 0,
                          std::vector<float>* logits = nullptr);

// Builds the checkpoint's model, loads it (rank 0 reads, broadcast) and evaluates it on the
// test split of `data` (each rank a disjoint shard; the sums are exact). Throws
// CollectiveError for a bad checkpoint or one of another model than the data's shape needs.
// Without `data`, the dataset the checkpoint was trained on (its config section).
EvalResult evaluate_checkpoint(Communicator& comm, const std::filesystem::path& checkpoint,
                               const std::optional<DatasetConfig>& data, int batch_size,
                               std::vector<float>* logits = nullptr);

// Evaluates the network and weights of an ONNX file (every rank reads it) on data's test split,
// as evaluate_model. Throws CollectiveError on every rank for a file that cannot be read or a
// graph that does not fit the data.
EvalResult evaluate_model_file(Communicator& comm, const std::filesystem::path& file, const DatasetConfig& data,
                               int batch_size, std::vector<float>* logits = nullptr);

// The checkpoint's model with its parameters and running statistics, read by this process
// alone (no MPI). Throws std::runtime_error naming the file for a missing, corrupt or
// inconsistent checkpoint.
Model load_model(const std::filesystem::path& checkpoint);

// --resume of a checkpoint without --model or --model-file: if it holds a model read from ONNX,
// config takes its name and graph (the weights come with the resume) and true is returned.
// Throws std::runtime_error naming the file for a checkpoint that cannot be read.
bool adopt_checkpoint_graph(const std::filesystem::path& checkpoint, TrainConfig& config);

// --resume auto without --model or --model-file: the graph of the run directory's states, as
// adopt_checkpoint_graph. Each node's leader looks at the newest checkpoint in the checkpoint
// directory, then the snapshots under the snapshot root (newest first) until one reads back
// whole; the lowest rank that found one decides for all (every state of one run directory carries the
// same graph; the resume itself then picks the newest and checks it against the model).
// Returns true when it is a model read from ONNX; false when nothing was found or it is a zoo
// model. Collective.
bool adopt_auto_resume_graph(Communicator& comm, TrainConfig& config);

// The checkpoint's metadata plus its section sizes, after full validation.
Json describe_checkpoint(const std::filesystem::path& checkpoint);

}  // namespace ringtrain
