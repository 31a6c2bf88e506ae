// The dataset flags shared by train, eval and datasets, and their reading into a DatasetConfig.
#include "DataOptions.h"

#include <stdexcept>

#include "FlagRange.h"
#include "FlagText.h"

namespace ringtrain {

void DataOptions::add(CLI::App& sub, DatasetConfig& data) {
  data_ = &data;
  sub.add_option("--dataset", data.name, "Dataset: " + joined(dataset_names()))
      ->capture_default_str()
      ->check(CLI::IsMember(dataset_names()));
  sub.add_option("--data-dir", data.data_dir,
                 "Directory holding the dataset's files (default for fashion-mnist: "
                 "/usr/share/datasets/fashion-mnist)");
  sub.add_option("--synthetic-shape", synthetic_shape_, "Synthetic data: sample shape CxHxW")->capture_default_str();
  sub.add_option("--synthetic-classes", data.synthetic_classes, "Synthetic data: classes")
      ->capture_default_str()
      ->check(from_to(2, 100000));
  sub.add_option("--synthetic-train", data.synthetic_train, "Synthetic data: training samples")
      ->capture_default_str()
      ->check(at_least(1));
  sub.add_option("--synthetic-test", data.synthetic_test, "Synthetic data: test samples")
      ->capture_default_str()
      ->check(at_least(1));
  sub.add_option("--synthetic-seed", data.seed, "Synthetic data: the seed that generates it (not --seed)")
      ->capture_default_str();
  sub.add_option("--mean", mean_text_,
                 "Per-channel mean of x/255 to normalise with, e.g. 0.4914,0.4822,0.4465 (default: from the "
                 "training set)");
  sub.add_option("--std", std_text_, "Per-channel std of x/255 to normalise with (default: from the training set)");
  // A callback rather than CLI11's negated flag ("!--no-..."), whose help shows "{false}".
  sub.add_flag_callback("--no-normalize", [&data] { data.normalize = false; },
                        "Feed x/255 without mean/std normalisation");
}

DatasetConfig DataOptions::resolve() const {
  DatasetConfig out = *data_;
  out.synthetic_shape = parse_shape(synthetic_shape_, "--synthetic-shape");
  for (double v : parse_list(mean_text_, "--mean")) out.norm_mean.push_back(static_cast<float>(v));
  for (double v : parse_list(std_text_, "--std")) out.norm_std.push_back(static_cast<float>(v));
  if (out.norm_mean.empty() != out.norm_std.empty()) {
    throw std::invalid_argument("--mean and --std go together: give both or neither");
  }
  return out;
}

}  // namespace ringtrain
