// Summary statistics of a loaded dataset for `ringtrain datasets --dataset D`: counts,
// shape, per-class histogram and per-channel mean/std of both splits.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "datasets/Dataset.h"

namespace ringtrain {

struct SplitReport {
  std::size_t count = 0;
  ImageShape shape;
  int classes = 0;
  std::vector<std::string> class_names;
  std::vector<std::size_t> histogram;  // samples per class
  // Raw pixels x/255 per channel (empty when the Dataset is not backed by uint8 pixels).
  std::vector<double> raw_mean;
  std::vector<double> raw_std;
  // What get() returns (normalised), per channel.
  std::vector<double> mean;
  std::vector<double> std;
  std::vector<float> norm_mean;  // the normalisation applied (empty if unknown)
  std::vector<float> norm_std;
  std::string source;
};

struct DatasetReport {
  std::string name;
  SplitReport train;
  SplitReport test;
};

SplitReport describe_split(const Dataset& dataset);
DatasetReport describe_dataset(const std::string& name, const DatasetSplits& splits);

// Multi-line, human-readable text of the report.
std::string format_dataset_report(const DatasetReport& report);

}  // namespace ringtrain
