// Checkpoint evaluation and inspection.
#include "run/Evaluate.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/MemoryBudget.h"
#include "datasets/BatchLoader.h"
#include "datasets/DistributedSampler.h"
#include "nn/Model.h"
#include "checkpoint/Checkpoint.h"
#include "checkpoint/CheckpointIo.h"
#include "checkpoint/Crc32.h"
#include "checkpoint/SnapshotStore.h"
#include "common/CollectiveError.h"
#include "onnx/OnnxModel.h"
#include "onnx/OnnxReader.h"

namespace ringtrain {

namespace {

// This rank's rows for --logits: per sample its index in the test split (uint64) then its
// logits, as raw bytes (the ranks share one machine's representation: mpirun of one binary).
void append_rows(std::string& shard, std::span<const std::size_t> idx, std::span<const float> logits, std::size_t classes) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const auto index = static_cast<std::uint64_t>(idx[i]);
    shard.append(reinterpret_cast<const char*>(&index), sizeof index);
    shard.append(reinterpret_cast<const char*>(logits.data() + i * classes), classes * sizeof(float));
  }
}

// Every rank's rows placed by index into out (samples x classes) on rank 0; out emptied elsewhere.
void gather_logits(Communicator& comm, const std::string& shard, std::size_t samples, std::size_t classes,
                   std::vector<float>& out) {
  const std::vector<std::string> all = comm.allgather(shard);
  out.clear();
  if (comm.rank() != 0) return;
  out.assign(samples * classes, 0.0f);
  const std::size_t row = sizeof(std::uint64_t) + classes * sizeof(float);
  std::size_t rows = 0;
  for (const auto& part : all) {
    for (std::size_t at = 0; at + row <= part.size(); at += row, ++rows) {
      std::uint64_t index = 0;
      std::memcpy(&index, part.data() + at, sizeof index);
      if (index >= samples) throw std::logic_error("evaluation: a logits row of a sample outside the test split");
      std::memcpy(out.data() + index * classes, part.data() + at + sizeof index, classes * sizeof(float));
    }
  }
  // The eval sampler covers every sample exactly once across the ranks.
  if (rows != samples) throw std::logic_error(fmt::format("evaluation: {} logits rows for {} samples", rows, samples));
}

}  // namespace

EvalResult evaluate_model(Communicator& comm, Model& model, const Dataset& test, int batch_size, int loader_threads,
                          std::vector<float>* logits) {
  DistributedSampler sampler(test.size(), comm.rank(), comm.size(), 0, DistributedSampler::Mode::kEval);
  sampler.set_epoch(0);
  const auto batch = static_cast<std::size_t>(std::max(batch_size, 1));
  std::vector<float> src(batch * test.shape().numel());
  std::vector<std::int32_t> labels(batch);
  std::unique_ptr<BatchLoader> loader;
  if (loader_threads > 0) loader = std::make_unique<BatchLoader>(test, loader_threads, 3);
  // Shards differ by at most one sample, so ranks may run different batch counts: no
  // collective inside the loop, one sum at the end. A batch that cannot be read (a bad
  // image) is counted there too, so every rank throws rather than one leaving the others.
  double sums[4] = {0.0, 0.0, 0.0, 0.0};  // loss sum, correct, count, failed ranks
  std::string error;
  std::string shard;  // --logits: this rank's rows
  const auto classes = static_cast<std::size_t>(model.classes());
  if (logits != nullptr)
    require_memory(saturating_product({test.size(), classes * sizeof(float) + sizeof(std::uint64_t), 3}),
                   fmt::format("--logits ({} samples x {} classes, gathered on every rank)", test.size(), classes));
  try {
    const std::size_t steps = sampler.steps(batch);
    std::size_t next = 0;
    for (std::size_t s = 0; s < steps; ++s) {
      const auto idx = sampler.batch(s, batch);
      if (loader) {
        for (; next < steps; ++next) {
          const auto ahead = sampler.batch(next, batch);
          if (!loader->request({{0, next}, {ahead.begin(), ahead.end()}, 0})) break;
        }
        loader->take(src, labels);
      } else {
        load_batch(test, idx, src.data(), labels.data(), 0);
      }
      const LossResult r = model.forward(src.data(), labels.data(), static_cast<int>(idx.size()), Phase::kEval);
      sums[0] += r.loss_sum;
      sums[1] += static_cast<double>(r.correct);
      sums[2] += static_cast<double>(r.count);
      if (logits != nullptr) append_rows(shard, idx, model.logits(), classes);
    }
  } catch (const std::runtime_error& e) {
    error = e.what();
    sums[3] = 1.0;
  }
  comm.allreduce_sum(sums);
  if (sums[3] > 0.0) {
    // Every rank reports the same line: the lowest failing rank's error.
    const std::vector<std::string> all = comm.allgather(error);
    for (std::size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty()) throw CollectiveError(fmt::format("evaluation: rank {} could not load its batch: {}", r, all[r]));
  }
  if (logits != nullptr) gather_logits(comm, shard, test.size(), classes, *logits);
  EvalResult result;
  result.loss = sums[0] / std::max(sums[2], 1.0);
  result.accuracy = sums[1] / std::max(sums[2], 1.0);
  result.samples = static_cast<std::size_t>(sums[2]);
  result.model = model.name();
  return result;
}

