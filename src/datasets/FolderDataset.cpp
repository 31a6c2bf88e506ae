// FolderDataset: decode on demand, crop boxes, resampling and the bad-image policy.
#include "datasets/FolderDataset.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/Random.h"
#include "images/ImageDecoder.h"
#include "images/Resample.h"

namespace ringtrain {

FolderDataset::FolderDataset(FolderListing listing, std::vector<FolderImageInfo> info, ImageShape shape,
                             FolderDatasetOptions options)
    : listing_(std::move(listing)), info_(std::move(info)), shape_(shape), options_(options) {
  if (info_.size() != listing_.files.size())
    throw std::invalid_argument(fmt::format("FolderDataset: {} headers for {} files", info_.size(), listing_.files.size()));
  if (shape_.channels != options_.channels || (options_.crop.size > 0 && (shape_.height != options_.crop.size ||
                                                                           shape_.width != options_.crop.size)))
    throw std::invalid_argument(fmt::format("FolderDataset: shape {} does not match the options", shape_.str()));
  const std::vector<float> mean{0.0f}, std{1.0f};
  set_normalization(mean, std);
}

void FolderDataset::set_normalization(std::span<const float> mean, std::span<const float> std) {
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

std::uint64_t FolderDataset::crop_key(std::uint64_t augment_key, std::size_t i) {
  return derive_seed(augment_key, {static_cast<std::uint64_t>(RngPurpose::kAugment), i});
}

template <class Fill>
void FolderDataset::with_image(std::size_t i, const CropBox* box, Fill&& fill, float* dst) const {
  DecodeRequest request;
  request.channels = options_.channels;
  request.max_pixels = options_.max_pixels;
  if (box != nullptr) {
    const FolderImageInfo& info = info_[i];
    const int size = options_.crop.size;
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
  }
  const std::string& path = listing_.files[i].path;
  const DecodedImage image = decode_image(read_image_file(path), path, request);
  if (options_.crop.size == 0 && (image.width != shape_.width || image.height != shape_.height))
    throw std::runtime_error(fmt::format("{}: {}x{} pixels, expected {}x{} like the other images (or --crop SIZE)", path,
                                         image.width, image.height, shape_.width, shape_.height));
  fill(image, dst);
}

void FolderDataset::produce(std::size_t i, float* dst, std::uint64_t augment_key) const {
  const Normalisation norm{mean_, std_};
  const CropConfig& crop = options_.crop;
  if (crop.size == 0) {
    with_image(i, nullptr, [&](const DecodedImage& image, float* out) { to_planar(image, norm, out); }, dst);
    if (augment_ && augment_key != 0) shift_and_flip(i, dst, augment_key);
    return;
  }
  const FolderImageInfo& info = info_[i];
  const CropBox box = augment_ && augment_key != 0 ? random_resized_crop(info.width, info.height, crop, crop_key(augment_key, i))
                                                   : centre_crop(info.width, info.height, crop);
  with_image(i, &box,
             [&](const DecodedImage& image, float* out) {
               // The box in the decoded pixels: DCT-scaled, and relative to the region decoded.
               const double sx = static_cast<double>(image.full_width) / info.width;
               const double sy = static_cast<double>(image.full_height) / info.height;
               const CropBox scaled{box.x * sx - image.offset_x, box.y * sy - image.offset_y, box.width * sx,
                                    box.height * sy, box.flip};
               resample_box(image, scaled, crop.size, crop.size, norm, out);
             },
             dst);
}

// The array sets' --augment on a decoded image: the pad-4 crop and flip of
// ImageDataset::get_augmented, with the same parameters for the same (key, index).
void FolderDataset::shift_and_flip(std::size_t i, float* dst, std::uint64_t augment_key) const {
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

void FolderDataset::get(std::size_t i, float* dst) const { get_augmented(i, dst, 0); }

void FolderDataset::get_augmented(std::size_t i, float* dst, std::uint64_t augment_key) const {
  if (!options_.skip_bad_images) {
    produce(i, dst, augment_key);
    return;
  }
  // --bad-images skip: a file that fails is listed and sample i becomes the next good one
  // (i + 1, i + 2, ...), a choice that depends on nothing but the files, so every thread
  // count and every rank makes the same substitute.
  for (std::size_t k = 0; k < size(); ++k) {
    const std::size_t j = (i + k) % size();
    try {
      produce(j, dst, augment_key);
      return;
    } catch (const std::runtime_error& e) {
      add_bad_image(e.what());
    }
  }
  throw std::runtime_error(fmt::format("{}: no image in the folder decodes (--bad-images skip)", listing_.dir));
}

void FolderDataset::add_bad_image(std::string error) const {
  const std::lock_guard lock(bad_mutex_);
  if (std::find(bad_.begin(), bad_.end(), error) == bad_.end()) bad_.push_back(std::move(error));
}

std::vector<std::string> FolderDataset::bad_images() const {
  const std::lock_guard lock(bad_mutex_);
  std::vector<std::string> out = bad_;
  std::sort(out.begin(), out.end());
  return out;
}

ChannelStats FolderDataset::channel_stats() const {
  const auto channels = static_cast<std::size_t>(shape_.channels);
  std::vector<std::uint64_t> sum(channels, 0), sumsq(channels, 0);
  std::uint64_t count = 0;
  DecodeRequest request;
  request.channels = options_.channels;
  request.max_pixels = options_.max_pixels;
  for (const FolderFile& file : listing_.files) {
    DecodedImage image;
    try {
      image = decode_image(read_image_file(file.path), file.path, request);
    } catch (const std::runtime_error&) {
      if (options_.skip_bad_images) continue;
      throw;
    }
    for (std::size_t p = 0; p < image.pixels.size(); ++p) {
      const std::uint64_t v = image.pixels[p];
      sum[p % channels] += v;
      sumsq[p % channels] += v * v;
    }
    count += image.pixels.size() / channels;
  }
  ChannelStats stats;
  for (std::size_t c = 0; c < channels; ++c) {
    const double n = static_cast<double>(count);
    const unsigned __int128 num = static_cast<unsigned __int128>(count) * sumsq[c] - static_cast<unsigned __int128>(sum[c]) * sum[c];
    stats.mean.push_back(count == 0 ? 0.0 : static_cast<double>(sum[c]) / n / 255.0);
    stats.std.push_back(count == 0 ? 0.0 : std::sqrt(static_cast<double>(num)) / n / 255.0);
  }
  return stats;
}

}  // namespace ringtrain
