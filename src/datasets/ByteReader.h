// Sequential reader of a data file, raw or gzip, whose decoded size is known before any
// payload is read, so format readers can check headers against it before allocating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace ringtrain {

class ByteReader {
 public:
  // Opens path; a file starting with the gzip magic (1f 8b) is decompressed on the fly.
  // Throws std::runtime_error naming the path if it is missing, unreadable, or a gzip
  // file whose trailer is implausible (truncated or not gzip).
  explicit ByteReader(std::string path);
  ~ByteReader();
  ByteReader(const ByteReader&) = delete;
  ByteReader& operator=(const ByteReader&) = delete;

  const std::string& path() const noexcept { return path_; }
  bool gzipped() const noexcept { return gzipped_; }
  // Decoded size: the file size, or for gzip the ISIZE trailer (size mod 2^32, RFC 1952).
  std::uint64_t size() const noexcept { return size_; }
  std::uint64_t position() const noexcept { return position_; }
  // Human-readable note on where size() comes from, for error messages.
  std::string size_origin() const;

  // Reads exactly n bytes or throws (truncated or corrupt file).
  void read(void* dst, std::size_t n);
  // Checks that the stream ends exactly here: raw files must have no bytes left; gzip
  // streams must reach their end, where zlib verifies the CRC-32 and length trailer.
  void finish();

 private:
  struct Inflater;
  std::string path_;
  bool gzipped_ = false;
  std::uint64_t size_ = 0;
  std::uint64_t position_ = 0;
  std::ifstream file_;                     // raw files
  std::vector<unsigned char> compressed_;  // gzip files: the whole compressed file
  std::unique_ptr<Inflater> inflater_;
};

// Size of a regular file, or std::runtime_error naming the path.
std::uint64_t file_size_checked(const std::string& path);

// Reads a whole (raw) file into memory after checking it exists.
std::vector<unsigned char> read_file_bytes(const std::string& path);

}  // namespace ringtrain
