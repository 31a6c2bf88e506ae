// --dataset folder: the listing, one header read per file, the channel count and shape,
// and the normalisation, as load_dataset's splits.
#pragma once

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

// ImageNet's per-channel RGB statistics (torchvision's), the default for 3-channel folders.
inline constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
inline constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};

}  // namespace ringtrain
