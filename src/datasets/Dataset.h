// The Dataset interface: indexed samples as normalised float (C, H, W) plus an int label,
// and the loader that builds the train/test pair named on the command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/ImageShape.h"
#include "images/CropBox.h"
#include "images/DecodedImage.h"

namespace ringtrain {

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual std::size_t size() const = 0;
  virtual ImageShape shape() const = 0;
  virtual int classes() const = 0;
  virtual int label(std::size_t i) const = 0;
  // Writes sample i, normalised, as float (C, H, W) to dst (shape().numel() floats).
  virtual void get(std::size_t i, float* dst) const = 0;
  // Sample i as training sees it: augmented as drawn from (augment_key, i) alone, so any
  // thread may produce any sample with the same bits. get() when augment_key is 0 or the
  // dataset does not augment. Must be safe to call from several threads at once.
  virtual void get_augmented(std::size_t i, float* dst, std::uint64_t augment_key) const {
    (void)augment_key;
    get(i, dst);
  }
  // Samples that could not be read and were skipped (--bad-images skip), "path: error";
  // empty for the in-memory formats, which fail when they load.
  virtual std::vector<std::string> bad_images() const { return {}; }
  // Where runs of samples stored together start (packed shards: about block_bytes each,
  // one shard's consecutive records), for --shuffle block; empty when there are none.
  virtual std::vector<std::size_t> block_starts(std::uint64_t block_bytes) const {
    (void)block_bytes;
    return {};
  }
  // Human-readable class names (may be "0".."K-1" when the format has none).
  virtual std::vector<std::string> class_names() const = 0;
};

struct DatasetConfig {
  std::string name = "fashion-mnist";  // fashion-mnist | mnist | cifar10 | svhn | synthetic | folder | packed
  std::string data_dir;                // empty: the dataset's default directory
  bool augment = false;                // random crop (pad 4) + horizontal flip, train only
  std::uint64_t seed = 0;
  // Per-channel normalisation (x/255 - mean) / std. Empty: computed from the training
  // split (one integer pass over its uint8 pixels) and applied to both splits. Given
  // values are in [0, 1] pixel units, one per channel (or one for all channels).
  std::vector<float> norm_mean;
  std::vector<float> norm_std;
  bool normalize = true;  // false: x/255 only
  // folder and packed (ImageFolder: DIR/train/<class>/..., DIR/val/<class>/...)
  CropConfig crop;                               // crop.size 0: images used as they are (one size)
  int channels = 0;                              // 1 or 3; 0: 1 when every training image is gray
  std::uint64_t max_pixels = kDefaultMaxPixels;  // larger headers are refused
  double val_fraction = 0.0;                     // > 0: split one tree (no train/ and val/)
  bool skip_bad_images = false;                  // --bad-images skip: count and list, do not stop
  // synthetic only
  ImageShape synthetic_shape{1, 28, 28};
  int synthetic_classes = 10;
  std::size_t synthetic_train = 1024;
  std::size_t synthetic_test = 256;
};

struct DatasetSplits {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> test;
  // What load_dataset used: the directory (the default filled in; empty for synthetic data)
  // and the per-channel mean/std it normalised with (given, or computed from the training
  // set; empty without normalisation).
  std::string data_dir;
  std::vector<float> norm_mean;
  std::vector<float> norm_std;
};

// Loads the named dataset. Throws std::invalid_argument for an unknown name and
// std::runtime_error naming the file and the expectation for missing or bad files.
DatasetSplits load_dataset(const DatasetConfig& config);

// The datasets load_dataset knows, for --help and error messages.
std::vector<std::string> dataset_names();

// Collections of images decoded as they are read (folder, packed): crops, loader threads
// by default, and their own normalisation rules apply.
bool decodes_images(const std::string& name);

// Fills a batch: dst is (indices.size(), C, H, W) float, labels one int32 per sample.
// With augment_key != 0 and a dataset built with augment = true, sample i gets the
// random crop/flip derived from (augment_key, i), so a batch is reproducible anywhere.
void load_batch(const Dataset& dataset, std::span<const std::size_t> indices, float* dst,
                std::int32_t* labels, std::uint64_t augment_key = 0);

}  // namespace ringtrain
