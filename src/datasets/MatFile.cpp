// MAT-file v5 parsing: element tags (8 bytes, or 4-byte "small element" form), 8-byte
// padding, miMATRIX subelements (flags, dims, name, real part) and zlib-compressed
// miCOMPRESSED elements, all bounds-checked against the element and file sizes.
#include "datasets/MatFile.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "datasets/ByteReader.h"

namespace ringtrain {
namespace {

// miXXX data types of element tags.
enum MiType : std::uint32_t {
  kMiInt8 = 1, kMiUint8 = 2, kMiInt16 = 3, kMiUint16 = 4, kMiInt32 = 5, kMiUint32 = 6, kMiSingle = 7,
  kMiDouble = 9, kMiInt64 = 12, kMiUint64 = 13, kMiMatrix = 14, kMiCompressed = 15, kMiUtf8 = 16,
};
constexpr std::size_t kHeaderBytes = 128;
constexpr std::uint64_t kMaxDeflateRatio = 1032;  // see ByteReader.cpp
constexpr std::uint64_t kMaxNumel = std::uint64_t{1} << 40;

std::size_t mi_type_size(std::uint32_t type) {
  switch (type) {
    case kMiInt8: case kMiUint8: case kMiUtf8: return 1;
    case kMiInt16: case kMiUint16: return 2;
    case kMiInt32: case kMiUint32: case kMiSingle: return 4;
    case kMiDouble: case kMiInt64: case kMiUint64: return 8;
    default: return 0;
  }
}

std::uint32_t le32(const unsigned char* p) {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
}

std::size_t padded8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

// A bounded byte stream over one element's data: plain memory or a zlib inflater.
class ElementStream {
 public:
  ElementStream(const std::string& path, const unsigned char* data, std::size_t bytes, bool compressed)
      : path_(path), data_(data), bytes_(bytes), compressed_(compressed) {
    if (compressed_) {
      z_.next_in = const_cast<unsigned char*>(data_);
      z_.avail_in = static_cast<uInt>(bytes_);
      if (inflateInit(&z_) != Z_OK) throw std::runtime_error(fmt::format("{}: zlib inflateInit failed", path_));
    }
  }
  ~ElementStream() {
    if (compressed_) inflateEnd(&z_);
  }
  ElementStream(const ElementStream&) = delete;
  ElementStream& operator=(const ElementStream&) = delete;

  std::size_t position() const { return position_; }

  void read(void* dst, std::size_t n, const char* what) {
    if (n == 0) return;
    if (!compressed_) {
      if (position_ + n > bytes_)
        throw std::runtime_error(fmt::format("{}: truncated {}: needs {} bytes at element offset {} of {}", path_, what, n,
                                             position_, bytes_));
      std::memcpy(dst, data_ + position_, n);
      position_ += n;
      return;
    }
    auto* out = static_cast<unsigned char*>(dst);
    std::size_t left = n;
    while (left > 0) {
      const std::size_t chunk = std::min<std::size_t>(left, std::size_t{1} << 30);
      z_.next_out = out;
      z_.avail_out = static_cast<uInt>(chunk);
      while (z_.avail_out > 0) {
        const int rc = inflate(&z_, Z_NO_FLUSH);
        if (rc == Z_STREAM_END && z_.avail_out > 0)
          throw std::runtime_error(fmt::format("{}: compressed element ends inside its {} (truncated data)", path_, what));
        if (rc == Z_STREAM_END) break;
        if (rc == Z_BUF_ERROR || (rc == Z_OK && z_.avail_in == 0 && z_.avail_out > 0))
          throw std::runtime_error(fmt::format("{}: compressed element truncated inside its {}", path_, what));
        if (rc != Z_OK)
          throw std::runtime_error(
              fmt::format("{}: corrupt compressed element in its {} ({})", path_, what, z_.msg ? z_.msg : "inflate error"));
      }
      out += chunk;
      left -= chunk;
    }
    position_ += n;
  }

  void skip(std::size_t n, const char* what) {
    unsigned char scratch[4096];
    while (n > 0) {
      const std::size_t take = std::min(n, sizeof scratch);
      read(scratch, take, what);
      n -= take;
    }
  }

