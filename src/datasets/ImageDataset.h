// The in-memory dataset every reader produces: uint8 pixels (N, C, H, W) and uint8
// labels, normalised on the fly through a per-channel lookup table, with optional
// deterministic crop/flip augmentation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "datasets/Dataset.h"

namespace ringtrain {

// Per-channel mean and (population) standard deviation in [0, 1] pixel units.
struct ChannelStats {
  std::vector<double> mean;
  std::vector<double> std;
};

class ImageDataset final : public Dataset {
 public:
  static constexpr int kAugmentPad = 4;  // zero padding of the random crop (as in He et al. 2016)

  // pixels: (N, C, H, W) uint8; labels: N values < classes. source names the files the
  // data came from (for reports). Throws std::invalid_argument if sizes disagree.
  ImageDataset(ImageShape shape, int classes, std::vector<std::uint8_t> pixels, std::vector<std::uint8_t> labels,
               std::vector<std::string> class_names, std::string source);

  std::size_t size() const override { return labels_.size(); }
  ImageShape shape() const override { return shape_; }
  int classes() const override { return classes_; }
  int label(std::size_t i) const override { return labels_[i]; }
  void get(std::size_t i, float* dst) const override;
  std::vector<std::string> class_names() const override { return class_names_; }

  // Sample i with the crop/flip derived from (augment_key, i); identical to get() when
  // augmentation is off or augment_key == 0.
  void get_augmented(std::size_t i, float* dst, std::uint64_t augment_key) const override;

  // Normalisation (x/255 - mean[c]) / std[c]; mean/std hold one value per channel or one
  // for all. A zero std is treated as 1 (constant channel). Throws std::invalid_argument.
  void set_normalization(std::span<const float> mean, std::span<const float> std);
  const std::vector<float>& norm_mean() const noexcept { return norm_mean_; }
  const std::vector<float>& norm_std() const noexcept { return norm_std_; }

  void set_augment(bool on) noexcept { augment_ = on; }
  bool augment() const noexcept { return augment_; }

  // Statistics of the raw pixels (x/255), exact integer sums over all uint8 values.
  ChannelStats channel_stats() const;

  const std::string& source() const noexcept { return source_; }
  std::span<const std::uint8_t> pixels() const noexcept { return pixels_; }
  std::span<const std::uint8_t> labels() const noexcept { return labels_; }

 private:
  ImageShape shape_;
  int classes_;
  std::vector<std::uint8_t> pixels_;
  std::vector<std::uint8_t> labels_;
  std::vector<std::string> class_names_;
  std::string source_;
  std::vector<float> norm_mean_;
  std::vector<float> norm_std_;
  std::vector<std::array<float, 256>> lut_;  // per channel: uint8 value -> normalised float
  bool augment_ = false;
};

// The crop offset and flip of one augmented sample: output (y, x) reads input
// (y + dy, x + dx), or (y + dy, W-1-x + dx) when flipped; outside the image is zero padding.
struct AugmentParams {
  int dy = 0;
  int dx = 0;
  bool flip = false;
};
AugmentParams augment_params(std::uint64_t augment_key, std::size_t index, int pad = ImageDataset::kAugmentPad);

}  // namespace ringtrain
