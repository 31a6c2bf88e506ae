// ShardReader: the index checked whole at open, shards checked by size and magic, records
// by magic, fields and CRC-32 as they are read.
#include "datasets/ShardReader.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "datasets/ByteReader.h"
#include "datasets/DataNotFound.h"

namespace ringtrain {
namespace {

std::uint32_t get_u32(const std::uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

}  // namespace

std::span<const std::uint8_t> verify_record(std::span<const std::uint8_t> stored, const ShardRecord& record,
                                            const std::string& where) {
  if (stored.size() != kRecordHeaderBytes + record.bytes)
    throw std::runtime_error(fmt::format("{}: {} bytes, the index expects {}", where, stored.size(),
                                         kRecordHeaderBytes + record.bytes));
  const std::uint8_t* h = stored.data();
  if (std::memcmp(h, kRecordMagic, 4) != 0 || get_u32(h + 4) != record.label || get_u32(h + 8) != record.bytes ||
      get_u32(h + 12) != record.crc)
    throw std::runtime_error(fmt::format("{}: record header does not match the index (corrupt shard)", where));
  const std::uint32_t crc = record_crc32(stored.subspan(4, 8));
  const std::uint32_t computed = record_crc32(stored.subspan(kRecordHeaderBytes), crc);
  if (computed != record.crc)
    throw std::runtime_error(fmt::format("{}: checksum mismatch (stored {:08x}, computed {:08x}): the shard is corrupt",
                                         where, record.crc, computed));
  return stored.subspan(kRecordHeaderBytes);
}

ShardReader::ShardReader(std::string dir, std::string split) : dir_(std::move(dir)), split_(std::move(split)) {
  const std::string index_path = shard_index_path(dir_, split_);
  if (!std::filesystem::exists(index_path))
    throw DataNotFound(fmt::format("{}: no packed index (expected the output of ringtrain pack --out {})", index_path, dir_));
  const std::vector<unsigned char> bytes = read_file_bytes(index_path);
  index_ = ShardIndex::parse(std::span<const std::uint8_t>(bytes.data(), bytes.size()), index_path);
  try {
    open_shards(index_path);
  } catch (...) {
    for (int fd : fds_) ::close(fd);  // no destructor runs for a constructor that throws
    throw;
  }
}

void ShardReader::open_shards(const std::string& index_path) {
  for (std::uint32_t s = 0; s < index_.shard_bytes.size(); ++s) {
    const std::string path = shard_file_path(dir_, split_, s);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot open shard ({}), listed in {}", path, std::strerror(errno), index_path));
    fds_.push_back(fd);
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
      throw std::runtime_error(fmt::format("{}: not a regular file, expected a shard", path));
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size != index_.shard_bytes[s])
      throw std::runtime_error(fmt::format("{}: {} bytes, the index expects {} ({})", path, size, index_.shard_bytes[s],
                                           size < index_.shard_bytes[s] ? "truncated" : "not the shard it indexed"));
    char magic[sizeof kShardMagic] = {};
    if (::pread(fd, magic, sizeof magic, 0) != static_cast<ssize_t>(sizeof magic) ||
        std::memcmp(magic, kShardMagic, sizeof magic) != 0)
      throw std::runtime_error(fmt::format("{}: no RTSHARD1 magic, expected a shard written by ringtrain pack", path));
  }
}

ShardReader::~ShardReader() {
  for (int fd : fds_) ::close(fd);
}

std::span<const std::uint8_t> ShardReader::read(std::size_t i, std::vector<std::uint8_t>& buffer) const {
  const ShardRecord& r = index_.records.at(i);
  const std::uint64_t n = kRecordHeaderBytes + r.bytes;
  buffer.resize(static_cast<std::size_t>(n));
  std::uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fds_[r.shard], buffer.data() + done, static_cast<std::size_t>(n - done),
                                static_cast<off_t>(r.offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw std::runtime_error(fmt::format("{}: record {} of {} at byte {}: cannot read ({})", shard_file_path(dir_, split_, r.shard),
                                           i, split_, r.offset, got < 0 ? std::strerror(errno) : "the file ends early"));
    done += static_cast<std::uint64_t>(got);
  }
  return verify_record(buffer, r, fmt::format("{}: record {} of {} at byte {}", shard_file_path(dir_, split_, r.shard), i,
                                              split_, r.offset));
}

std::vector<std::size_t> ShardReader::block_starts(std::uint64_t block_bytes) const {
  std::vector<std::size_t> starts;
  std::uint64_t filled = 0;
  for (std::size_t i = 0; i < index_.records.size(); ++i) {
    const ShardRecord& r = index_.records[i];
    if (starts.empty() || filled >= block_bytes || index_.records[i - 1].shard != r.shard) {
      starts.push_back(i);
      filled = 0;
    }
    filled += kRecordHeaderBytes + r.bytes;
  }
  return starts;
}

}  // namespace ringtrain
