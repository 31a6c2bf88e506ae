// What turns a stored image into a sample, whatever holds it (a file in a folder, a record
// in a packed shard): the random-resized crop or the evaluation centre crop, decoding only
// what the crop needs, resampling and normalisation; or, without a crop, the image as it is
// with the array sets' pad-4 shift and flip. Every sample is a function of (image, index,
// augment key) alone, so any thread may make any sample with the same bits.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/ImageShape.h"
#include "images/CropBox.h"
#include "images/DecodedImage.h"

namespace ringtrain {

// What a stored image's header said (read once, before training).
struct FolderImageInfo {
  int width = 0;
  int height = 0;
  bool gray = false;
};

class ImageSampler {
 public:
  // shape is (channels, size, size) with a crop, the images' common size without. Throws
  // std::invalid_argument if it disagrees with crop/channels.
  ImageSampler(ImageShape shape, CropConfig crop, int channels, std::uint64_t max_pixels);

  // Decodes the image as asked into the DecodedImage given (a JPEG may honour the DCT scale
  // and region; others decode whole). produce hands it the calling thread's image, so its
  // buffers are reused from sample to sample.
  using DecodeFn = std::function<void(const DecodeRequest&, DecodedImage&)>;

  // Sample i (its header `info`) as (C, H, W) floats: augmented when augment is on and
  // augment_key != 0, else the evaluation form. `name` names the image in errors.
  void produce(const FolderImageInfo& info, std::size_t i, std::uint64_t augment_key, const DecodeFn& decode,
               const std::string& name, float* dst) const;

  // (x / 255 - mean[c]) / std[c], one value per channel or one for all; a zero std is 1.
  void set_normalization(std::span<const float> mean, std::span<const float> std);
  const std::vector<float>& norm_mean() const noexcept { return mean_; }
  const std::vector<float>& norm_std() const noexcept { return std_; }
  void set_augment(bool on) noexcept { augment_ = on; }
  const CropConfig& crop() const noexcept { return crop_; }
  ImageShape shape() const noexcept { return shape_; }

  // The seed of sample i's crop for a batch's augment key.
  static std::uint64_t crop_key(std::uint64_t augment_key, std::size_t i);

 private:
  ImageShape shape_;
  CropConfig crop_;
  int channels_;
  std::uint64_t max_pixels_;
  std::vector<float> mean_;
  std::vector<float> std_;
  bool augment_ = false;

  DecodeRequest request_for(const FolderImageInfo& info, const CropBox* box) const;
  void shift_and_flip(std::size_t i, float* dst, std::uint64_t augment_key) const;
};

}  // namespace ringtrain
