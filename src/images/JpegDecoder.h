// JPEG through libjpeg-turbo's libjpeg API: header, and decode to 8-bit gray or RGB with
// DCT scaling (N/8) so no more pixels are decoded than the caller needs.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "images/DecodedImage.h"

namespace ringtrain {

ImageHeader read_jpeg_header(std::span<const std::uint8_t> bytes, const std::string& path);

// Gray, YCbCr, RGB, CMYK and YCCK sources; warnings other than extraneous bytes between
// markers (a truncated file, corrupt entropy data) are errors, not gray-filled images.
DecodedImage decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request);
// The same into `out`, whose pixel buffer is reused (a loader thread's, so no image allocates).
void decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request,
                 DecodedImage& out);

// The DCT scale numerator N (of N/8) decode_jpeg uses: the smallest N in 1, 2, 4, 8 with
// ceil(width * N / 8) >= min_width and ceil(height * N / 8) >= min_height; 8 when both are 0.
int jpeg_scale_numerator(int width, int height, int min_width, int min_height);

}  // namespace ringtrain
