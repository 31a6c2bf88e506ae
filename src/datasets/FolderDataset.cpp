// FolderDataset: decode on demand (the crops and resampling: ImageSampler) and the bad-image policy.
#include "datasets/FolderDataset.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "images/ImageDecoder.h"

namespace ringtrain {

FolderDataset::FolderDataset(FolderListing listing, std::vector<FolderImageInfo> info, ImageShape shape,
                             FolderDatasetOptions options)
    : listing_(std::move(listing)),
      info_(std::move(info)),
      shape_(shape),
      options_(options),
      sampler_(shape, options.crop, options.channels, options.max_pixels) {
  if (info_.size() != listing_.files.size())
    throw std::invalid_argument(fmt::format("FolderDataset: {} headers for {} files", info_.size(), listing_.files.size()));
}

void FolderDataset::produce(std::size_t i, float* dst, std::uint64_t augment_key) const {
  const std::string& path = listing_.files[i].path;
  // The file's bytes in a buffer of the thread's, reused from file to file.
  thread_local std::vector<std::uint8_t> bytes;
  sampler_.produce(
      info_[i], i, augment_key,
      [&path](const DecodeRequest& request, DecodedImage& image) {
        read_image_file(path, bytes);
        decode_image(bytes, path, request, image);
      },
      path, dst);
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
