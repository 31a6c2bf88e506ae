// Reader for the CIFAR-10 binary version (Krizhevsky 2009): data_batch_1..5.bin and
// test_batch.bin, 3073-byte records (label, 1024 R, 1024 G, 1024 B, each 32x32 row-major).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "datasets/Dataset.h"
#include "datasets/ImageDataset.h"

namespace ringtrain {

inline constexpr std::size_t kCifarRecordBytes = 3073;

// The directory holding the batches: dir/cifar-10-batches-bin if it exists, else dir.
std::string cifar10_batches_dir(const std::string& dir);

// Reads and concatenates the given batch files (each a whole number of records, labels
// < 10), checking every file size before allocating.
std::unique_ptr<ImageDataset> read_cifar10_batches(const std::vector<std::string>& paths,
                                                   std::vector<std::string> class_names);

// Class names from batches.meta.txt (one per line, blank lines ignored); the official
// names when the file is absent; throws if it exists but does not hold 10 names.
std::vector<std::string> read_cifar10_class_names(const std::string& batches_dir);

DatasetSplits load_cifar10_dataset(const std::string& dir);

}  // namespace ringtrain
