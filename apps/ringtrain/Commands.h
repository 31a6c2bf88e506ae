// The ringtrain subcommands: their flags (bound into config structs) and their actions.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "DataOptions.h"
#include "PackCommand.h"
#include "TrainCommand.h"
#include "collectives/Communicator.h"

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
  void add_eval(CLI::App& app);
  void add_local(CLI::App& app);
  int list_models() const;

  TrainCommand train_;
  PackCommand pack_;
  CLI::App* eval_ = nullptr;
  CLI::App* models_ = nullptr;
  CLI::App* datasets_ = nullptr;
  CLI::App* inspect_ = nullptr;
  CLI::App* trace_ = nullptr;
  CLI::App* export_ = nullptr;

  DatasetConfig eval_data_;
  DataOptions eval_data_options_;
  std::string eval_checkpoint_;
  std::string eval_model_file_;
  bool eval_json_ = false;
  std::string eval_logits_;
  int eval_batch_ = 256;

  std::string models_shape_;
  std::string models_name_;
  std::string models_file_;
  int describe_model_file() const;
  int models_classes_ = 10;
  bool models_plan_ = false;
  int models_plan_batch_ = 32;
  bool models_no_fusions_ = false;
  DatasetConfig datasets_data_;
  DataOptions datasets_options_;
  bool datasets_time_ = false;
  int datasets_loader_threads_ = 0;
  int datasets_batch_ = 64;
  std::uint64_t datasets_seed_ = 42;
  int run_datasets();
  std::string inspect_path_;
  std::string trace_dir_;
  std::string trace_out_;
  std::string export_checkpoint_;
  std::string export_model_file_;
  std::string export_onnx_;
};

}  // namespace ringtrain
