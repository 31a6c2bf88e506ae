// How a training run ended, whichever loop ran it (Trainer, AsyncTrainer).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace ringtrain {

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
  std::filesystem::path model;  // <run-dir>/model.rtck; empty when a signal stopped the run
};

}  // namespace ringtrain
