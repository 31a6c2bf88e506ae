// load_folder_dataset: what is known before any pixel is decoded comes from the headers
// (sizes for the crops, gray or colour for the channel count); a bad header is found here,
// before training starts, rather than mid-epoch.
#include "datasets/FolderLoader.h"

#include <stdexcept>

#include <fmt/format.h>

#include "datasets/FolderDataset.h"
#include "datasets/ImageFolder.h"
#include "images/ImageDecoder.h"

namespace ringtrain {
namespace {

struct Scanned {
  FolderListing listing;
  std::vector<FolderImageInfo> info;
  std::vector<std::string> bad;
};

Scanned scan_headers(FolderListing listing, const DatasetConfig& config) {
  Scanned out;
  out.listing.dir = listing.dir;
  out.listing.class_names = listing.class_names;
  for (FolderFile& file : listing.files) {
    try {
      const ImageHeader h = read_image_file_header(file.path);
      check_pixel_limit(static_cast<std::uint64_t>(h.width), static_cast<std::uint64_t>(h.height), config.max_pixels,
                        file.path);
      out.info.push_back({h.width, h.height, h.gray});
      out.listing.files.push_back(std::move(file));
    } catch (const std::runtime_error& e) {
      if (!config.skip_bad_images) throw;
      out.bad.emplace_back(e.what());
    }
  }
  if (out.listing.files.empty())
    throw std::runtime_error(fmt::format("{}: no readable image (--bad-images skip left none)", listing.dir));
  return out;
}

}  // namespace

void validate_image_config(const DatasetConfig& config) {
  const CropConfig& c = config.crop;
  if (c.size < 0) throw std::invalid_argument(fmt::format("--crop: size must be positive, got {}", c.size));
  if (c.size > 0 && config.augment)
    throw std::invalid_argument("--augment (pad-4 crop and flip) and --crop random-resized:SIZE are two augmentations; give one");
  if (!(c.scale_min > 0.0 && c.scale_min <= c.scale_max && c.scale_max <= 1.0))
    throw std::invalid_argument(fmt::format("--crop-scale: expected 0 < MIN <= MAX <= 1, got {},{}", c.scale_min, c.scale_max));
  if (!(c.ratio_min > 0.0 && c.ratio_min <= c.ratio_max))
    throw std::invalid_argument(fmt::format("--crop-ratio: expected 0 < MIN <= MAX, got {},{}", c.ratio_min, c.ratio_max));
  if (config.channels != 0 && config.channels != 1 && config.channels != 3)
    throw std::invalid_argument(fmt::format("--channels: expected 1 or 3, got {}", config.channels));
  if (config.max_pixels == 0) throw std::invalid_argument("--max-pixels: expected a positive count");
}

namespace {

// Without a crop every image must have the first training image's size.
ImageShape common_shape(const Scanned& train, const Scanned& val, int channels) {
  const FolderImageInfo& first = train.info.front();
  for (const Scanned* split : {&train, &val})
    for (std::size_t i = 0; i < split->info.size(); ++i)
      if (split->info[i].width != first.width || split->info[i].height != first.height)
        throw std::runtime_error(fmt::format("{}: {}x{} pixels, expected {}x{} like {} (or --crop random-resized:SIZE)",
                                             split->listing.files[i].path, split->info[i].width, split->info[i].height,
                                             first.width, first.height, train.listing.files.front().path));
  return {channels, first.height, first.width};
}

}  // namespace

DatasetSplits load_folder_dataset(const DatasetConfig& config) {
  validate_image_config(config);
  if (config.data_dir.empty())
    throw std::invalid_argument("--dataset folder needs --data-dir DIR (DIR/train/<class>/..., DIR/val/<class>/...)");
  FolderSplitListing listing = list_folder_splits(config.data_dir, config.val_fraction);
  Scanned train = scan_headers(std::move(listing.train), config);
  Scanned val = scan_headers(std::move(listing.val), config);
  int channels = config.channels;
  if (channels == 0) {
    channels = 1;
    for (const FolderImageInfo& info : train.info)
      if (!info.gray) channels = 3;
  }
  FolderDatasetOptions options;
  options.crop = config.crop;
  options.channels = channels;
  options.max_pixels = config.max_pixels;
  options.skip_bad_images = config.skip_bad_images;
  const ImageShape shape =
      config.crop.size > 0 ? ImageShape{channels, config.crop.size, config.crop.size} : common_shape(train, val, channels);
  auto train_set = std::make_unique<FolderDataset>(std::move(train.listing), std::move(train.info), shape, options);
  auto val_set = std::make_unique<FolderDataset>(std::move(val.listing), std::move(val.info), shape, options);
  for (auto& e : train.bad) train_set->add_bad_image(std::move(e));
  for (auto& e : val.bad) val_set->add_bad_image(std::move(e));
  DatasetSplits splits;
  splits.data_dir = config.data_dir;
  // RGB: ImageNet's statistics; gray: computed from the training images, as the array sets do.
  finish_image_splits(config, std::move(train_set), std::move(val_set),
                      [channels](const FolderDataset& set) {
                        if (channels == 3)
                          return ImageNormalisation{{std::begin(kImageNetMean), std::end(kImageNetMean)},
                                                    {std::begin(kImageNetStd), std::end(kImageNetStd)}};
                        const ChannelStats stats = set.channel_stats();
                        return ImageNormalisation{{stats.mean.begin(), stats.mean.end()}, {stats.std.begin(), stats.std.end()}};
                      },
                      splits);
  return splits;
}

}  // namespace ringtrain
