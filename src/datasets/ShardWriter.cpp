// ShardWriter: stdio appends, every write checked; the index through a temporary file.
#include "datasets/ShardWriter.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {
namespace {

void put_u32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

}  // namespace

ShardWriter::ShardWriter(std::string dir, std::string split, ShardIndex index, std::uint64_t max_shard_bytes)
    : dir_(std::move(dir)), split_(std::move(split)), index_(std::move(index)), max_shard_bytes_(max_shard_bytes) {
  if (max_shard_bytes_ < 1) throw std::invalid_argument("--shard-bytes: expected a positive size");
  index_.shard_bytes.clear();
  index_.records.clear();
}

ShardWriter::~ShardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void ShardWriter::write(const void* data, std::size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, file_) != n)
    throw std::runtime_error(fmt::format("{}: cannot write ({})", file_path_, std::strerror(errno)));
  file_bytes_ += n;
}

void ShardWriter::open_shard() {
  const auto shard = static_cast<std::uint32_t>(index_.shard_bytes.size());
  file_path_ = shard_file_path(dir_, split_, shard);
  file_ = std::fopen(file_path_.c_str(), "wb");
  if (file_ == nullptr) throw std::runtime_error(fmt::format("{}: cannot create ({})", file_path_, std::strerror(errno)));
  file_bytes_ = 0;
  index_.shard_bytes.push_back(0);
  write(kShardMagic, sizeof kShardMagic);
}

void ShardWriter::close_shard() {
  if (file_ == nullptr) return;
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) throw std::runtime_error(fmt::format("{}: cannot write ({})", file_path_, std::strerror(errno)));
  index_.shard_bytes.back() = file_bytes_;
}

void ShardWriter::add(std::span<const std::uint8_t> payload, int label, int width, int height) {
  if (label < 0 || static_cast<std::size_t>(label) >= index_.class_names.size())
    throw std::invalid_argument(fmt::format("ShardWriter: label {} of {} classes", label, index_.class_names.size()));
  if (width < 1 || height < 1 || width > 65535 || height > 65535)
    throw std::invalid_argument(fmt::format("ShardWriter: a {}x{} image", width, height));
  if (payload.size() > UINT32_MAX - kRecordHeaderBytes)
    throw std::invalid_argument(fmt::format("ShardWriter: a record of {} bytes", payload.size()));
  const std::uint64_t record_bytes = kRecordHeaderBytes + payload.size();
  // A new shard when this record would pass the limit (a shard holds at least one record).
  if (file_ != nullptr && file_bytes_ > sizeof kShardMagic && file_bytes_ + record_bytes > max_shard_bytes_) close_shard();
  if (file_ == nullptr) open_shard();
  std::uint8_t header[kRecordHeaderBytes];
  std::memcpy(header, kRecordMagic, 4);
  put_u32(header + 4, static_cast<std::uint32_t>(label));
  put_u32(header + 8, static_cast<std::uint32_t>(payload.size()));
  std::uint32_t crc = record_crc32(std::span<const std::uint8_t>(header + 4, 8));
  crc = record_crc32(payload, crc);
  put_u32(header + 12, crc);
  ShardRecord r;
  r.shard = static_cast<std::uint32_t>(index_.shard_bytes.size() - 1);
  r.offset = file_bytes_;
  r.bytes = static_cast<std::uint32_t>(payload.size());
  r.label = static_cast<std::uint32_t>(label);
  r.crc = crc;
  r.width = static_cast<std::uint32_t>(width);
  r.height = static_cast<std::uint32_t>(height);
  write(header, sizeof header);
  write(payload.data(), payload.size());
  index_.records.push_back(r);
}

const ShardIndex& ShardWriter::finish() {
  close_shard();
  const std::vector<std::uint8_t> bytes = index_.serialize();
  const std::string path = shard_index_path(dir_, split_);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error(fmt::format("{}: cannot create ({})", tmp, std::strerror(errno)));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error(fmt::format("{}: cannot write ({})", tmp, std::strerror(errno)));
  std::filesystem::rename(tmp, path);
  return index_;
}

}  // namespace ringtrain
