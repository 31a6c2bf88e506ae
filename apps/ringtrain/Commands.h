// The ringtrain subcommands: their flags (bound into config structs) and their actions.
#pragma once

#include <map>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "collectives/Communicator.h"
#include "collectives/StallWatchdog.h"
#include "config/TrainConfig.h"

namespace ringtrain {

class Commands {
 public:
  explicit Commands(CLI::App& app);

  // train and eval run under mpirun; models, datasets, inspect and trace are local.
  bool needs_mpi() const;
  // After parsing: applies `train --config FILE` (ConfigFile.h); throws CLI::ConfigError.
  void apply_config_file();
  // train: SIGTERM/SIGINT stop it after a step with a checkpoint (StopSignals.h).
  bool stops_on_signal() const;
  int run_local();
  int run_distributed(Communicator& comm);

 private:
  void add_train(CLI::App& app);
  void add_train_model_options(CLI::App& t);
  void add_train_optimisation_options(CLI::App& t);
  void add_train_distribution_options(CLI::App& t);
  void add_train_checkpoint_options(CLI::App& t);
  void add_train_logging_options(CLI::App& t);
  void add_eval(CLI::App& app);
  void add_local(CLI::App& app);
  void add_data_options(CLI::App& sub, DatasetConfig& data, std::string& synthetic_shape);
  DatasetConfig resolve(const DatasetConfig& data, const std::string& synthetic_shape) const;
  static DatasetConfig resolve_data(DatasetConfig data, const std::string& synthetic_shape);
  // --mean / --std text per subcommand (comma-separated, parsed in resolve).
  std::map<const DatasetConfig*, std::pair<std::string, std::string>> norm_text_;

  CLI::App* train_ = nullptr;
  CLI::App* eval_ = nullptr;
  CLI::App* models_ = nullptr;
  CLI::App* datasets_ = nullptr;
  CLI::App* inspect_ = nullptr;
  CLI::App* trace_ = nullptr;
  CLI::App* export_ = nullptr;

  TrainConfig train_config_;
  StallOptions stall_;
  std::string synthetic_shape_ = "1x28x28";
  std::string milestones_;
  std::string overlap_ = "auto";  // --overlap auto|on|off
  std::string config_file_;

  DatasetConfig eval_data_;
  std::string eval_synthetic_shape_ = "1x28x28";
  std::string eval_checkpoint_;
  int eval_batch_ = 256;

  std::string models_shape_;
  DatasetConfig datasets_data_;
  std::string datasets_synthetic_shape_ = "1x28x28";
  std::string inspect_path_;
  std::string trace_dir_;
  std::string trace_out_;
  std::string export_checkpoint_;
  std::string export_onnx_;
};

}  // namespace ringtrain
