// Reader for SVHN's cropped digits (Netzer et al. 2011): train_32x32.mat and
// test_32x32.mat, MAT-file v5 with X (32, 32, 3, N) uint8 column-major and y (N, 1)
// holding 1..10, where 10 means digit 0.
#pragma once

#include <memory>
#include <string>

#include "datasets/Dataset.h"
#include "datasets/ImageDataset.h"

namespace ringtrain {

std::unique_ptr<ImageDataset> read_svhn_mat(const std::string& path);

DatasetSplits load_svhn_dataset(const std::string& dir);

}  // namespace ringtrain
