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
  // The part of the image the caller will read, in source pixels (region_width 0: all),
  // and how many decoded pixels around it it needs too (a resampling filter's reach). A
  // JPEG decodes only those columns (jpeg_crop_scanline, from an iMCU boundary) and skips
  // the rows above (jpeg_skip_scanlines); the rows below are skipped unconverted, so a
  // damaged file fails whatever the region. PNG decodes everything.
  int region_x = 0;
  int region_y = 0;
  int region_width = 0;
  int region_height = 0;
  int region_margin = 0;
};

struct DecodedImage {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;  // (height, width, channels)
  // The size before DCT scaling (equal to width/height for PNG and unscaled JPEG).
  int source_width = 0;
  int source_height = 0;
  // The whole decoded (DCT-scaled) image's size, and where pixels' (0, 0) lies in it: a
  // region's decode holds only part of it.
  int full_width = 0;
  int full_height = 0;
  int offset_x = 0;
  int offset_y = 0;
};

}  // namespace ringtrain
