// Reads one split of a packed collection: the index in memory (32 bytes a record), the
// shards open, each record read with one pread into the caller's buffer and checked against
// its checksum. Nothing else is held, so memory is bounded by the records in flight (the
// loader's prefetch depth), not by the data size; the page cache, which the kernel may drop,
// holds the rest. Safe to read from several threads at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "datasets/ShardIndex.h"

namespace ringtrain {

class ShardReader {
 public:
  // Reads SHARDS/<split>.index and opens every shard, checking its size against the index
  // and its magic. Throws DataNotFound for a missing index, std::runtime_error naming the
  // file for a bad index, a missing shard or one of another size (truncated).
  ShardReader(std::string dir, std::string split);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const ShardIndex& index() const noexcept { return index_; }
  std::size_t size() const noexcept { return index_.records.size(); }
  const ShardRecord& record(std::size_t i) const { return index_.records[i]; }
  const std::string& dir() const noexcept { return dir_; }
  const std::string& split() const noexcept { return split_; }

  // Record i's payload, read into buffer (resized); throws std::runtime_error naming the
  // shard and the record when it fails its checksum or cannot be read.
  std::span<const std::uint8_t> read(std::size_t i, std::vector<std::uint8_t>& buffer) const;

  // Where the blocks of --shuffle block start: runs of consecutive records of one shard of
  // about block_bytes (at least one record each).
  std::vector<std::size_t> block_starts(std::uint64_t block_bytes) const;

 private:
  std::string dir_;
  std::string split_;
  ShardIndex index_;
  std::vector<int> fds_;

  void open_shards(const std::string& index_path);
};

// Checks a record's bytes (its header then payload, as stored at record.offset) against its
// index entry; returns the payload. Throws std::runtime_error starting with `where`.
std::span<const std::uint8_t> verify_record(std::span<const std::uint8_t> stored, const ShardRecord& record,
                                            const std::string& where);

}  // namespace ringtrain
