// pack_dataset: source images -> 8-bit (H, W, C) -> resized -> JPEG or raw -> ShardWriter.
// A folder's JPEG that needs no resizing is stored as its own bytes (no second lossy pass).
#include "datasets/Packer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "datasets/FolderDataset.h"
#include "datasets/ImageDataset.h"
#include "images/ImageDecoder.h"
#include "images/JpegEncoder.h"
#include "images/Resample.h"

namespace fs = std::filesystem;

namespace ringtrain {

void packed_size(int width, int height, int max_side, int& out_width, int& out_height) {
  out_width = width;
  out_height = height;
  const int longer = std::max(width, height);
  if (max_side <= 0 || longer <= max_side) return;
  const double scale = static_cast<double>(max_side) / longer;
  out_width = std::max(1, static_cast<int>(std::lround(width * scale)));
  out_height = std::max(1, static_cast<int>(std::lround(height * scale)));
}

namespace {

// The whole image resampled to w x h (the folder's triangle filter), back to 8 bits.
DecodedImage resized(const DecodedImage& image, int w, int h) {
  const int c = image.channels;
  const std::vector<float> mean(static_cast<std::size_t>(c), 0.0f), std(static_cast<std::size_t>(c), 1.0f / 255.0f);
  std::vector<float> planar(static_cast<std::size_t>(w) * h * c);
  resample_box(image, CropBox{0, 0, static_cast<double>(image.width), static_cast<double>(image.height), false}, w, h,
               Normalisation{mean, std}, planar.data());
  DecodedImage out;
  out.width = out.full_width = out.source_width = w;
  out.height = out.full_height = out.source_height = h;
  out.channels = c;
  out.pixels.resize(planar.size());
  const std::size_t plane = static_cast<std::size_t>(w) * h;
  for (std::size_t p = 0; p < plane; ++p)
    for (int k = 0; k < c; ++k)
      out.pixels[p * c + k] = static_cast<std::uint8_t>(std::clamp(std::lround(planar[k * plane + p]), 0L, 255L));
  return out;
}

class SplitPacker {
 public:
  SplitPacker(const PackOptions& options, const std::string& split, ShardIndex head)
      : options_(options), writer_(options.out, split, std::move(head), options.shard_bytes) {}

  // One decoded image (and, when it is a JPEG file, its bytes, kept if no resize is needed).
  void add(const DecodedImage& image, int label, std::span<const std::uint8_t> jpeg_file = {}) {
    int w = 0, h = 0;
    packed_size(image.width, image.height, options_.max_side, w, h);
    const bool same_size = w == image.width && h == image.height;
    if (!options_.raw && same_size && !jpeg_file.empty()) return writer_.add(jpeg_file, label, w, h);
    const DecodedImage small = same_size ? DecodedImage{} : resized(image, w, h);
    const DecodedImage& img = same_size ? image : small;
    if (options_.raw) return writer_.add(img.pixels, label, w, h);
    writer_.add(encode_jpeg(img.pixels, w, h, img.channels, options_.quality), label, w, h);
  }
  const ShardIndex& finish() { return writer_.finish(); }

