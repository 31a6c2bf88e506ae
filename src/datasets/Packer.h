// `ringtrain pack`: a data set (an image folder or an in-memory array set) written as packed
// shards, each image resized so its longer side is at most max_side and stored as a JPEG at
// `quality` or as raw pixels, with the source's normalisation recorded in the index.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "datasets/Dataset.h"
#include "datasets/ShardWriter.h"

namespace ringtrain {

struct PackOptions {
  std::string out;             // the shard directory (created)
  int max_side = 0;            // 0: images keep their size
  int quality = 90;            // JPEG quality
  bool raw = false;            // raw 8-bit pixels instead of JPEG
  std::uint64_t shard_bytes = kDefaultShardBytes;
  bool overwrite = false;      // replace the packed files of a non-empty `out`
};

struct PackResult {
  std::size_t train = 0;
  std::size_t val = 0;
  std::size_t shards = 0;
  std::uint64_t bytes = 0;
  std::vector<std::string> skipped;  // folder images that failed (--bad-images skip)
};

// Packs config's data set. Throws std::invalid_argument for bad options or an output that
// exists and is not empty (without overwrite), std::runtime_error naming the file when a
// source image cannot be read (unless config.skip_bad_images) or an output cannot be written.
// progress, if set, is called after each split with its name and record count.
PackResult pack_dataset(const DatasetConfig& config, const PackOptions& options,
                        const std::function<void(const std::string&, std::size_t)>& progress = {});

// The size an image of width x height is stored at: the longer side at most max_side (0:
// unchanged), the aspect kept, each side at least 1.
void packed_size(int width, int height, int max_side, int& out_width, int& out_height);

}  // namespace ringtrain
