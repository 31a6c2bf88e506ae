// ByteReader: raw files through ifstream, gzip files through zlib's inflate with the
// decoded size taken from the RFC 1952 ISIZE trailer.
#include "datasets/ByteReader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

namespace ringtrain {
namespace {

// Deflate cannot expand data by more than about 1032:1 (zlib FAQ / zlib tech notes), so a
// trailer claiming more is a truncated or corrupt file, caught before allocating for it.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

}  // namespace

struct ByteReader::Inflater {
  z_stream z{};
  bool ended = false;
  ~Inflater() { inflateEnd(&z); }
};

std::uint64_t file_size_checked(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw std::runtime_error(fmt::format("{}: file not found", path));
  if (!std::filesystem::is_regular_file(status)) throw std::runtime_error(fmt::format("{}: not a regular file", path));
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot read file size ({})", path, ec.message()));
  return size;
}

std::vector<unsigned char> read_file_bytes(const std::string& path) {
  const std::uint64_t size = file_size_checked(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open for reading", path));
  std::vector<unsigned char> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (static_cast<std::uint64_t>(in.gcount()) != size)
    throw std::runtime_error(fmt::format("{}: read {} of {} bytes", path, in.gcount(), size));
  return bytes;
}

ByteReader::ByteReader(std::string path) : path_(std::move(path)) {
  const std::uint64_t file_size = file_size_checked(path_);
  file_.open(path_, std::ios::binary);
  if (!file_) throw std::runtime_error(fmt::format("{}: cannot open for reading", path_));
  unsigned char magic[2] = {0, 0};
  if (file_size >= 2) {
    file_.read(reinterpret_cast<char*>(magic), 2);
    file_.seekg(0);
  }
  gzipped_ = magic[0] == 0x1f && magic[1] == 0x8b;
  if (!gzipped_) {
    size_ = file_size;
    return;
  }
  // Smallest gzip file: 10-byte header, an empty deflate block, 8-byte trailer.
  if (file_size < 18)
    throw std::runtime_error(fmt::format("{}: truncated gzip file ({} bytes, a gzip file has at least 18)", path_, file_size));
  if (file_size > std::numeric_limits<uInt>::max())
    throw std::runtime_error(fmt::format("{}: gzip file of {} bytes is too large (limit 4 GiB)", path_, file_size));
  compressed_.resize(file_size);
  file_.read(reinterpret_cast<char*>(compressed_.data()), static_cast<std::streamsize>(file_size));
  if (static_cast<std::uint64_t>(file_.gcount()) != file_size)
    throw std::runtime_error(fmt::format("{}: read {} of {} bytes", path_, file_.gcount(), file_size));
  file_.close();
  const unsigned char* t = compressed_.data() + file_size - 4;  // ISIZE, little-endian
  size_ = std::uint64_t{t[0]} | std::uint64_t{t[1]} << 8 | std::uint64_t{t[2]} << 16 | std::uint64_t{t[3]} << 24;
  if (size_ > file_size * kMaxDeflateRatio)
    throw std::runtime_error(fmt::format(
        "{}: gzip trailer claims {} decompressed bytes from {} compressed bytes, more than deflate can encode; "
        "the file is truncated or corrupt",
        path_, size_, file_size));
  inflater_ = std::make_unique<Inflater>();
  inflater_->z.next_in = compressed_.data();
  inflater_->z.avail_in = static_cast<uInt>(file_size);
  if (inflateInit2(&inflater_->z, 16 + MAX_WBITS) != Z_OK)  // 16+: expect a gzip wrapper
    throw std::runtime_error(fmt::format("{}: zlib inflateInit2 failed", path_));
}

ByteReader::~ByteReader() = default;

std::string ByteReader::size_origin() const {
  return gzipped_ ? fmt::format("the gzip trailer says the decompressed size is {} bytes", size_)
                  : fmt::format("the file has {} bytes", size_);
}

void ByteReader::read(void* dst, std::size_t n) {
  if (n == 0) return;
  if (position_ + n > size_)
    throw std::runtime_error(fmt::format("{}: truncated: needs {} bytes at offset {} but {}", path_, n, position_, size_origin()));
  if (!gzipped_) {
    file_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (static_cast<std::size_t>(file_.gcount()) != n)
      throw std::runtime_error(fmt::format("{}: truncated: read {} of {} bytes at offset {}", path_, file_.gcount(), n, position_));
    position_ += n;
    return;
  }
  z_stream& z = inflater_->z;
  auto* out = static_cast<unsigned char*>(dst);
  std::size_t left = n;
  while (left > 0) {
    const std::size_t chunk = std::min<std::size_t>(left, std::size_t{1} << 30);
    z.next_out = out;
    z.avail_out = static_cast<uInt>(chunk);
    while (z.avail_out > 0) {
      const int rc = inflate(&z, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        inflater_->ended = true;
        if (z.avail_out > 0)
          throw std::runtime_error(fmt::format("{}: gzip stream ends after {} decompressed bytes but {}", path_,
                                               position_ + (chunk - z.avail_out) + (n - left), size_origin()));
        break;
      }
      if (rc == Z_BUF_ERROR || (rc == Z_OK && z.avail_in == 0 && z.avail_out > 0))
        throw std::runtime_error(fmt::format("{}: truncated gzip file: compressed data ends after {} decompressed bytes of {}",
                                             path_, position_ + (chunk - z.avail_out) + (n - left), size_));
      if (rc != Z_OK)
        throw std::runtime_error(fmt::format("{}: corrupt gzip data ({})", path_, z.msg ? z.msg : "inflate error"));
    }
    out += chunk;
    left -= chunk;
  }
  position_ += n;
}

void ByteReader::finish() {
  if (position_ != size_)
    throw std::runtime_error(fmt::format("{}: {} unread bytes at offset {} ({})", path_, size_ - position_, position_, size_origin()));
  if (!gzipped_) return;
  if (inflater_->ended) return;
  z_stream& z = inflater_->z;
  unsigned char extra = 0;
  z.next_out = &extra;
  z.avail_out = 1;
  const int rc = inflate(&z, Z_FINISH);
  if (rc == Z_STREAM_END && z.avail_out == 1) {
    inflater_->ended = true;
    return;
  }
  if (z.avail_out == 0)
    throw std::runtime_error(fmt::format("{}: gzip stream holds more than the {} bytes its trailer states (corrupt)", path_, size_));
  if (rc == Z_DATA_ERROR)
    throw std::runtime_error(fmt::format("{}: corrupt gzip data ({})", path_, z.msg ? z.msg : "inflate error"));
  throw std::runtime_error(fmt::format("{}: truncated gzip file: the stream has no end/trailer after {} bytes", path_, size_));
}

}  // namespace ringtrain
