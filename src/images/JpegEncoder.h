// 8-bit gray or RGB pixels -> a baseline JPEG file in memory, through libjpeg-turbo's
// libjpeg API (what `ringtrain pack` re-encodes resized images with).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ringtrain {

// pixels: (height, width, channels), channels 1 or 3; quality 1..100 (libjpeg's scale,
// 4:2:0 chroma for RGB below 90, 4:4:4 from 90 as PIL does). Throws std::invalid_argument
// for bad sizes, std::runtime_error if libjpeg fails.
std::vector<std::uint8_t> encode_jpeg(std::span<const std::uint8_t> pixels, int width, int height, int channels,
                                      int quality);

}  // namespace ringtrain
