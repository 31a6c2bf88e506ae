// The folder report and the decode timing.
#include "datasets/FolderReport.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/Random.h"
#include "datasets/BatchLoader.h"
#include "datasets/DistributedSampler.h"
#include "datasets/FolderDataset.h"
#include "datasets/PackedDataset.h"

namespace ringtrain {
namespace {

// Sizes bucketed by the shorter side in powers of two (what decides the crops' scale):
// the bucket's lower bound.
int size_bucket(const FolderImageInfo& info) {
  const int shorter = std::max(1, std::min(info.width, info.height));
  int lo = 1;
  while (lo * 2 <= shorter) lo *= 2;
  return lo;
}

std::string describe_split(const char* name, const FolderDataset& d) {
  std::string out = fmt::format("{}: {} images in {} classes ({})\n", name, d.size(), d.classes(), d.listing().dir);
  std::vector<std::size_t> per_class(static_cast<std::size_t>(d.classes()), 0);
  for (const FolderFile& f : d.listing().files) ++per_class[static_cast<std::size_t>(f.label)];
  for (std::size_t k = 0; k < per_class.size(); ++k)
    out += fmt::format("  class {:>4} {:<24} {:>8} images\n", k, d.listing().class_names[k], per_class[k]);
  std::map<int, std::size_t> sizes;  // shorter side's bucket -> images
  std::size_t gray = 0;
  for (const FolderImageInfo& info : d.info()) {
    ++sizes[size_bucket(info)];
    gray += info.gray ? 1 : 0;
  }
  for (const auto& [lo, count] : sizes)
    out += fmt::format("  shorter side {:>5}-{:<5} {:>8} images\n", lo, lo * 2 - 1, count);
  out += fmt::format("  gray {} / colour {}\n", gray, d.size() - gray);
  const auto bad = d.bad_images();
  out += fmt::format("  unreadable: {}\n", bad.size());
  for (const std::string& b : bad) out += fmt::format("    {}\n", b);
  return out;
}

std::string describe_packed_split(const char* name, const PackedDataset& d) {
  const ShardIndex& ix = d.reader().index();
  std::uint64_t bytes = 0;
  for (std::uint64_t b : ix.shard_bytes) bytes += b;
  std::string out = fmt::format("{}: {} records in {} classes, {} shard(s), {:.1f} MB, {} {}\n", name, d.size(), d.classes(),
                                ix.shard_bytes.size(), static_cast<double>(bytes) / 1e6,
                                ix.encoding == RecordEncoding::kJpeg ? "JPEG" : "raw", ix.channels == 1 ? "gray" : "RGB");
  std::vector<std::size_t> per_class(static_cast<std::size_t>(d.classes()), 0);
  std::map<int, std::size_t> sizes;
  for (const ShardRecord& r : ix.records) {
    ++per_class[r.label];
    ++sizes[size_bucket({static_cast<int>(r.width), static_cast<int>(r.height), false})];
  }
  for (std::size_t k = 0; k < per_class.size(); ++k)
    out += fmt::format("  class {:>4} {:<24} {:>8} images\n", k, ix.class_names[k], per_class[k]);
  for (const auto& [lo, count] : sizes)
    out += fmt::format("  shorter side {:>5}-{:<5} {:>8} images\n", lo, lo * 2 - 1, count);
  return out;
}

}  // namespace

std::string describe_packed(const DatasetSplits& splits) {
  const auto* train = dynamic_cast<const PackedDataset*>(splits.train.get());
  const auto* val = dynamic_cast<const PackedDataset*>(splits.test.get());
  if (train == nullptr || val == nullptr) throw std::logic_error("describe_packed: not a packed dataset");
  std::string out = fmt::format("dataset packed ({}), samples {}\n", splits.data_dir, train->shape().str());
  out += fmt::format("normalisation mean [{}] std [{}]\n", fmt::join(splits.norm_mean, ", "), fmt::join(splits.norm_std, ", "));
  out += describe_packed_split("train", *train);
  out += describe_packed_split("val", *val);
  return out;
}

std::string describe_folder(const DatasetSplits& splits) {
  const auto* train = dynamic_cast<const FolderDataset*>(splits.train.get());
  const auto* val = dynamic_cast<const FolderDataset*>(splits.test.get());
  if (train == nullptr || val == nullptr) throw std::logic_error("describe_folder: not a folder dataset");
  const CropConfig& crop = train->options().crop;
  std::string out = fmt::format("dataset folder ({}), samples {}", splits.data_dir, train->shape().str());
  out += crop.size > 0 ? fmt::format(": training random-resized crops (scale {}-{}, ratio {:.3f}-{:.3f}{}), evaluation "
                                     "the centre {} of the image resized to {}\n",
                                     crop.scale_min, crop.scale_max, crop.ratio_min, crop.ratio_max,
                                     crop.flip ? ", flipped at random" : "", crop.size,
                                     static_cast<int>(std::lround(crop.size / crop.eval_fraction)))
                       : ": images used as they are\n";
  out += fmt::format("normalisation mean [{}] std [{}]\n", fmt::join(splits.norm_mean, ", "), fmt::join(splits.norm_std, ", "));
  out += describe_split("train", *train);
  out += describe_split("val", *val);
  return out;
}

FolderTiming time_folder_epoch(const Dataset& train, std::uint64_t seed, int threads, int batch) {
  DistributedSampler sampler(train.size(), 0, 1, seed, DistributedSampler::Mode::kTrain);
  sampler.set_epoch(0);
  const auto b = static_cast<std::size_t>(batch);
  const std::size_t steps = sampler.steps(b);
  // TrainStep's key for epoch 0.
  const std::uint64_t key = derive_seed(seed, {static_cast<std::uint64_t>(RngPurpose::kAugment), 0});
  BatchLoader loader(train, threads, 4);
  std::vector<float> src;
  std::vector<std::int32_t> labels;
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t next = 0;
  for (std::size_t s = 0; s < steps; ++s) {
    while (next < steps) {
      const auto idx = sampler.batch(next, b);
      if (!loader.request({{0, next}, {idx.begin(), idx.end()}, key})) break;
      ++next;
    }
    loader.take(src, labels);
  }
  FolderTiming t;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t.images = steps * b;
  t.threads = threads;
  return t;
}

}  // namespace ringtrain
