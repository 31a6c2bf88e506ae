// The dataset flags shared by train, eval and datasets, and their reading into a DatasetConfig.
#include "DataOptions.h"

#include <cstdio>
#include <stdexcept>

#include <fmt/format.h>

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
  // Labels are one byte, as in every dataset reader (ImageDataset holds at most 256 classes).
  sub.add_option("--synthetic-classes", data.synthetic_classes, "Synthetic data: classes")
      ->capture_default_str()
      ->check(from_to(2, 256));
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
  add_folder_options(sub, data);
}

void DataOptions::add_folder_options(CLI::App& sub, DatasetConfig& data) {
  sub.add_option("--crop", crop_text_,
                 "Folder images: train on random-resized crops (scale, ratio as below, then a flip) and evaluate on "
                 "the centre SIZE x SIZE of the image resized to SIZE/0.875: random-resized:SIZE");
  sub.add_option("--crop-scale", crop_scale_text_, "Random-resized crop: area fraction MIN,MAX (default 0.08,1)");
  sub.add_option("--crop-ratio", crop_ratio_text_, "Random-resized crop: aspect ratio MIN,MAX (default 0.75,1.333)");
  sub.add_flag_callback("--no-flip", [&data] { data.crop.flip = false; }, "Random-resized crop: no horizontal flip");
  sub.add_option("--channels", data.channels, "Folder images: 1 or 3 channels (default: 1 when every training image "
                                              "is gray, else 3)")
      ->check(CLI::IsMember({1, 3}));
  sub.add_option("--max-pixels", data.max_pixels, "Refuse images whose header claims more pixels than this")
      ->capture_default_str()
      ->check(at_least(1));
  sub.add_option("--val-fraction", data.val_fraction,
                 "Folder without train/ and val/: this fraction of each class is the validation set (a fixed, even "
                 "choice)")
      ->check(from_to(0.0, 1.0));
  sub.add_option("--bad-images", bad_images_, "Folder images that cannot be decoded: error (stop the run) or skip "
                                              "(count them and list them in summary.json)")
      ->capture_default_str()
      ->check(CLI::IsMember({"error", "skip"}));
}

namespace {

// "MIN,MAX" of a flag, or the defaults when the text is empty.
void parse_range(const std::string& text, const char* flag, double& lo, double& hi) {
  if (text.empty()) return;
  const std::vector<double> v = parse_list(text, flag);
  if (v.size() != 2) throw std::invalid_argument(fmt::format("{}: expected MIN,MAX, got '{}'", flag, text));
  lo = v[0];
  hi = v[1];
}

}  // namespace

DatasetConfig DataOptions::resolve() const {
  DatasetConfig out = *data_;
  out.synthetic_shape = parse_shape(synthetic_shape_, "--synthetic-shape");
  for (double v : parse_list(mean_text_, "--mean")) out.norm_mean.push_back(static_cast<float>(v));
  for (double v : parse_list(std_text_, "--std")) out.norm_std.push_back(static_cast<float>(v));
  if (out.norm_mean.empty() != out.norm_std.empty()) {
    throw std::invalid_argument("--mean and --std go together: give both or neither");
  }
  if (!crop_text_.empty()) {
    const std::string prefix = "random-resized:";
    int size = 0;
    if (crop_text_.rfind(prefix, 0) != 0 || std::sscanf(crop_text_.c_str() + prefix.size(), "%d", &size) != 1 || size < 1 ||
        fmt::format("{}{}", prefix, size) != crop_text_)
      throw std::invalid_argument(fmt::format("--crop: expected random-resized:SIZE (SIZE >= 1), got '{}'", crop_text_));
    out.crop.size = size;
  }
  parse_range(crop_scale_text_, "--crop-scale", out.crop.scale_min, out.crop.scale_max);
  parse_range(crop_ratio_text_, "--crop-ratio", out.crop.ratio_min, out.crop.ratio_max);
  out.skip_bad_images = bad_images_ == "skip";
  return out;
}

}  // namespace ringtrain
