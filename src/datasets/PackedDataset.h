// A packed split (ShardReader) as a Dataset: each get() reads one record with one pread,
// checks its checksum and makes the sample as a folder image would be made (ImageSampler:
// the same crops, DCT-scaled region decodes of JPEG records, normalisation), so loader
// threads, crops and their bits work unchanged; --dataset packed --data-dir SHARDS.
#pragma once

#include <memory>

#include "datasets/Dataset.h"
#include "datasets/ImageSampler.h"
#include "datasets/ShardReader.h"

namespace ringtrain {

class PackedDataset final : public Dataset {
 public:
  // shape: (channels, size, size) with a crop, the records' common size without (the
  // caller checks they have one).
  PackedDataset(std::unique_ptr<ShardReader> reader, ImageShape shape, CropConfig crop, std::uint64_t max_pixels);

  std::size_t size() const override { return reader_->size(); }
  ImageShape shape() const override { return sampler_.shape(); }
  int classes() const override { return static_cast<int>(reader_->index().class_names.size()); }
  int label(std::size_t i) const override { return static_cast<int>(reader_->record(i).label); }
  void get(std::size_t i, float* dst) const override { get_augmented(i, dst, 0); }
  void get_augmented(std::size_t i, float* dst, std::uint64_t augment_key) const override;
  std::vector<std::string> class_names() const override { return reader_->index().class_names; }
  std::vector<std::size_t> block_starts(std::uint64_t block_bytes) const override {
    return reader_->block_starts(block_bytes);
  }

  void set_normalization(std::span<const float> mean, std::span<const float> std) { sampler_.set_normalization(mean, std); }
  void set_augment(bool on) noexcept { sampler_.set_augment(on); }
  const ShardReader& reader() const noexcept { return *reader_; }

  // Record i as 8-bit (H, W, C) pixels, checked (whole: no crop region).
  void decode(std::size_t i, const DecodeRequest& request, DecodedImage& image) const;

 private:
  std::unique_ptr<ShardReader> reader_;
  ImageSampler sampler_;
};

// --dataset packed: SHARDS/train.* and SHARDS/val.*. Throws DataNotFound for a missing
// index, std::runtime_error naming the file for bad shards, std::invalid_argument for
// options the records cannot give (--channels other than theirs).
DatasetSplits load_packed_dataset(const DatasetConfig& config);

}  // namespace ringtrain
