// PNG through libspng: gray, gray + alpha, palette, RGB, RGBA at 1-16 bits, all to 8-bit
// gray or RGB (alpha dropped, as PIL's convert("RGB") does; 16-bit samples keep their high byte).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "images/DecodedImage.h"

namespace ringtrain {

ImageHeader read_png_header(std::span<const std::uint8_t> bytes, const std::string& path);
DecodedImage decode_png(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request);

}  // namespace ringtrain
