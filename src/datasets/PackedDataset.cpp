// PackedDataset: a record's bytes -> DecodedImage (raw pixels as they are, JPEG through the
// folder's decoder) -> ImageSampler; and load_packed_dataset.
#include "datasets/PackedDataset.h"

#include <stdexcept>

#include <fmt/format.h>

#include "datasets/FolderLoader.h"
#include "images/ImageDecoder.h"

namespace ringtrain {

PackedDataset::PackedDataset(std::unique_ptr<ShardReader> reader, ImageShape shape, CropConfig crop,
                             std::uint64_t max_pixels)
    : reader_(std::move(reader)),
      sampler_(shape, crop, static_cast<int>(reader_->index().channels), max_pixels) {}

void PackedDataset::decode(std::size_t i, const DecodeRequest& request, DecodedImage& image) const {
  // One buffer per thread: a record's bytes live only while its sample is made.
  thread_local std::vector<std::uint8_t> buffer;
  const std::span<const std::uint8_t> payload = reader_->read(i, buffer);
  const ShardRecord& r = reader_->record(i);
  if (reader_->index().encoding == RecordEncoding::kJpeg) {
    decode_image(payload, fmt::format("{} record {}", shard_file_path(reader_->dir(), reader_->split(), r.shard), i),
                 request, image);
    return;
  }
  image.width = image.source_width = image.full_width = static_cast<int>(r.width);
  image.height = image.source_height = image.full_height = static_cast<int>(r.height);
  image.offset_x = image.offset_y = 0;
  image.channels = static_cast<int>(reader_->index().channels);
  image.pixels.assign(payload.begin(), payload.end());
}

void PackedDataset::get_augmented(std::size_t i, float* dst, std::uint64_t augment_key) const {
  const ShardRecord& r = reader_->record(i);
  const FolderImageInfo info{static_cast<int>(r.width), static_cast<int>(r.height), reader_->index().channels == 1};
  sampler_.produce(
      info, i, augment_key, [&](const DecodeRequest& request, DecodedImage& image) { decode(i, request, image); },
      fmt::format("{} record {}", shard_file_path(reader_->dir(), reader_->split(), r.shard), i), dst);
}

namespace {

// Without a crop every record must have the first training record's size.
ImageShape common_shape(const ShardReader& train, const ShardReader& val) {
  const ShardRecord& first = train.record(0);
  for (const ShardReader* split : {&train, &val})
    for (std::size_t i = 0; i < split->size(); ++i) {
      const ShardRecord& r = split->record(i);
      if (r.width != first.width || r.height != first.height)
        throw std::runtime_error(fmt::format("{} record {}: {}x{} pixels, expected {}x{} like the first (or --crop "
                                             "random-resized:SIZE)",
                                             shard_file_path(split->dir(), split->split(), r.shard), i, r.width, r.height,
                                             first.width, first.height));
    }
  return {static_cast<int>(train.index().channels), static_cast<int>(first.height), static_cast<int>(first.width)};
}

}  // namespace

DatasetSplits load_packed_dataset(const DatasetConfig& config) {
  validate_image_config(config);
  if (config.data_dir.empty())
    throw std::invalid_argument("--dataset packed needs --data-dir SHARDS (the output of ringtrain pack)");
  auto train = std::make_unique<ShardReader>(config.data_dir, "train");
  auto val = std::make_unique<ShardReader>(config.data_dir, "val");
  const ShardIndex& ix = train->index();
  if (val->index().channels != ix.channels || val->index().class_names != ix.class_names)
    throw std::runtime_error(fmt::format("{}: other channels or classes than {}", shard_index_path(config.data_dir, "val"),
                                         shard_index_path(config.data_dir, "train")));
  if (train->size() == 0) throw std::runtime_error(fmt::format("{}: no records", shard_index_path(config.data_dir, "train")));
  const int channels = static_cast<int>(ix.channels);
  if (config.channels != 0 && config.channels != channels)
    throw std::invalid_argument(fmt::format("--channels {}: the records have {} (pack again with --channels {})",
                                            config.channels, channels, config.channels));
  const ImageShape shape =
      config.crop.size > 0 ? ImageShape{channels, config.crop.size, config.crop.size} : common_shape(*train, *val);
  DatasetSplits splits;
  splits.data_dir = config.data_dir;
  auto train_set = std::make_unique<PackedDataset>(std::move(train), shape, config.crop, config.max_pixels);
  auto val_set = std::make_unique<PackedDataset>(std::move(val), shape, config.crop, config.max_pixels);
  // The source data set's statistics, as pack recorded them.
  const ImageNormalisation recorded{ix.norm_mean, ix.norm_std};
  finish_image_splits(config, std::move(train_set), std::move(val_set),
                      [&recorded](const PackedDataset&) { return recorded; }, splits);
  return splits;
}

}  // namespace ringtrain
