// ImageSampler: crop boxes, the decode request they make, resampling and normalisation.
#include "datasets/ImageSampler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/Random.h"
#include "datasets/ImageDataset.h"
#include "images/Resample.h"

namespace ringtrain {

ImageSampler::ImageSampler(ImageShape shape, CropConfig crop, int channels, std::uint64_t max_pixels)
    : shape_(shape), crop_(crop), channels_(channels), max_pixels_(max_pixels) {
  if (shape_.channels != channels_ ||
      (crop_.size > 0 && (shape_.height != crop_.size || shape_.width != crop_.size)))
    throw std::invalid_argument(fmt::format("ImageSampler: shape {} does not match the options", shape_.str()));
  const std::vector<float> mean{0.0f}, std{1.0f};
  set_normalization(mean, std);
}

void ImageSampler::set_normalization(std::span<const float> mean, std::span<const float> std) {
  const auto channels = static_cast<std::size_t>(shape_.channels);
  if ((mean.size() != 1 && mean.size() != channels) || (std.size() != 1 && std.size() != channels))
    throw std::invalid_argument(fmt::format("normalisation: give 1 or {} values for mean and std", channels));
  mean_.assign(channels, 0.0f);
  std_.assign(channels, 1.0f);
  for (std::size_t c = 0; c < channels; ++c) {
    mean_[c] = mean[mean.size() == 1 ? 0 : c];
    const float s = std[std.size() == 1 ? 0 : c];
    if (!std::isfinite(s) || s < 0.0f || !std::isfinite(mean_[c]))
      throw std::invalid_argument("normalisation: finite mean and std >= 0 expected");
    std_[c] = s == 0.0f ? 1.0f : s;
  }
}

std::uint64_t ImageSampler::crop_key(std::uint64_t augment_key, std::size_t i) {
  return derive_seed(augment_key, {static_cast<std::uint64_t>(RngPurpose::kAugment), i});
}

DecodeRequest ImageSampler::request_for(const FolderImageInfo& info, const CropBox* box) const {
  DecodeRequest request;
  request.channels = channels_;
  request.max_pixels = max_pixels_;
  if (box == nullptr) return request;
  const int size = crop_.size;
  // The smallest JPEG DCT scale that still gives the box at least size x size pixels.
  request.min_width = static_cast<int>(std::ceil(info.width * size / box->width));
  request.min_height = static_cast<int>(std::ceil(info.height * size / box->height));
  // Only the box is decoded, with the filter's reach around it (at most box / size
  // source pixels, more than it has in decoded ones) and 2 for the edge columns fancy
  // upsampling treats as the image's edge, so the result equals a full decode's.
  request.region_x = static_cast<int>(std::floor(box->x));
  request.region_y = static_cast<int>(std::floor(box->y));
  request.region_width = static_cast<int>(std::ceil(box->x + box->width)) - request.region_x;
  request.region_height = static_cast<int>(std::ceil(box->y + box->height)) - request.region_y;
  request.region_margin = static_cast<int>(std::ceil(std::max(box->width, box->height) / size)) + 2;
  return request;
}

void ImageSampler::produce(const FolderImageInfo& info, std::size_t i, std::uint64_t augment_key, const DecodeFn& decode,
                           const std::string& name, float* dst) const {
  const Normalisation norm{mean_, std_};
  thread_local DecodedImage image;
  if (crop_.size == 0) {
    decode(request_for(info, nullptr), image);
    if (image.width != shape_.width || image.height != shape_.height)
      throw std::runtime_error(fmt::format("{}: {}x{} pixels, expected {}x{} like the other images (or --crop SIZE)", name,
                                           image.width, image.height, shape_.width, shape_.height));
    to_planar(image, norm, dst);
    if (augment_ && augment_key != 0) shift_and_flip(i, dst, augment_key);
    return;
  }
  const CropBox box = augment_ && augment_key != 0 ? random_resized_crop(info.width, info.height, crop_, crop_key(augment_key, i))
                                                   : centre_crop(info.width, info.height, crop_);
  decode(request_for(info, &box), image);
  // The box in the decoded pixels: DCT-scaled, and relative to the region decoded.
  const double sx = static_cast<double>(image.full_width) / info.width;
  const double sy = static_cast<double>(image.full_height) / info.height;
  const CropBox scaled{box.x * sx - image.offset_x, box.y * sy - image.offset_y, box.width * sx, box.height * sy, box.flip};
  resample_box(image, scaled, crop_.size, crop_.size, norm, dst);
}

// The array sets' --augment on a decoded image: the pad-4 crop and flip of
// ImageDataset::get_augmented, with the same parameters for the same (key, index).
void ImageSampler::shift_and_flip(std::size_t i, float* dst, std::uint64_t augment_key) const {
  const AugmentParams a = augment_params(augment_key, i);
  const int h = shape_.height, w = shape_.width;
  std::vector<float> plane(static_cast<std::size_t>(h) * w);
  for (int c = 0; c < shape_.channels; ++c) {
    float* base = dst + static_cast<std::size_t>(c) * h * w;
    std::copy(base, base + plane.size(), plane.begin());
    // The padding is black, value 0, normalised like the array sets' lookup table.
    const auto pad = static_cast<float>((0.0 - mean_[c]) / static_cast<double>(std_[c]));
    for (int y = 0; y < h; ++y) {
      const int sy = y + a.dy;
      for (int x = 0; x < w; ++x) {
        const int sx = (a.flip ? w - 1 - x : x) + a.dx;
        base[y * w + x] = (sy < 0 || sy >= h || sx < 0 || sx >= w) ? pad : plane[static_cast<std::size_t>(sy) * w + sx];
      }
    }
  }
}

}  // namespace ringtrain
