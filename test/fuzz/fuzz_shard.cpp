// libFuzzer harness: a packed split (index + one shard) through ShardReader and PackedDataset,
// every record read and made into a cropped sample. Input: a flags byte, the index's size
// (u32 little-endian), the index, then shard 0. Unless flag bit 0 is set, the harness first
// writes correct checksums (the index's trailer, each record's CRC in the index and in the
// shard), so mutations reach the structure behind them instead of stopping at a CRC; with
// it, the checks themselves are fuzzed. A thrown std::exception is the reader's answer to
// bad input; a crash, a sanitizer report or a hang is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "datasets/PackedDataset.h"
#include "datasets/ShardIndex.h"

using namespace ringtrain;

namespace {

void put_u32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Rewrites the checksums of index and shard so both pass; false when the index does not parse.
bool fix_checksums(std::vector<std::uint8_t>& index, std::vector<std::uint8_t>& shard) {
  if (index.size() < 4) return false;
  put_u32(index.data() + index.size() - 4, record_crc32(std::span(index).first(index.size() - 4)));
  ShardIndex ix;
  try {
    ix = ShardIndex::parse(index, "fuzz.index");
  } catch (const std::exception&) {
    return false;
  }
  for (ShardRecord& r : ix.records) {
    if (r.shard != 0 || r.offset > shard.size() || shard.size() - r.offset < kRecordHeaderBytes + r.bytes) continue;
    std::uint8_t* h = shard.data() + r.offset;
    std::memcpy(h, kRecordMagic, 4);
    put_u32(h + 4, r.label);
    put_u32(h + 8, r.bytes);
    r.crc = record_crc32(std::span<const std::uint8_t>(h + 4, 8));
    r.crc = record_crc32(std::span<const std::uint8_t>(h + kRecordHeaderBytes, r.bytes), r.crc);
    put_u32(h + 12, r.crc);
  }
  if (!ix.shard_bytes.empty()) ix.shard_bytes[0] = shard.size();
  index = ix.serialize();
  return true;
}

void write(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()),
                                                                 static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // In RAM where there is /dev/shm (the files are rewritten for every input); removed at exit.
  struct ScratchDir {
    std::filesystem::path path;
    ScratchDir() {
      const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                                  : std::filesystem::temp_directory_path();
      path = base / ("ringtrain-fuzz-shard-" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~ScratchDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path;
  if (size < 5) return 0;
  std::uint32_t index_size = 0;
  std::memcpy(&index_size, data + 1, 4);
  if (index_size > size - 5) return 0;
  std::vector<std::uint8_t> index(data + 5, data + 5 + index_size), shard(data + 5 + index_size, data + size);
  // A record offset moved past a changed size would no longer fit; sizes stay as they are.
  if ((data[0] & 1) == 0 && shard.size() >= 8 && !fix_checksums(index, shard)) return 0;
  write(dir / "train.index", index);
  write(dir / "train-00000.shard", shard);
  try {
    auto reader = std::make_unique<ShardReader>(dir.string(), "train");
    const int channels = static_cast<int>(reader->index().channels);
    CropConfig crop;
    crop.size = 8;
    PackedDataset d(std::move(reader), ImageShape{channels, 8, 8}, crop, 1u << 20);
    d.set_augment(true);
    std::vector<float> x(d.shape().numel());
    (void)d.block_starts(64);
    for (std::size_t i = 0; i < d.size() && i < 64; ++i) {
      try {
        d.get_augmented(i, x.data(), 1 + i);
        d.get(i, x.data());
      } catch (const std::exception&) {
      }
    }
  } catch (const std::exception&) {
  }
  return 0;
}
