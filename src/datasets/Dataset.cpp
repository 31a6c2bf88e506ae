// load_dataset (name -> reader, normalisation from the training split, augmentation on
// the training split only), dataset_names and the batch loader on the training path.
#include "datasets/Dataset.h"

#include <stdexcept>

#include <fmt/format.h>

#include "datasets/Cifar10Reader.h"
#include "datasets/DataNotFound.h"
#include "datasets/FolderLoader.h"
#include "datasets/IdxReader.h"
#include "datasets/ImageDataset.h"
#include "datasets/PackedDataset.h"
#include "datasets/SvhnReader.h"
#include "datasets/SyntheticDataset.h"

namespace ringtrain {
namespace {

constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// How to get a data set that is not there: named in every missing-data error.
std::string how_to_get(const std::string& name) {
  if (name == "fashion-mnist") return "Debian's dataset-fashion-mnist package has it (scripts/setup.sh installs it)";
  return fmt::format("scripts/get-data.sh {} DIR downloads it", name);
}

std::string require_dir(const DatasetConfig& config, const char* expected) {
  if (!config.data_dir.empty()) return config.data_dir;
  throw std::invalid_argument(fmt::format("dataset '{}' has no default directory: pass --data-dir DIR, where DIR holds {}; {}",
                                          config.name, expected, how_to_get(config.name)));
}

ImageDataset& as_image_dataset(Dataset& d) {
  auto* image = dynamic_cast<ImageDataset*>(&d);
  if (image == nullptr) throw std::logic_error("load_dataset: reader returned a non-ImageDataset");
  return *image;
}

DatasetSplits read_splits(const DatasetConfig& config) {
  DatasetSplits splits;
  std::string dir = config.data_dir;
  if (config.name == "fashion-mnist") {
    if (dir.empty()) dir = kFashionMnistDir;
    splits = load_idx_dataset(dir,
                              {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                               "Ankle boot"});
  } else if (config.name == "mnist") {
    splits = load_idx_dataset(require_dir(config, "train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                                                  "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (raw or .gz)"),
                              {});
  } else if (config.name == "cifar10") {
    splits = load_cifar10_dataset(
        require_dir(config, "cifar-10-batches-bin/ (or its contents: data_batch_1..5.bin, test_batch.bin)"));
  } else if (config.name == "svhn") {
    splits = load_svhn_dataset(require_dir(config, "train_32x32.mat and test_32x32.mat"));
  } else if (config.name == "synthetic") {
    splits = load_synthetic_dataset(config);
  } else {
    std::string names;
    for (const auto& n : dataset_names()) { if (!names.empty()) names += ", "; names += n; }
    throw std::invalid_argument(fmt::format("unknown dataset '{}' (known: {})", config.name, names));
  }
  splits.data_dir = dir;
  return splits;
}

}  // namespace

std::vector<std::string> dataset_names() {
  return {"fashion-mnist", "mnist", "cifar10", "svhn", "synthetic", "folder", "packed"};
}

bool decodes_images(const std::string& name) { return name == "folder" || name == "packed"; }

DatasetSplits load_dataset(const DatasetConfig& config) {
  // Image folders decode on demand: their normalisation and augmentation are their own.
  if (config.name == "folder") return load_folder_dataset(config);
  if (config.name == "packed") return load_packed_dataset(config);
  if (config.crop.size > 0)
    throw std::invalid_argument(
        fmt::format("--crop: only --dataset folder or packed have images to crop (got '{}')", config.name));
  DatasetSplits splits;
  try {
    splits = read_splits(config);
  } catch (const DataNotFound& e) {
    throw DataNotFound(fmt::format("{}; {}", e.what(), how_to_get(config.name)));
  }
  ImageDataset& train = as_image_dataset(*splits.train);
  ImageDataset& test = as_image_dataset(*splits.test);
  if (config.normalize) {
    std::vector<float> mean = config.norm_mean, std = config.norm_std;
    if (mean.empty() != std.empty())
      throw std::invalid_argument("normalisation: give both mean and std, or neither (computed from the training set)");
    if (mean.empty()) {
      const ChannelStats stats = train.channel_stats();
      mean.assign(stats.mean.begin(), stats.mean.end());
      std.assign(stats.std.begin(), stats.std.end());
    }
    train.set_normalization(mean, std);
    test.set_normalization(mean, std);
    splits.norm_mean = std::move(mean);
    splits.norm_std = std::move(std);
  }
  train.set_augment(config.augment);
  test.set_augment(false);
  return splits;
}

void load_batch(const Dataset& dataset, std::span<const std::size_t> indices, float* dst, std::int32_t* labels,
                std::uint64_t augment_key) {
  const std::size_t numel = dataset.shape().numel();
  const std::size_t size = dataset.size();
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const std::size_t i = indices[k];
    if (i >= size) throw std::out_of_range(fmt::format("load_batch: index {} out of range (dataset size {})", i, size));
    float* out = dst + k * numel;
    dataset.get_augmented(i, out, augment_key);
    labels[k] = dataset.label(i);
  }
}

}  // namespace ringtrain
