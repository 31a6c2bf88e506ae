// The train subcommand: its flags, bound into a TrainConfig, and the run they start.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "DataOptions.h"
#include "collectives/Communicator.h"
#include "collectives/StallWatchdog.h"
#include "config/TrainConfig.h"

namespace ringtrain {

class TrainCommand {
 public:
  explicit TrainCommand(CLI::App& app);
  // CLI11 writes into this object's fields: it stays where it is.
  TrainCommand(const TrainCommand&) = delete;
  TrainCommand& operator=(const TrainCommand&) = delete;

  bool parsed() const { return app_->parsed(); }
  // After parsing: applies `train --config FILE` (ConfigFile.h); throws CLI::ConfigError.
  void apply_config_file();
  // Trains under the stall watchdog; the exit code (0, or kExitStopped after a signal).
  int run(Communicator& comm);

 private:
  void add_model_options(CLI::App& t);
  void add_optimisation_options(CLI::App& t);
  void add_distribution_options(CLI::App& t);
  void add_mode_options(CLI::App& t);
  void add_stall_options(CLI::App& t);
  void add_checkpoint_options(CLI::App& t);
  void add_logging_options(CLI::App& t);

  CLI::App* app_ = nullptr;
  TrainConfig config_;
  DataOptions data_;
  StallOptions stall_;
  std::string milestones_;
  std::string overlap_ = "auto";  // --overlap auto|on|off
  std::string config_file_;
};

}  // namespace ringtrain
