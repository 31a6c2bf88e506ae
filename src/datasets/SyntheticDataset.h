// Seeded synthetic image classification data: each class has a fixed random mean image
// and each sample is that image plus independent noise, so models can learn (and
// overfit) it and every run with the same seed sees identical data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "datasets/Dataset.h"
#include "datasets/ImageDataset.h"

namespace ringtrain {

// split 0 = train, 1 = test; both share the class means. Sample i depends only on
// (seed, split, i). Throws std::invalid_argument for a bad shape, class count or size.
std::unique_ptr<ImageDataset> make_synthetic(ImageShape shape, int classes, std::size_t count, std::uint64_t seed,
                                             int split);

DatasetSplits load_synthetic_dataset(const DatasetConfig& config);

}  // namespace ringtrain