 private:
  const PackOptions& options_;
  ShardWriter writer_;
};

void pack_array_split(const ImageDataset& d, SplitPacker& packer) {
  const ImageShape s = d.shape();
  const std::size_t plane = static_cast<std::size_t>(s.height) * s.width;
  DecodedImage image;
  image.width = image.full_width = image.source_width = s.width;
  image.height = image.full_height = image.source_height = s.height;
  image.channels = s.channels;
  image.pixels.resize(s.numel());
  for (std::size_t i = 0; i < d.size(); ++i) {
    const std::uint8_t* src = d.pixels().data() + i * s.numel();  // (C, H, W)
    for (std::size_t p = 0; p < plane; ++p)
      for (int c = 0; c < s.channels; ++c) image.pixels[p * s.channels + c] = src[c * plane + p];
    packer.add(image, d.label(i));
  }
}

void pack_folder_split(const FolderDataset& d, SplitPacker& packer, const PackOptions& options, bool skip_bad,
                       std::vector<std::string>& skipped) {
  for (std::size_t i = 0; i < d.size(); ++i) {
    const FolderFile& file = d.listing().files[i];
    try {
      const std::vector<std::uint8_t> bytes = read_image_file(file.path);
      DecodeRequest request;
      request.channels = d.options().channels;
      request.max_pixels = d.options().max_pixels;
      const FolderImageInfo& info = d.info()[i];
      packed_size(info.width, info.height, options.max_side, request.min_width, request.min_height);
      const DecodedImage image = decode_image(bytes, file.path, request);
      const bool jpeg = sniff_image_format(bytes, file.path) == ImageFormat::kJpeg;
      packer.add(image, file.label, jpeg && image.width == info.width ? std::span<const std::uint8_t>(bytes)
                                                                    : std::span<const std::uint8_t>());
    } catch (const std::runtime_error& e) {
      if (!skip_bad) throw;
      skipped.emplace_back(e.what());
    }
  }
}

// The output directory: created, or refused when it holds anything (unless overwrite, which
// removes the packed files it holds first, so no stale shard of a larger pack stays).
void prepare_output(const PackOptions& options) {
  if (options.out.empty()) throw std::invalid_argument("--out: a directory for the shards is needed");
  const fs::path out(options.out);
  if (fs::exists(out) && !fs::is_directory(out))
    throw std::invalid_argument(fmt::format("--out {}: exists and is not a directory", options.out));
  if (fs::exists(out) && !fs::is_empty(out)) {
    if (!options.overwrite)
      throw std::invalid_argument(fmt::format("--out {}: not empty; pass --overwrite to replace what it holds", options.out));
    for (const auto& entry : fs::directory_iterator(out)) {
      const std::string name = entry.path().filename().string();
      const bool packed = name.ends_with(".shard") || name.ends_with(".index") || name.ends_with(".index.tmp");
      if (!packed)
        throw std::invalid_argument(
            fmt::format("--out {}: holds {}, which pack did not write; choose an empty directory", options.out, name));
    }
    for (const auto& entry : fs::directory_iterator(out)) fs::remove(entry.path());
  }
  fs::create_directories(out);
}

}  // namespace

PackResult pack_dataset(const DatasetConfig& config, const PackOptions& options,
                        const std::function<void(const std::string&, std::size_t)>& progress) {
  if (options.max_side < 0) throw std::invalid_argument(fmt::format("--max-side: expected >= 0, got {}", options.max_side));
  if (options.quality < 1 || options.quality > 100)
    throw std::invalid_argument(fmt::format("--quality: expected 1..100, got {}", options.quality));
  if (config.name == "packed" || config.name == "synthetic")
    throw std::invalid_argument(fmt::format("pack --dataset {}: pack a folder, fashion-mnist, mnist, cifar10 or svhn", config.name));
  DatasetConfig source = config;
  source.augment = false;
  // A folder's images may differ in size: a crop, never used, lets them load as they are.
  if (source.name == "folder") source.crop.size = 1;
  const DatasetSplits splits = load_dataset(source);
  prepare_output(options);
  ShardIndex head;
  head.encoding = options.raw ? RecordEncoding::kRaw : RecordEncoding::kJpeg;
  head.channels = static_cast<std::uint32_t>(splits.train->shape().channels);
  head.class_names = splits.train->class_names();
  head.norm_mean = splits.norm_mean;
  head.norm_std = splits.norm_std;
  if (head.norm_mean.empty()) {  // --no-normalize: x / 255
    head.norm_mean.assign(head.channels, 0.0f);
    head.norm_std.assign(head.channels, 1.0f);
  }
  PackResult result;
  for (const char* split : {"train", "val"}) {
    const Dataset& d = std::string(split) == "train" ? *splits.train : *splits.test;
    SplitPacker packer(options, split, head);
    if (const auto* folder = dynamic_cast<const FolderDataset*>(&d)) {
      pack_folder_split(*folder, packer, options, config.skip_bad_images, result.skipped);
    } else if (const auto* array = dynamic_cast<const ImageDataset*>(&d)) {
      pack_array_split(*array, packer);
    } else {
      throw std::logic_error("pack_dataset: a data set of no known kind");
    }
    const ShardIndex& ix = packer.finish();
    (std::string(split) == "train" ? result.train : result.val) = ix.records.size();
    result.shards += ix.shard_bytes.size();
    for (std::uint64_t b : ix.shard_bytes) result.bytes += b;
    if (progress) progress(split, ix.records.size());
  }
  return result;
}

}  // namespace ringtrain
