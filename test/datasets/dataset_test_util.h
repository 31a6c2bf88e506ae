// Helpers for the dataset tests: a scratch directory and writers of the official file
// formats (gzip, IDX, MAT-file v5), written independently of the readers under test.
#pragma once

#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace ringtrain::test {

using Bytes = std::vector<unsigned char>;

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("ringtrain-datasets-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const Bytes& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// windowBits 15 + 16: a gzip wrapper (header, deflate data, CRC-32 and ISIZE trailer).
inline Bytes deflate_bytes(const Bytes& in, bool gzip) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, gzip ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  Bytes out(deflateBound(&z, in.size()) + 32);
  z.next_in = const_cast<unsigned char*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}
inline Bytes gzip_bytes(const Bytes& in) { return deflate_bytes(in, true); }

inline void put_be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
}
inline void put_le32(Bytes& b, std::uint32_t v) {
  for (int s = 0; s <= 24; s += 8) b.push_back(static_cast<unsigned char>(v >> s));
}
inline void pad8(Bytes& b) {
  while (b.size() % 8 != 0) b.push_back(0);
}

// IDX: magic, dims (big-endian), then the bytes.
inline Bytes idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, const Bytes& pixels,
                        std::uint32_t magic = 0x803) {
  Bytes b;
  put_be32(b, magic);
  put_be32(b, count);
  put_be32(b, rows);
  put_be32(b, cols);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}
inline Bytes idx_labels(const Bytes& labels, std::uint32_t magic = 0x801) {
  Bytes b;
  put_be32(b, magic);
  put_be32(b, static_cast<std::uint32_t>(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

// MAT-file v5 pieces (MathWorks "MAT-File Format", little-endian).
inline Bytes mat_header(const std::string& text = "MATLAB 5.0 MAT-file, written by ringtrain's tests",
                        std::uint16_t version = 0x0100) {
  Bytes b(128, ' ');
  std::memcpy(b.data(), text.data(), std::min<std::size_t>(text.size(), 116));
  std::memset(b.data() + 116, 0, 8);  // subsystem data offset
  b[124] = static_cast<unsigned char>(version & 0xff);
  b[125] = static_cast<unsigned char>(version >> 8);
  b[126] = 'I';
  b[127] = 'M';
  return b;
}

enum : std::uint32_t { kMiInt8 = 1, kMiUint8 = 2, kMiUint16 = 4, kMiInt32 = 5, kMiUint32 = 6, kMiDouble = 9, kMiMatrix = 14, kMiCompressed = 15 };
enum : int { kMxChar = 4, kMxDouble = 6, kMxUint8 = 9 };

// A subelement: small form (type and size in one word, data in the next) when allowed.
inline void put_subelement(Bytes& b, std::uint32_t type, const Bytes& data, bool allow_small) {
  if (allow_small && data.size() <= 4) {
    put_le32(b, static_cast<std::uint32_t>(data.size()) << 16 | type);
    Bytes d = data;
    d.resize(4, 0);
    b.insert(b.end(), d.begin(), d.end());
    return;
  }
  put_le32(b, type);
  put_le32(b, static_cast<std::uint32_t>(data.size()));
  b.insert(b.end(), data.begin(), data.end());
  pad8(b);
}

struct MatArray {
  std::string name;
  int mx_class = kMxUint8;
  std::vector<std::int32_t> dims;
  std::uint32_t data_type = kMiUint8;
  Bytes data;  // the real part, already in data_type's little-endian encoding
};

// A complete miMATRIX element: tag, flags, dims, name, real part.
inline Bytes mat_matrix(const MatArray& a) {
  Bytes body;
  Bytes flags(8, 0);
  flags[0] = static_cast<unsigned char>(a.mx_class);
  put_subelement(body, kMiUint32, flags, false);
  Bytes dims;
  for (auto d : a.dims) put_le32(dims, static_cast<std::uint32_t>(d));
  put_subelement(body, kMiInt32, dims, false);
  put_subelement(body, kMiInt8, Bytes(a.name.begin(), a.name.end()), true);
  put_subelement(body, a.data_type, a.data, true);
  Bytes b;
  put_le32(b, kMiMatrix);
  put_le32(b, static_cast<std::uint32_t>(body.size()));
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

// An miCOMPRESSED element wrapping a complete element in a zlib stream (not padded).
inline Bytes mat_compressed(const Bytes& element) {
  const Bytes z = deflate_bytes(element, false);
  Bytes b;
  put_le32(b, kMiCompressed);
  put_le32(b, static_cast<std::uint32_t>(z.size()));
  b.insert(b.end(), z.begin(), z.end());
  return b;
}

inline Bytes doubles(const std::vector<double>& v) {
  Bytes b(v.size() * 8);
  std::memcpy(b.data(), v.data(), b.size());  // the test machine is little-endian, like the format here
  return b;
}

}  // namespace ringtrain::test
