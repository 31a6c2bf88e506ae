// Readers for LeCun's IDX format (MNIST, Fashion-MNIST), raw or .gz: images magic
// 0x00000803 (uint8, 3 dims: N, rows, cols), labels magic 0x00000801 (uint8, N).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datasets/Dataset.h"
#include "datasets/ImageDataset.h"

namespace ringtrain {

struct IdxImages {
  std::size_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<std::uint8_t> pixels;  // (count, rows, cols)
};

// Both validate magic and dimensions against the (decoded) file size before allocating,
// and throw std::runtime_error "<path>: <problem>".
IdxImages read_idx_images(const std::string& path);
std::vector<std::uint8_t> read_idx_labels(const std::string& path, int classes = 10);

// Finds the IDX file `base` (e.g. "train-images-idx3-ubyte") in dir as base.gz, base, or
// the variant with a dot before "idx" (train-images.idx3-ubyte[.gz]); throws naming what
// was looked for when none exists.
std::string find_idx_file(const std::string& dir, const std::string& base);

// One split: images and labels files, counts must agree.
std::unique_ptr<ImageDataset> load_idx_split(const std::string& images_path, const std::string& labels_path,
                                             std::vector<std::string> class_names);

// train-* and t10k-* from dir.
DatasetSplits load_idx_dataset(const std::string& dir, std::vector<std::string> class_names);

}  // namespace ringtrain
