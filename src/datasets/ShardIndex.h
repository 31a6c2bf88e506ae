// The index of a packed split (SHARDS/<split>.index): what every record is, where it lies
// and its checksum, so a reader needs nothing but the index to know the collection and
// checks each record it reads against it. Layout in docs/images.md ("Packed shards").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ringtrain {

enum class RecordEncoding : std::uint32_t { kRaw = 0, kJpeg = 1 };

// One record: payload bytes in shard `shard` after a kRecordHeaderBytes header at `offset`.
struct ShardRecord {
  std::uint32_t shard = 0;
  std::uint64_t offset = 0;
  std::uint32_t bytes = 0;  // payload
  std::uint32_t label = 0;
  std::uint32_t crc = 0;    // CRC-32 of the record header's label and size fields and the payload
  std::uint32_t width = 0;
  std::uint32_t height = 0;
};

// "RTSHARD1" opens every shard file; each record is "RTRC", label u32, payload bytes u32,
// crc u32 (little-endian), then the payload.
inline constexpr char kShardMagic[8] = {'R', 'T', 'S', 'H', 'A', 'R', 'D', '1'};
inline constexpr char kRecordMagic[4] = {'R', 'T', 'R', 'C'};
inline constexpr std::uint64_t kRecordHeaderBytes = 16;
inline constexpr std::uint32_t kShardIndexVersion = 1;

struct ShardIndex {
  RecordEncoding encoding = RecordEncoding::kRaw;
  std::uint32_t channels = 1;  // of every record: raw (H, W, C) bytes, or JPEG gray/RGB
  std::vector<std::string> class_names;
  // The normalisation the source data set used (mean, std per channel in x/255 units).
  std::vector<float> norm_mean;
  std::vector<float> norm_std;
  std::vector<std::uint64_t> shard_bytes;  // each shard file's exact size
  std::vector<ShardRecord> records;

  // The file's bytes, ending with the CRC-32 of all before it.
  std::vector<std::uint8_t> serialize() const;
  // Parses an index file's bytes; throws std::runtime_error naming `path` and what was
  // expected (a wrong magic, a bad checksum, counts the size cannot hold, a record outside
  // its shard or with a label >= classes). Allocates only what the bytes hold.
  static ShardIndex parse(std::span<const std::uint8_t> bytes, const std::string& path);
};

// SHARDS/<split>.index and SHARDS/<split>-NNNNN.shard.
std::string shard_index_path(const std::string& dir, const std::string& split);
std::string shard_file_path(const std::string& dir, const std::string& split, std::uint32_t shard);

// zlib's CRC-32 (the checkpoints' polynomial), continuing from crc.
std::uint32_t record_crc32(std::span<const std::uint8_t> bytes, std::uint32_t crc = 0) noexcept;

}  // namespace ringtrain
