// `ringtrain datasets --dataset folder`: what a folder holds, from its headers alone
// (images per class, a histogram of sizes, files that cannot be read), and with --time one
// epoch decoded and augmented as training would, on loader threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "datasets/Dataset.h"

namespace ringtrain {

// Text of the report of load_folder_dataset's splits.
std::string describe_folder(const DatasetSplits& splits);

// Text of the report of load_packed_dataset's splits: records per class, shards, encoding,
// sizes (from the index alone; nothing is read from the shards).
std::string describe_packed(const DatasetSplits& splits);

struct FolderTiming {
  std::size_t images = 0;
  double seconds = 0.0;
  int threads = 0;
};

// One training epoch's batches (the sampler's order for seed, epoch 0, batch `batch`)
// produced by `threads` loader threads with the augment key training uses at epoch 0.
FolderTiming time_folder_epoch(const Dataset& train, std::uint64_t seed, int threads, int batch);

}  // namespace ringtrain
