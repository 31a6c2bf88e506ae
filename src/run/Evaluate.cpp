// Checkpoint evaluation and inspection.
#include "run/Evaluate.h"

#include <algorithm>
#include <cstdio>
#include <memory>
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
#include "common/CollectiveError.h"

namespace ringtrain {

EvalResult evaluate_model(Communicator& comm, Model& model, const Dataset& test, int batch_size, int loader_threads) {
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
  EvalResult result;
  result.loss = sums[0] / std::max(sums[2], 1.0);
  result.accuracy = sums[1] / std::max(sums[2], 1.0);
  result.samples = static_cast<std::size_t>(sums[2]);
  result.model = model.name();
  return result;
}

EvalResult evaluate_checkpoint(Communicator& comm, const std::filesystem::path& checkpoint,
                               const std::optional<DatasetConfig>& data, int batch_size) {
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
  Model model(ck.meta.at("model").as_string(), splits.test->shape(), splits.test->classes());
  check_checkpoint_matches(ck, model, checkpoint.string());
  std::copy(ck.params.begin(), ck.params.end(), model.params().begin());
  std::copy(ck.buffers.begin(), ck.buffers.end(), model.buffers().begin());

  // Image folders decode as they go: on the cores this node's ranks leave free.
  const int threads = decodes_images(config.name) ? default_loader_threads(comm.ranks_on_node()) : 0;
  EvalResult result = evaluate_model(comm, model, *splits.test, batch_size, threads);
  result.model = model.name();
  return result;
}

Model load_model(const std::filesystem::path& checkpoint) {
  const CheckpointData ck = Checkpoint::deserialize(Checkpoint::read_file(checkpoint), checkpoint.string());
  ImageShape shape;
  // validate_checkpoint_meta has checked the form CxHxW with positive sizes.
  std::sscanf(ck.meta.at("input_shape").as_string().c_str(), "%dx%dx%d", &shape.channels, &shape.height, &shape.width);
  Model model(ck.meta.at("model").as_string(), shape, static_cast<int>(ck.meta.at("classes").as_int()));
  check_checkpoint_matches(ck, model, checkpoint.string());  // a CollectiveError is a std::runtime_error
  std::copy(ck.params.begin(), ck.params.end(), model.params().begin());
  std::copy(ck.buffers.begin(), ck.buffers.end(), model.buffers().begin());
  return model;
}

Json describe_checkpoint(const std::filesystem::path& checkpoint) {
  const auto bytes = Checkpoint::read_file(checkpoint);
  const CheckpointData ck = Checkpoint::deserialize(bytes, checkpoint.string());
  Json j = ck.meta;
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
