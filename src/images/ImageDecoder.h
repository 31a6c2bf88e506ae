// Format detection and the decoder dispatch: a file's bytes -> header or 8-bit pixels.
// Every failure is a std::runtime_error naming the file and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "images/DecodedImage.h"

namespace ringtrain {

// JPEG (FF D8 FF) or PNG (89 'PNG' 0D 0A 1A 0A) by magic bytes, whatever the extension
// says. Throws std::runtime_error for anything else (empty, text, another format).
ImageFormat sniff_image_format(std::span<const std::uint8_t> bytes, const std::string& path);

ImageHeader read_image_header(std::span<const std::uint8_t> bytes, const std::string& path);
DecodedImage decode_image(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request);
// The same into `out`: a JPEG reuses out's pixel buffer (a loader thread's, so that no
// image allocates); a PNG replaces it.
void decode_image(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request,
                  DecodedImage& out);

// The whole file (or its first max_bytes), or std::runtime_error naming it (missing,
// unreadable, a directory).
std::vector<std::uint8_t> read_image_file(const std::string& path, std::size_t max_bytes = SIZE_MAX);
// The whole file into `bytes` (its capacity reused): its size from fstat, then one read.
void read_image_file(const std::string& path, std::vector<std::uint8_t>& bytes);

// The header from the file's first 64 KiB, or from the whole file when the header runs past
// them (large EXIF or ICC blocks). Throws as read_image_header.
ImageHeader read_image_file_header(const std::string& path);

// Refuses width x height above max_pixels (or a zero size); shared by both decoders so
// the message is the same.
void check_pixel_limit(std::uint64_t width, std::uint64_t height, std::uint64_t max_pixels, const std::string& path);

// (R, G, B) -> luma with ITU-R BT.601 weights in 16-bit fixed point, as PIL's convert("L").
inline std::uint8_t rgb_to_luma(unsigned r, unsigned g, unsigned b) {
  return static_cast<std::uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

}  // namespace ringtrain
