// --dataset folder: the listing, one header read per file, the channel count and shape,
// and the normalisation, as load_dataset's splits.
#pragma once

#include <memory>
#include <stdexcept>
#include <vector>

#include "datasets/Dataset.h"

namespace ringtrain {

// Throws DataNotFound for a missing directory, std::invalid_argument for bad options, and
// std::runtime_error naming the file for an unreadable image (unless config.skip_bad_images:
// then it is left out and listed in the dataset's bad_images()) or one of another size
// (without a crop).
DatasetSplits load_folder_dataset(const DatasetConfig& config);

// The crop, channel and pixel-limit options every image collection (folder, packed) takes;
// throws std::invalid_argument naming the flag.
void validate_image_config(const DatasetConfig& config);

// The tail both image collections (folder, packed) share: with config.normalize, --mean
// and --std (both or neither, else std::invalid_argument) or, without them, default() is
// applied to both splits and recorded in `splits`; the training split augments when
// config asks for a crop or --augment; both splits move into `splits`.
struct ImageNormalisation {
  std::vector<float> mean;
  std::vector<float> std;
};
template <class ImageSet, class DefaultFn>
void finish_image_splits(const DatasetConfig& config, std::unique_ptr<ImageSet> train, std::unique_ptr<ImageSet> val,
                         DefaultFn default_normalisation, DatasetSplits& splits) {
  if (config.normalize) {
    ImageNormalisation n{config.norm_mean, config.norm_std};
    if (n.mean.empty() != n.std.empty()) throw std::invalid_argument("normalisation: give both mean and std, or neither");
    if (n.mean.empty()) n = default_normalisation(*train);
    train->set_normalization(n.mean, n.std);
    val->set_normalization(n.mean, n.std);
    splits.norm_mean = std::move(n.mean);
    splits.norm_std = std::move(n.std);
  }
  train->set_augment(config.augment || config.crop.size > 0);
  splits.train = std::move(train);
  splits.test = std::move(val);
}

// ImageNet's per-channel RGB statistics (torchvision's), the default for 3-channel folders.
inline constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
inline constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};

}  // namespace ringtrain
