// A folder of JPEG/PNG images as a Dataset: nothing decoded up front (only headers read);
// every get() reads and decodes its file, so a collection larger than memory streams, and
// loader threads may call it concurrently. Training samples are random-resized crops (or
// the array sets' pad-4 shift without --crop) drawn from (augment key, index) alone.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "datasets/Dataset.h"
#include "datasets/ImageDataset.h"
#include "datasets/ImageFolder.h"
#include "datasets/ImageSampler.h"
#include "images/DecodedImage.h"

namespace ringtrain {

struct FolderDatasetOptions {
  CropConfig crop;  // crop.size 0: no crop (every image has shape's size)
  int channels = 3;
  std::uint64_t max_pixels = kDefaultMaxPixels;
  bool skip_bad_images = false;
};

class FolderDataset final : public Dataset {
 public:
  // listing.files and info are parallel; shape is (channels, size, size) with a crop, the
  // images' common size without. Throws std::invalid_argument if they disagree.
  FolderDataset(FolderListing listing, std::vector<FolderImageInfo> info, ImageShape shape, FolderDatasetOptions options);

  std::size_t size() const override { return listing_.files.size(); }
  ImageShape shape() const override { return shape_; }
  int classes() const override { return static_cast<int>(listing_.class_names.size()); }
  int label(std::size_t i) const override { return listing_.files[i].label; }
  // Evaluation form: the centre crop (with --crop) or the image as it is.
  void get(std::size_t i, float* dst) const override;
  void get_augmented(std::size_t i, float* dst, std::uint64_t augment_key) const override;
  std::vector<std::string> class_names() const override { return listing_.class_names; }

  // (x / 255 - mean[c]) / std[c], one value per channel or one for all; a zero std is 1.
  void set_normalization(std::span<const float> mean, std::span<const float> std) { sampler_.set_normalization(mean, std); }
  const std::vector<float>& norm_mean() const noexcept { return sampler_.norm_mean(); }
  const std::vector<float>& norm_std() const noexcept { return sampler_.norm_std(); }
  void set_augment(bool on) noexcept { sampler_.set_augment(on); }

  // Raw pixel statistics (x / 255) of every image decoded whole: exact integer sums.
  ChannelStats channel_stats() const;

  // Files that failed to decode so far (--bad-images skip), "path: error", sorted; the
  // loader adds those whose header already failed.
  std::vector<std::string> bad_images() const override;
  void add_bad_image(std::string error) const;

  const FolderListing& listing() const noexcept { return listing_; }
  const std::vector<FolderImageInfo>& info() const noexcept { return info_; }
  const FolderDatasetOptions& options() const noexcept { return options_; }

  // The seed of sample i's crop for a batch's augment key.
  static std::uint64_t crop_key(std::uint64_t augment_key, std::size_t i) { return ImageSampler::crop_key(augment_key, i); }

 private:
  FolderListing listing_;
  std::vector<FolderImageInfo> info_;
  ImageShape shape_;
  FolderDatasetOptions options_;
  ImageSampler sampler_;
  mutable std::mutex bad_mutex_;
  mutable std::vector<std::string> bad_;

  void produce(std::size_t i, float* dst, std::uint64_t augment_key) const;
};

}  // namespace ringtrain
