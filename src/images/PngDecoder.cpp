// libspng decodes every PNG colour type to RGBA8 (palette and tRNS expanded); the
// collection's channel count is taken from that. The header is checked against the pixel
// limit before libspng allocates the image.
#include "images/PngDecoder.h"

#include <memory>
#include <stdexcept>
#include <vector>

#include <spng.h>

#include <fmt/format.h>

#include "images/ImageDecoder.h"

namespace ringtrain {
namespace {

using SpngContext = std::unique_ptr<spng_ctx, void (*)(spng_ctx*)>;

// Ancillary chunks (text, ICC profiles) never reach the pixels; these limits stop a file
// from making libspng buffer gigabytes of them.
constexpr std::size_t kChunkLimit = 16u << 20;
constexpr std::size_t kChunkCacheLimit = 64u << 20;

void check(int code, const std::string& path, const char* doing) {
  if (code != 0)
    throw std::runtime_error(fmt::format("{}: {} ({}), expected a complete PNG image", path, spng_strerror(code), doing));
}

SpngContext open_png(std::span<const std::uint8_t> bytes, const std::string& path, spng_ihdr& ihdr) {
  SpngContext ctx(spng_ctx_new(0), &spng_ctx_free);
  if (!ctx) throw std::runtime_error(fmt::format("{}: out of memory creating a PNG decoder", path));
  check(spng_set_chunk_limits(ctx.get(), kChunkLimit, kChunkCacheLimit), path, "setting chunk limits");
  check(spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size()), path, "reading the signature");
  check(spng_get_ihdr(ctx.get(), &ihdr), path, "reading the header");
  return ctx;
}

bool gray_type(std::uint8_t color_type) {
  return color_type == SPNG_COLOR_TYPE_GRAYSCALE || color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
}

}  // namespace

ImageHeader read_png_header(std::span<const std::uint8_t> bytes, const std::string& path) {
  spng_ihdr ihdr{};
  const SpngContext ctx = open_png(bytes, path, ihdr);
  ImageHeader header;
  header.format = ImageFormat::kPng;
  header.width = static_cast<int>(ihdr.width);
  header.height = static_cast<int>(ihdr.height);
  header.gray = gray_type(ihdr.color_type);
  return header;
}

DecodedImage decode_png(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request) {
  spng_ihdr ihdr{};
  const SpngContext ctx = open_png(bytes, path, ihdr);
  check_pixel_limit(ihdr.width, ihdr.height, request.max_pixels, path);
  std::size_t size = 0;
  check(spng_decoded_image_size(ctx.get(), SPNG_FMT_RGBA8, &size), path, "sizing the image");
  std::vector<std::uint8_t> rgba(size);
  check(spng_decode_image(ctx.get(), rgba.data(), rgba.size(), SPNG_FMT_RGBA8, SPNG_DECODE_TRNS), path, "decoding");
  DecodedImage out;
  out.width = out.source_width = out.full_width = static_cast<int>(ihdr.width);
  out.height = out.source_height = out.full_height = static_cast<int>(ihdr.height);
  out.channels = request.channels;
  const std::size_t pixels = static_cast<std::size_t>(out.width) * out.height;
  out.pixels.resize(pixels * static_cast<std::size_t>(out.channels));
  const bool gray = gray_type(ihdr.color_type);
  const std::uint8_t* src = rgba.data();
  std::uint8_t* dst = out.pixels.data();
  for (std::size_t p = 0; p < pixels; ++p, src += 4) {
    if (out.channels == 3) {
      *dst++ = src[0];
      *dst++ = src[1];
      *dst++ = src[2];
    } else {
      *dst++ = gray ? src[0] : rgb_to_luma(src[0], src[1], src[2]);
    }
  }
  return out;
}

}  // namespace ringtrain
