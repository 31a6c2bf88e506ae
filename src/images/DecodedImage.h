// What the image decoders produce and what they are asked for: 8-bit pixels, interleaved
// (H, W, C) as the codecs write them, with the collection's channel count (1 or 3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain {

// 64 megapixels: larger than any photo a CNN trains on, small enough that a forged header
// (60000x60000 claims 3.6 gigapixels, 10.8 GB as RGB) is refused before any allocation.
inline constexpr std::uint64_t kDefaultMaxPixels = 64ull << 20;

enum class ImageFormat { kJpeg, kPng };

// What a file's header says, read without decoding any pixel.
struct ImageHeader {
  ImageFormat format = ImageFormat::kPng;
  int width = 0;
  int height = 0;
  bool gray = false;  // the source has one colour channel (gray, or gray + alpha)
};

struct DecodeRequest {
  int channels = 3;                            // 1 (luma) or 3 (RGB)
  std::uint64_t max_pixels = kDefaultMaxPixels;  // width * height above this is refused from the header
  // The smallest width and height the caller needs the whole image to keep. A JPEG is
  // decoded at the smallest DCT scale N/8 that keeps both (0: full size); PNG ignores it.
  int min_width = 0;
  int min_height = 0;
};

struct DecodedImage {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;  // (height, width, channels)
  // The size before DCT scaling (equal to width/height for PNG and unscaled JPEG).
  int source_width = 0;
  int source_height = 0;
};

}  // namespace ringtrain
