// Crop boxes: torchvision's RandomResizedCrop.get_params (10 attempts at a uniform area
// fraction and a log-uniform aspect ratio, then a centre crop clamped to the ratio range)
// with ringtrain's counter-derived Rng in place of torch's global generator.
#include "images/CropBox.h"

#include <algorithm>
#include <cmath>

#include "common/Random.h"

namespace ringtrain {

CropBox random_resized_crop(int width, int height, const CropConfig& config, std::uint64_t key) {
  Rng rng(key);
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(config.ratio_min), log_hi = std::log(config.ratio_max);
  CropBox box;
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target = area * (config.scale_min + (config.scale_max - config.scale_min) * rng.uniform());
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      box.y = static_cast<double>(rng.below(static_cast<std::uint64_t>(height - h + 1)));
      box.x = static_cast<double>(rng.below(static_cast<std::uint64_t>(width - w + 1)));
      box.width = w;
      box.height = h;
      found = true;
    }
  }
  if (!found) {  // torchvision's fallback: the whole image, its ratio clamped to the range
    const double in_ratio = static_cast<double>(width) / height;
    double w = width, h = height;
    if (in_ratio < config.ratio_min) {
      h = std::round(w / config.ratio_min);
    } else if (in_ratio > config.ratio_max) {
      w = std::round(h * config.ratio_max);
    }
    box.width = std::max(1.0, w);
    box.height = std::max(1.0, h);
    box.x = std::floor((width - box.width) / 2);
    box.y = std::floor((height - box.height) / 2);
  }
  box.flip = config.flip && rng.below(2) == 1;
  return box;
}

CropBox centre_crop(int width, int height, const CropConfig& config) {
  const double shorter = std::round(config.size / config.eval_fraction);
  const double scale = shorter / std::min(width, height);  // resized pixels per source pixel
  const double resized_w = width <= height ? shorter : std::round(width * scale);
  const double resized_h = height < width ? shorter : std::round(height * scale);
  // torchvision's CenterCrop: offsets rounded in the resized image.
  const double left = std::round((resized_w - config.size) / 2.0), top = std::round((resized_h - config.size) / 2.0);
  CropBox box;
  box.x = left * width / resized_w;
  box.y = top * height / resized_h;
  box.width = config.size * width / resized_w;
  box.height = config.size * height / resized_h;
  return box;
}

}  // namespace ringtrain
