// Writes one split of a packed collection: records appended to shard files of at most
// max_shard_bytes each (a record larger than that gets a shard of its own), then the index,
// written last under a temporary name and renamed, so a pack that dies leaves no index a
// reader could take for a whole one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "datasets/ShardIndex.h"

namespace ringtrain {

inline constexpr std::uint64_t kDefaultShardBytes = 256ull << 20;

class ShardWriter {
 public:
  // `index` carries the encoding, channels, class names and normalisation; its shards and
  // records are filled here. The directory must exist.
  ShardWriter(std::string dir, std::string split, ShardIndex index, std::uint64_t max_shard_bytes = kDefaultShardBytes);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends one image (raw (H, W, C) bytes or a JPEG file's bytes). Throws
  // std::invalid_argument for a label outside the classes, std::runtime_error naming the
  // shard when writing fails.
  void add(std::span<const std::uint8_t> payload, int label, int width, int height);
  // Closes the last shard and writes the index; returns it.
  const ShardIndex& finish();

  std::size_t records() const noexcept { return index_.records.size(); }

 private:
  std::string dir_;
  std::string split_;
  ShardIndex index_;
  std::uint64_t max_shard_bytes_;
  std::FILE* file_ = nullptr;
  std::string file_path_;
  std::uint64_t file_bytes_ = 0;

  void open_shard();
  void close_shard();
  void write(const void* data, std::size_t n);
};

}  // namespace ringtrain
