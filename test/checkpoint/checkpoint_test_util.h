// Test support for the checkpoint tests: a valid checkpoint's metadata and sections, and a
// scratch directory per process.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

#include "checkpoint/Checkpoint.h"

namespace ringtrain::test {

// Metadata with every key the trainer writes, valid for 1000 parameters.
inline Json valid_meta() {
  Json config = Json::object();
  config.set("model", "lenet5");
  config.set("dataset", "synthetic");
  config.set("data_dir", "");
  config.set("normalize", true);
  config.set("mean", Json::array());
  config.set("std", Json::array());
  config.set("synthetic_shape", "1x28x28");
  config.set("synthetic_classes", 10);
  config.set("synthetic_train", 512);
  config.set("synthetic_test", 200);
  config.set("synthetic_seed", 0);
  Json m = Json::object();
  m.set("format_version", Checkpoint::kFormatVersion);
  m.set("model", "lenet5");
  m.set("signature", "conv(1->6,5x5) ...");
  m.set("input_shape", "1x28x28");
  m.set("classes", 10);
  m.set("num_params", 1000);
  m.set("world_size", 2);
  m.set("batch_size", 16);
  m.set("global_step", 1234);
  m.set("epoch", 3);
  m.set("step_in_epoch", 7);
  m.set("elapsed_s", 12.5);
  m.set("epoch_loss_sum", 3.25);
  m.set("epoch_correct", 70.0);
  m.set("epoch_count", 112.0);
  m.set("epoch_seconds", 0.75);
  m.set("seed", 42);
  m.set("optimizer", "sgd");
  m.set("optimizer_steps", 1234);
  m.set("lr", 0.01);
  m.set("test_accuracy", 0.5);
  m.set("config", std::move(config));
  return m;
}

inline CheckpointData sample() {
  CheckpointData d;
  d.meta = valid_meta();
  for (int i = 0; i < 1000; ++i) d.params.push_back(static_cast<float>(i) * 0.25f - 3.0f);
  d.buffers = {1.0f, 2.0f};
  d.optimizer_state.assign(1000, 0.5f);
  return d;
}

inline std::filesystem::path temp_dir() {
  // Per process: two suites running at once (ctest -j, two checkouts) must not share it; the
  // last test's files go when the process ends.
  static const struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("ringtrain_checkpoint_test-" + std::to_string(::getpid()));
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } owned;
  const std::filesystem::path& dir = owned.path;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace ringtrain::test
