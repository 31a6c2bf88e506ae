// `ringtrain pack`: a data set written as packed shards (datasets/Packer.h); local, no MPI.
#pragma once

#include <CLI/CLI.hpp>

#include "DataOptions.h"
#include "datasets/Packer.h"

namespace ringtrain {

class PackCommand {
 public:
  explicit PackCommand(CLI::App& app);
  PackCommand(const PackCommand&) = delete;
  PackCommand& operator=(const PackCommand&) = delete;

  bool parsed() const { return sub_->parsed(); }
  int run();

 private:
  CLI::App* sub_ = nullptr;
  DatasetConfig data_;
  DataOptions data_options_;
  PackOptions options_;
  double shard_mb_ = 256.0;
};

}  // namespace ringtrain
