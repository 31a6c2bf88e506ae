// The dataset flags every data-reading subcommand shares (--dataset, --data-dir, --synthetic-*,
// --mean/--std, --no-normalize, the folder's --crop and friends), bound into a DatasetConfig, and
// their reading after parsing.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "datasets/Dataset.h"

namespace ringtrain {

class DataOptions {
 public:
  DataOptions() = default;
  // CLI11 writes into this object's fields: it stays where it is.
  DataOptions(const DataOptions&) = delete;
  DataOptions& operator=(const DataOptions&) = delete;

  // Adds the flags to `sub`, bound to `data` (which must outlive the parse) and to this object.
  void add(CLI::App& sub, DatasetConfig& data);
  // The bound DatasetConfig with the synthetic shape and --mean/--std parsed; throws
  // std::invalid_argument naming the flag.
  DatasetConfig resolve() const;

 private:
  DatasetConfig* data_ = nullptr;
  std::string synthetic_shape_ = "1x28x28";
  // --mean / --std text (comma-separated, parsed in resolve).
  std::string mean_text_;
  std::string std_text_;
  // Folder images: --crop, --crop-scale, --crop-ratio text; --bad-images.
  std::string crop_text_;
  std::string crop_scale_text_;
  std::string crop_ratio_text_;
  std::string bad_images_ = "error";

  void add_folder_options(CLI::App& sub, DatasetConfig& data);
};

}  // namespace ringtrain
