// ImageDataset: lookup-table normalisation, crop/flip augmentation and exact integer
// channel statistics over uint8 pixels.
#include "datasets/ImageDataset.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/Random.h"

namespace ringtrain {

ImageDataset::ImageDataset(ImageShape shape, int classes, std::vector<std::uint8_t> pixels,
                           std::vector<std::uint8_t> labels, std::vector<std::string> class_names, std::string source)
    : shape_(shape),
      classes_(classes),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      class_names_(std::move(class_names)),
      source_(std::move(source)) {
  if (shape_.channels <= 0 || shape_.height <= 0 || shape_.width <= 0)
    throw std::invalid_argument(fmt::format("ImageDataset: invalid shape {}", shape_.str()));
  if (classes_ <= 0 || classes_ > 256)
    throw std::invalid_argument(fmt::format("ImageDataset: classes must be in 1..256, got {}", classes_));
  if (pixels_.size() != labels_.size() * shape_.numel())
    throw std::invalid_argument(fmt::format("ImageDataset: {} pixels for {} samples of {}", pixels_.size(),
                                            labels_.size(), shape_.str()));
  if (class_names_.empty())
    for (int k = 0; k < classes_; ++k) class_names_.push_back(std::to_string(k));
  if (class_names_.size() != static_cast<std::size_t>(classes_))
    throw std::invalid_argument(fmt::format("ImageDataset: {} class names for {} classes", class_names_.size(), classes_));
  const std::vector<float> mean{0.0f}, std{1.0f};
  set_normalization(mean, std);
}

void ImageDataset::set_normalization(std::span<const float> mean, std::span<const float> std) {
  const auto channels = static_cast<std::size_t>(shape_.channels);
  auto check = [&](std::span<const float> v, const char* what) {
    if (v.size() != 1 && v.size() != channels)
      throw std::invalid_argument(fmt::format("normalisation {}: {} values for {} channels (give 1 or {})", what,
                                              v.size(), channels, channels));
    for (float x : v)
      if (!std::isfinite(x)) throw std::invalid_argument(fmt::format("normalisation {}: non-finite value", what));
  };
  check(mean, "mean");
  check(std, "std");
  norm_mean_.assign(channels, 0.0f);
  norm_std_.assign(channels, 1.0f);
  lut_.assign(channels, {});
  for (std::size_t c = 0; c < channels; ++c) {
    norm_mean_[c] = mean[mean.size() == 1 ? 0 : c];
    const float s = std[std.size() == 1 ? 0 : c];
    if (s < 0.0f) throw std::invalid_argument(fmt::format("normalisation std must be >= 0, got {}", s));
    norm_std_[c] = s == 0.0f ? 1.0f : s;
    // Computed in double, rounded once, so get() equals (x/255 - mean)/std to float precision.
    for (int v = 0; v < 256; ++v)
      lut_[c][v] = static_cast<float>((v / 255.0 - norm_mean_[c]) / static_cast<double>(norm_std_[c]));
  }
}

void ImageDataset::get(std::size_t i, float* dst) const {
  const std::size_t hw = static_cast<std::size_t>(shape_.height) * shape_.width;
  const std::uint8_t* src = pixels_.data() + i * shape_.numel();
  for (int c = 0; c < shape_.channels; ++c) {
    const float* lut = lut_[c].data();
    for (std::size_t p = 0; p < hw; ++p) dst[p] = lut[src[p]];
    src += hw;
    dst += hw;
  }
}

AugmentParams augment_params(std::uint64_t augment_key, std::size_t index, int pad) {
  Rng rng(derive_seed(augment_key, {static_cast<std::uint64_t>(RngPurpose::kAugment), index}));
  const auto span = static_cast<std::uint64_t>(2 * pad + 1);
  AugmentParams p;
  p.dy = static_cast<int>(rng.below(span)) - pad;
  p.dx = static_cast<int>(rng.below(span)) - pad;
  p.flip = rng.below(2) == 1;
  return p;
}

void ImageDataset::get_augmented(std::size_t i, float* dst, std::uint64_t augment_key) const {
  if (!augment_ || augment_key == 0) {
    get(i, dst);
    return;
  }
  // Equivalent to torchvision's RandomCrop(padding=4) then RandomHorizontalFlip on the
  // uint8 image: padding is black (value 0), which normalises to -mean/std.
  const AugmentParams a = augment_params(augment_key, i);
  const int h = shape_.height, w = shape_.width;
  const std::uint8_t* src = pixels_.data() + i * shape_.numel();
  for (int c = 0; c < shape_.channels; ++c) {
    const float* lut = lut_[c].data();
    const float pad_value = lut[0];
    for (int y = 0; y < h; ++y) {
      float* row = dst + (static_cast<std::size_t>(c) * h + y) * w;
      const int sy = y + a.dy;
      if (sy < 0 || sy >= h) {
        for (int x = 0; x < w; ++x) row[x] = pad_value;
        continue;
      }
      const std::uint8_t* srow = src + (static_cast<std::size_t>(c) * h + sy) * w;
      for (int x = 0; x < w; ++x) {
        const int sx = (a.flip ? w - 1 - x : x) + a.dx;
        row[x] = (sx < 0 || sx >= w) ? pad_value : lut[srow[sx]];
      }
    }
  }
}

ChannelStats ImageDataset::channel_stats() const {
  const auto channels = static_cast<std::size_t>(shape_.channels);
  const std::size_t hw = static_cast<std::size_t>(shape_.height) * shape_.width;
  std::vector<std::uint64_t> sum(channels, 0), sumsq(channels, 0);
  // A uint32 block accumulator is exact while hw * 255^2 < 2^32 (hw < 66052) and lets the
  // compiler vectorise the inner loops.
  const bool small_blocks = hw < 66000;
  const std::uint8_t* p = pixels_.data();
  for (std::size_t n = 0; n < size(); ++n) {
    for (std::size_t c = 0; c < channels; ++c, p += hw) {
      if (small_blocks) {
        std::uint32_t s = 0, s2 = 0;
        for (std::size_t k = 0; k < hw; ++k) {
          const std::uint32_t v = p[k];
          s += v;
          s2 += v * v;
        }
        sum[c] += s;
        sumsq[c] += s2;
      } else {
        for (std::size_t k = 0; k < hw; ++k) {
          const std::uint64_t v = p[k];
          sum[c] += v;
          sumsq[c] += v * v;
        }
      }
    }
  }
  ChannelStats stats;
  const auto count = static_cast<unsigned __int128>(size()) * hw;
  for (std::size_t c = 0; c < channels; ++c) {
    if (count == 0) {
      stats.mean.push_back(0.0);
      stats.std.push_back(0.0);
      continue;
    }
    // Population variance from exact integers: (n*sum(x^2) - sum(x)^2) / n^2.
    const unsigned __int128 num = count * sumsq[c] - static_cast<unsigned __int128>(sum[c]) * sum[c];
    const double n = static_cast<double>(count);
    stats.mean.push_back(static_cast<double>(sum[c]) / n / 255.0);
    stats.std.push_back(std::sqrt(static_cast<double>(num)) / n / 255.0);
  }
  return stats;
}

}  // namespace ringtrain