 private:
  const std::string& path_;
  const unsigned char* data_;
  std::size_t bytes_;
  bool compressed_;
  std::size_t position_ = 0;
  z_stream z_{};
};

struct Tag {
  std::uint32_t type = 0;
  std::uint32_t bytes = 0;
  bool small = false;
  unsigned char small_data[4] = {0, 0, 0, 0};
};

// Reads a subelement tag; a small element (upper 16 bits of the first word non-zero)
// carries up to 4 bytes of data in the tag's second word. Its 16-bit size field could
// claim up to 65535 bytes: anything above 4 is refused here, once, so no reader of
// small_data can copy past the 4 bytes it holds.
Tag read_tag(ElementStream& s, const char* what, const std::string& path) {
  unsigned char raw[8];
  s.read(raw, 8, what);
  Tag tag;
  const std::uint32_t word = le32(raw);
  if ((word >> 16) != 0) {
    tag.small = true;
    tag.type = word & 0xffff;
    tag.bytes = word >> 16;
    if (tag.bytes > 4)
      throw std::runtime_error(
          fmt::format("{}: small-element {} claims {} bytes (a small element holds at most 4)", path, what, tag.bytes));
    std::memcpy(tag.small_data, raw + 4, 4);
  } else {
    tag.type = word;
    tag.bytes = le32(raw + 4);
  }
  return tag;
}

// Reads a subelement's data (small or not) into out, including padding to 8 bytes.
std::vector<unsigned char> read_small_subelement(ElementStream& s, const Tag& tag, std::size_t limit, const char* what,
                                                 const std::string& path) {
  if (tag.small) return {tag.small_data, tag.small_data + tag.bytes};  // read_tag bounds it by 4
  if (tag.bytes > limit) throw std::runtime_error(fmt::format("{}: {} of {} bytes is implausibly large", path, what, tag.bytes));
  std::vector<unsigned char> data(tag.bytes);
  s.read(data.data(), data.size(), what);
  s.skip(padded8(tag.bytes) - tag.bytes, what);
  return data;
}

// Parses an miMATRIX's flags, dims and name; leaves s at the real part's tag.
MatVariable read_matrix_header(ElementStream& s, const std::string& path) {
  MatVariable v;
  const Tag flags_tag = read_tag(s, "array flags", path);
  if (flags_tag.type != kMiUint32 || flags_tag.bytes != 8 || flags_tag.small)
    throw std::runtime_error(fmt::format("{}: miMATRIX without its array-flags subelement (type {}, {} bytes)", path,
                                         flags_tag.type, flags_tag.bytes));
  unsigned char flags[8];
  s.read(flags, 8, "array flags");
  v.mx_class = flags[0];
  v.complex = (flags[1] & 0x08) != 0;

  const Tag dims_tag = read_tag(s, "dimensions", path);
  if (dims_tag.type != kMiInt32 || dims_tag.bytes % 4 != 0 || dims_tag.bytes < 8)
    throw std::runtime_error(fmt::format("{}: miMATRIX with a bad dimensions subelement (type {}, {} bytes)", path,
                                         dims_tag.type, dims_tag.bytes));
  const auto dims_raw = read_small_subelement(s, dims_tag, 4 * 64, "dimensions", path);
  for (std::size_t k = 0; k < dims_raw.size(); k += 4) {
    const auto d = static_cast<std::int32_t>(le32(dims_raw.data() + k));
    if (d < 0) throw std::runtime_error(fmt::format("{}: negative array dimension {}", path, d));
    v.dims.push_back(static_cast<std::uint64_t>(d));
  }

  const Tag name_tag = read_tag(s, "array name", path);
  if (name_tag.type != kMiInt8 && name_tag.type != kMiUtf8)
    throw std::runtime_error(fmt::format("{}: miMATRIX with a bad array-name subelement (type {})", path, name_tag.type));
  const auto name = read_small_subelement(s, name_tag, 4096, "array name", path);
  v.name.assign(name.begin(), name.end());
  if (v.numel() > kMaxNumel)
    throw std::runtime_error(fmt::format("{}: variable '{}' has implausible dimensions", path, v.name));
  return v;
}

std::string dims_str(const std::vector<std::uint64_t>& dims) {
  std::string s;
  for (auto d : dims) { if (!s.empty()) s += "x"; s += std::to_string(d); }
  return s;
}

template <typename T>
void convert_to_uint8(const unsigned char* src, std::size_t count, std::uint8_t* dst, bool& bad, double& bad_value) {
  for (std::size_t k = 0; k < count; ++k) {
    T v;
    std::memcpy(&v, src + k * sizeof(T), sizeof(T));
    const double d = static_cast<double>(v);
    if (!(d >= 0.0 && d <= 255.0) || d != std::floor(d)) {
      bad = true;
      bad_value = d;
      return;
    }
    dst[k] = static_cast<std::uint8_t>(d);
  }
}

}  // namespace

const char* mat_class_name(int mx_class) {
  static const char* const kNames[] = {"unknown", "cell",  "struct", "object", "char",   "sparse", "double", "single",
                                       "int8",    "uint8", "int16",  "uint16", "int32",  "uint32", "int64",  "uint64"};
  return mx_class >= 0 && mx_class <= 15 ? kNames[mx_class] : "unknown";
}

std::uint64_t MatVariable::numel() const {
  std::uint64_t n = 1;
  for (auto d : dims) {
    if (d != 0 && n > kMaxNumel / d) return kMaxNumel + 1;
    n *= d;
  }
  return n;
}

MatFile::MatFile(std::string path) : path_(std::move(path)) {
  const std::uint64_t size = file_size_checked(path_);
  if (size < kHeaderBytes)
    throw std::runtime_error(fmt::format("{}: {} bytes, too short for a MAT-file (128-byte header)", path_, size));
  {
    // Check the header before reading the whole file.
    std::ifstream in(path_, std::ios::binary);
    unsigned char header[kHeaderBytes];
    in.read(reinterpret_cast<char*>(header), kHeaderBytes);
    if (in.gcount() != static_cast<std::streamsize>(kHeaderBytes))
      throw std::runtime_error(fmt::format("{}: cannot read the MAT-file header", path_));
    const std::string text(reinterpret_cast<const char*>(header), 116);
    unsigned char hdf5[8] = {0};
    if (size >= 520) {
      in.seekg(512);
      in.read(reinterpret_cast<char*>(hdf5), 8);
    }
    const bool hdf5_signature = std::memcmp(hdf5, "\x89HDF\r\n\x1a\n", 8) == 0;
    const unsigned version = header[124] | header[125] << 8;
    if (text.starts_with("MATLAB 7.3") || hdf5_signature || version == 0x0200)
      throw std::runtime_error(fmt::format(
          "{}: MAT-file v7.3 (HDF5) is not supported; re-save it as v7 (MATLAB/Octave: save('-v7', ...)) or "
          "convert it (e.g. scipy.io.savemat after reading with h5py)",
          path_));
    if (header[126] == 'M' && header[127] == 'I')
      throw std::runtime_error(fmt::format("{}: big-endian MAT-file; only little-endian MAT-files are supported", path_));
    if (!(header[126] == 'I' && header[127] == 'M') || version != 0x0100)
      throw std::runtime_error(fmt::format(
          "{}: not a MAT-file v5/v7 (expected 'MATLAB 5.0 MAT-file' header text, version 0x0100, endian 'IM')", path_));
  }
  bytes_ = read_file_bytes(path_);

  std::size_t offset = kHeaderBytes;
  while (offset + 8 <= bytes_.size()) {
    const std::uint32_t type = le32(bytes_.data() + offset);
    const std::uint32_t nbytes = le32(bytes_.data() + offset + 4);
    const std::size_t data = offset + 8;
    if (nbytes > bytes_.size() - data)
      throw std::runtime_error(fmt::format("{}: data element at offset {} claims {} bytes but only {} remain; the file is "
                                           "truncated",
                                           path_, offset, nbytes, bytes_.size() - data));
    if (type == kMiMatrix || type == kMiCompressed) {
      const bool compressed = type == kMiCompressed;
      ElementStream s(path_, bytes_.data() + data, nbytes, compressed);
      std::uint64_t matrix_bytes = nbytes;
      bool is_matrix = true;
      if (compressed) {
        // A compressed element holds one complete element: tag then data.
        unsigned char inner[8];
        s.read(inner, 8, "compressed element tag");
        is_matrix = le32(inner) == kMiMatrix;
        matrix_bytes = le32(inner + 4);
        if (matrix_bytes > std::uint64_t{nbytes} * kMaxDeflateRatio + 64)
          throw std::runtime_error(fmt::format("{}: compressed element at offset {} claims {} bytes from {}; corrupt", path_,
                                               offset, matrix_bytes, nbytes));
      }
      if (is_matrix && matrix_bytes > 0) {
        MatVariable v = read_matrix_header(s, path_);
        variables_.push_back(std::move(v));
        entries_.push_back(Entry{data, nbytes, compressed});
      }
    }
    // Uncompressed elements are padded to 8 bytes; compressed ones are not.
    offset = data + (type == kMiCompressed ? nbytes : padded8(nbytes));
  }
}

const MatVariable& MatFile::variable(const std::string& name) const {
  for (const auto& v : variables_)
    if (v.name == name) return v;
  std::string present;
  for (const auto& v : variables_) { if (!present.empty()) present += ", "; present += v.name; }
  throw std::runtime_error(fmt::format("{}: variable '{}' not found (the file holds: {})", path_, name,
                                       present.empty() ? "no arrays" : present));
}

std::uint64_t MatFile::max_decoded_bytes(const std::string& name) const {
  const MatVariable& v = variable(name);
  const Entry& e = entries_[static_cast<std::size_t>(&v - variables_.data())];
  return e.compressed ? std::uint64_t{e.bytes} * kMaxDeflateRatio + 64 : e.bytes;
}

void MatFile::read_uint8(const std::string& name, std::uint8_t* dst, std::size_t count) const {
  const MatVariable& v = variable(name);
  const Entry& e = entries_[static_cast<std::size_t>(&v - variables_.data())];
  if (v.mx_class < static_cast<int>(MatClass::kDouble) || v.mx_class > static_cast<int>(MatClass::kUint64) || v.complex)
    throw std::runtime_error(fmt::format("{}: variable '{}' is a {}{} array, expected a real numeric array", path_, name,
                                         v.complex ? "complex " : "", mat_class_name(v.mx_class)));
  if (v.numel() != count)
    throw std::runtime_error(fmt::format("{}: variable '{}' has {} elements ({}), expected {}", path_, name, v.numel(),
                                         dims_str(v.dims), count));
  ElementStream s(path_, bytes_.data() + e.offset, e.bytes, e.compressed);
  if (e.compressed) s.skip(8, "compressed element tag");
  read_matrix_header(s, path_);
  const Tag real = read_tag(s, "real part", path_);
  const std::size_t elem = mi_type_size(real.type);
  if (elem == 0)
    throw std::runtime_error(fmt::format("{}: variable '{}' stores its data as unsupported type {}", path_, name, real.type));
  if (real.bytes != count * elem)
    throw std::runtime_error(fmt::format("{}: variable '{}' real part has {} bytes, expected {} ({} elements of {} bytes)",
                                         path_, name, real.bytes, count * elem, count, elem));
  auto convert_chunk = [&](const unsigned char* src, std::size_t n, std::uint8_t* out, std::size_t at) {
    bool bad = false;
    double bad_value = 0;
    switch (real.type) {
      case kMiInt8: convert_to_uint8<std::int8_t>(src, n, out, bad, bad_value); break;
      case kMiUint8: std::memcpy(out, src, n); break;
      case kMiInt16: convert_to_uint8<std::int16_t>(src, n, out, bad, bad_value); break;
      case kMiUint16: convert_to_uint8<std::uint16_t>(src, n, out, bad, bad_value); break;
      case kMiInt32: convert_to_uint8<std::int32_t>(src, n, out, bad, bad_value); break;
      case kMiUint32: convert_to_uint8<std::uint32_t>(src, n, out, bad, bad_value); break;
      case kMiSingle: convert_to_uint8<float>(src, n, out, bad, bad_value); break;
      case kMiDouble: convert_to_uint8<double>(src, n, out, bad, bad_value); break;
      case kMiInt64: convert_to_uint8<std::int64_t>(src, n, out, bad, bad_value); break;
      case kMiUint64: convert_to_uint8<std::uint64_t>(src, n, out, bad, bad_value); break;
      default: break;
    }
    if (bad)
      throw std::runtime_error(fmt::format("{}: variable '{}' holds {} near element {}, expected integers 0..255", path_,
                                           name, bad_value, at));
  };
  if (real.small) {
    convert_chunk(real.small_data, count, dst, 0);
    return;
  }
  if (real.type == kMiUint8) {
    s.read(dst, count, "real part");  // the common case (SVHN's X): straight into place
    return;
  }
  std::vector<unsigned char> chunk(std::min<std::size_t>(count, 8192) * elem);
  for (std::size_t done = 0; done < count;) {
    const std::size_t take = std::min(count - done, chunk.size() / elem);
    s.read(chunk.data(), take * elem, "real part");
    convert_chunk(chunk.data(), take, dst + done, done);
    done += take;
  }
}

}  // namespace ringtrain