namespace {

// build() on every rank; a failure on any rank (the same bytes fail alike) throws on all.
Model built_collectively(Communicator& comm, const std::function<Model()>& build) {
  std::optional<Model> model;
  std::string error;
  try {
    model.emplace(build());
  } catch (const std::exception& e) {
    error = e.what();
  }
  double failed = model ? 0.0 : 1.0;
  comm.allreduce_sum(std::span(&failed, 1));
  if (failed > 0.0) throw CollectiveError(error.empty() ? "another rank could not build the model (its error says why)" : error);
  return std::move(*model);
}

}  // namespace

EvalResult evaluate_model_file(Communicator& comm, const std::filesystem::path& file, const DatasetConfig& data,
                               int batch_size, std::vector<float>* logits) {
  const DatasetSplits splits = load_dataset(data);
  Model model = built_collectively(comm, [&] { return onnx_model(read_onnx(file)); });
  if (model.input_shape() != splits.test->shape() || model.classes() != splits.test->classes())
    throw CollectiveError(fmt::format("{}: the graph takes {} and gives {} classes, the data has {} and {} classes",
                                      file.string(), model.input_shape().str(), model.classes(),
                                      splits.test->shape().str(), splits.test->classes()));
  const int threads = data.name == "folder" ? default_loader_threads(comm.ranks_on_node()) : 0;
  return evaluate_model(comm, model, *splits.test, batch_size, threads, logits);
}

EvalResult evaluate_checkpoint(Communicator& comm, const std::filesystem::path& checkpoint,
                               const std::optional<DatasetConfig>& data, int batch_size,
                               std::vector<float>* logits) {
  const CheckpointData ck = load_checkpoint_collective(comm, checkpoint);
  DatasetConfig config;
  try {
    config = data ? *data : dataset_config_of(ck.meta);
  } catch (const std::exception& e) {
    throw CollectiveError(fmt::format("{}: meta: no usable dataset configuration ({}); pass --dataset",
                                      checkpoint.string(), e.what()));
  }
  const DatasetSplits splits = load_dataset(config);
  require_memory(saturating_product({static_cast<std::uint64_t>(std::max(batch_size, 1)), splits.test->shape().numel(),
                                     sizeof(float)}),
                 fmt::format("--batch-size {} (the evaluation batch: {} x {} floats)", batch_size, batch_size,
                             splits.test->shape().str()));
  Model model = built_collectively(
      comm, [&] { return checkpoint_model(ck.meta, splits.test->shape(), splits.test->classes(), checkpoint.string()); });
  check_checkpoint_matches(ck, model, checkpoint.string());
  std::copy(ck.params.begin(), ck.params.end(), model.params().begin());
  std::copy(ck.buffers.begin(), ck.buffers.end(), model.buffers().begin());

  // Image folders decode as they go: on the cores this node's ranks leave free.
  const int threads = decodes_images(config.name) ? default_loader_threads(comm.ranks_on_node()) : 0;
  EvalResult result = evaluate_model(comm, model, *splits.test, batch_size, threads, logits);
  result.model = model.name();
  return result;
}

Model load_model(const std::filesystem::path& checkpoint) {
  const CheckpointData ck = Checkpoint::deserialize(Checkpoint::read_file(checkpoint), checkpoint.string());
  ImageShape shape;
  // validate_checkpoint_meta has checked the form CxHxW with positive sizes.
  std::sscanf(ck.meta.at("input_shape").as_string().c_str(), "%dx%dx%d", &shape.channels, &shape.height, &shape.width);
  Model model = checkpoint_model(ck.meta, shape, static_cast<int>(ck.meta.at("classes").as_int()), checkpoint.string());
  check_checkpoint_matches(ck, model, checkpoint.string());  // a CollectiveError is a std::runtime_error
  std::copy(ck.params.begin(), ck.params.end(), model.params().begin());
  std::copy(ck.buffers.begin(), ck.buffers.end(), model.buffers().begin());
  return model;
}

