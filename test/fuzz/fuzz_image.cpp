// libFuzzer harness: the image decoder wrappers (header, then decode to 1 and 3 channels, at
// a DCT scale the last byte picks, and a region). decode_image picks JPEG or PNG from the bytes,
// so fuzz_jpeg and fuzz_png are this one source over their own seed corpora. A thrown std::exception is its answer to bad input;
// a crash, a sanitizer report, libjpeg calling exit() or a hang is a bug.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>

#include "images/ImageDecoder.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  ringtrain::DecodeRequest request;
  request.max_pixels = 4u << 20;  // inside -rss_limit_mb with room for the decoder's buffers
  try {
    (void)ringtrain::read_image_header(bytes, "fuzz");
  } catch (const std::exception&) {
  }
  for (int channels : {1, 3}) {
    request.channels = channels;
    request.min_width = request.min_height = size > 0 ? data[size - 1] % 64 : 0;
    // A region (the crops' partial decode) the second-last byte picks, on the second pass.
    if (channels == 3 && size > 1) {
      request.region_x = data[size - 2] % 32;
      request.region_y = data[size - 2] / 8;
      request.region_width = request.region_height = 1 + data[size - 2] % 13;
      request.region_margin = data[size - 2] % 5;
    }
    try {
      const ringtrain::DecodedImage image = ringtrain::decode_image(bytes, "fuzz", request);
      if (image.pixels.size() != static_cast<std::size_t>(image.width) * image.height * channels) __builtin_trap();
    } catch (const std::exception&) {
    }
  }
  return 0;
}
