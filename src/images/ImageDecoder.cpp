// Format sniffing, the pixel limit and file reading shared by the JPEG and PNG decoders.
#include "images/ImageDecoder.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "images/JpegDecoder.h"
#include "images/PngDecoder.h"

namespace ringtrain {
namespace {

struct FileDescriptor {
  int fd;
  ~FileDescriptor() { ::close(fd); }
};

}  // namespace

ImageFormat sniff_image_format(std::span<const std::uint8_t> bytes, const std::string& path) {
  static constexpr std::uint8_t kPng[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) return ImageFormat::kJpeg;
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return ImageFormat::kPng;
  if (bytes.empty()) throw std::runtime_error(fmt::format("{}: empty file, expected a JPEG or PNG image", path));
  throw std::runtime_error(fmt::format("{}: not a JPEG or PNG image (expected the bytes FF D8 FF or 89 'PNG' at the start)", path));
}

void check_pixel_limit(std::uint64_t width, std::uint64_t height, std::uint64_t max_pixels, const std::string& path) {
  if (width == 0 || height == 0)
    throw std::runtime_error(fmt::format("{}: header says {}x{} pixels, expected a non-empty image", path, width, height));
  if (width * height > max_pixels)
    throw std::runtime_error(fmt::format("{}: header says {}x{} = {} pixels, more than the limit of {} (--max-pixels)",
                                         path, width, height, width * height, max_pixels));
}

ImageHeader read_image_header(std::span<const std::uint8_t> bytes, const std::string& path) {
  return sniff_image_format(bytes, path) == ImageFormat::kJpeg ? read_jpeg_header(bytes, path)
                                                              : read_png_header(bytes, path);
}

DecodedImage decode_image(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request) {
  if (request.channels != 1 && request.channels != 3)
    throw std::invalid_argument(fmt::format("decode_image: channels must be 1 or 3, got {}", request.channels));
  return sniff_image_format(bytes, path) == ImageFormat::kJpeg ? decode_jpeg(bytes, path, request)
                                                              : decode_png(bytes, path, request);
}

void decode_image(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request,
                  DecodedImage& out) {
  if (request.channels != 1 && request.channels != 3)
    throw std::invalid_argument(fmt::format("decode_image: channels must be 1 or 3, got {}", request.channels));
  if (sniff_image_format(bytes, path) == ImageFormat::kJpeg)
    decode_jpeg(bytes, path, request, out);
  else
    out = decode_png(bytes, path, request);
}

void read_image_file(const std::string& path, std::vector<std::uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot open ({}), expected a readable image file", path, std::strerror(errno)));
  const FileDescriptor owner{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::runtime_error(fmt::format("{}: cannot stat ({}), expected a readable image file", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw std::runtime_error(fmt::format("{}: is a directory, expected an image file", path));
  // The size fstat gives, one read in the common case; a file that grew meanwhile is read on.
  bytes.resize(std::max<std::size_t>(static_cast<std::size_t>(std::max<off_t>(st.st_size, 0)), 1));
  std::size_t got = 0;
  for (;;) {
    if (got == bytes.size()) bytes.resize(bytes.size() * 2);
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(fmt::format("{}: read error ({}), expected a readable image file", path, std::strerror(errno)));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
}

std::vector<std::uint8_t> read_image_file(const std::string& path, std::size_t max_bytes) {
  if (max_bytes == SIZE_MAX) {
    std::vector<std::uint8_t> bytes;
    read_image_file(path, bytes);
    return bytes;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error(fmt::format("{}: is a directory, expected an image file", path));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open ({}), expected a readable image file", path, std::strerror(errno)));
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[1 << 16];
  while (bytes.size() < max_bytes) {
    const std::size_t want = std::min(sizeof chunk, max_bytes - bytes.size());
    const std::size_t n = std::fread(chunk, 1, want, f.get());
    bytes.insert(bytes.end(), chunk, chunk + n);
    if (n < want) break;
  }
  if (std::ferror(f.get())) throw std::runtime_error(fmt::format("{}: read error, expected a readable image file", path));
  return bytes;
}

ImageHeader read_image_file_header(const std::string& path) {
  constexpr std::size_t kPrefix = 64u << 10;
  const std::vector<std::uint8_t> prefix = read_image_file(path, kPrefix);
  if (prefix.size() < kPrefix) return read_image_header(prefix, path);
  try {
    return read_image_header(prefix, path);
  } catch (const std::runtime_error&) {
    return read_image_header(read_image_file(path), path);
  }
}

}  // namespace ringtrain