bool adopt_checkpoint_graph(const std::filesystem::path& checkpoint, TrainConfig& config) {
  const Json meta = Checkpoint::verify(Checkpoint::read_file(checkpoint), checkpoint.string());
  const std::string& model = meta.at("model").as_string();
  if (!is_onnx_model_name(model)) return false;
  config.model = model;
  config.model_graph = meta.at("model_graph").as_string();  // verify() checked that it is there
  return true;
}

namespace {

// "<model>\n<graph>" of the newest state of config's run directory this node can read whole
// ("<model>\n" for a zoo model), or "" when there is none.
std::string newest_state_graph(const TrainConfig& config, const std::filesystem::path& snapshot_root) {
  std::vector<std::filesystem::path> files;
  const std::filesystem::path dir = config.checkpoint_dir.empty() ? std::filesystem::path(config.run_dir) / "checkpoints"
                                                                  : std::filesystem::path(config.checkpoint_dir);
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec))
    if (auto latest = Checkpoint::latest_in(dir); !latest.empty()) files.push_back(latest);
  for (const auto& snap : list_snapshots(snapshot_root)) files.push_back(snap.path);
  for (const auto& file : files) {
    try {
      const Json meta = Checkpoint::verify(Checkpoint::read_file(file), file.string());
      const Json* graph = meta.find("model_graph");
      return meta.at("model").as_string() + "\n" + (graph != nullptr ? graph->as_string() : std::string());
    } catch (const std::exception&) {
      // Torn or unreadable (a snapshot mid-write when a node failed): the resume skips it too.
    }
  }
  return {};
}

}  // namespace

bool adopt_auto_resume_graph(Communicator& comm, TrainConfig& config) {
  // Without --run-dir the run directory is a new one: nothing to resume.
  if (config.run_dir.empty()) return false;
  // As the trainer: rank 0's default snapshot root (it hashes the absolute path), or each node's --snapshot-dir.
  const std::filesystem::path root =
      config.snapshot_dir.empty() ? std::filesystem::path(broadcast_string(comm, default_snapshot_root(config.run_dir).string(), 0))
                                  : std::filesystem::path(config.snapshot_dir);
  // One reader per node (its leader), as the resume's snapshot search: a node's ranks see the same files.
  const NodePlace place = comm.node_place();
  std::string mine;
  try {
    if (place.leader_of(place.node) == comm.rank()) mine = newest_state_graph(config, root);
  } catch (const std::exception&) {
    // A directory that cannot be listed here: another node may see the states; the resume decides.
  }
  for (const std::string& found : comm.allgather(mine)) {
    if (found.empty()) continue;
    const std::size_t cut = found.find('\n');
    const std::string model = found.substr(0, cut);
    if (!is_onnx_model_name(model) || cut + 1 >= found.size()) return false;
    config.model = model;
    config.model_graph = found.substr(cut + 1);
    return true;
  }
  return false;
}

Json describe_checkpoint(const std::filesystem::path& checkpoint) {
  const auto bytes = Checkpoint::read_file(checkpoint);
  const CheckpointData ck = Checkpoint::deserialize(bytes, checkpoint.string());
  Json j = ck.meta;
  // A model read from ONNX carries its graph (base64): its size says enough here.
  if (const Json* graph = j.find("model_graph"); graph != nullptr && graph->is_string())
    j.set("model_graph", fmt::format("<{} characters of base64 ONNX: the model's graph without weights>",
                                     graph->as_string().size()));
  Json sections = Json::object();
  sections.set("params_floats", ck.params.size());
  sections.set("buffers_floats", ck.buffers.size());
  sections.set("optimizer_floats", ck.optimizer_state.size());
  sections.set("file_bytes", bytes.size());
  // A fingerprint of the parameters alone: two checkpoints of the same state compare equal
  // here even though their metadata (wall time) differs.
  const auto param_bytes = std::as_bytes(std::span(ck.params));
  sections.set("params_crc32", static_cast<std::uint64_t>(checkpoint_crc32(param_bytes)));
  j.set("sections", std::move(sections));
  return j;
}

}  // namespace ringtrain
