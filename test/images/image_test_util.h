// Test helpers: PNG and JPEG files written with libspng's encoder and libjpeg's compressor,
// so decoder tests compare against pixels they chose, and crafted headers (a forged size).
#pragma once

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <spng.h>
#include <zlib.h>

namespace ringtrain::test {

using ImageBytes = std::vector<std::uint8_t>;

// PNG of width x height with the given colour type and bit depth; samples holds the raw
// scanlines' values (big-endian for 16 bits), palette as RGB triples for indexed images.
inline ImageBytes encode_png(const std::vector<std::uint8_t>& samples, int width, int height, int color_type,
                             int bit_depth, const std::vector<std::uint8_t>& palette = {}) {
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<std::uint32_t>(width);
  ihdr.height = static_cast<std::uint32_t>(height);
  ihdr.bit_depth = static_cast<std::uint8_t>(bit_depth);
  ihdr.color_type = static_cast<std::uint8_t>(color_type);
  spng_set_ihdr(ctx, &ihdr);
  if (!palette.empty()) {
    spng_plte plte{};
    plte.n_entries = static_cast<std::uint32_t>(palette.size() / 3);
    for (std::uint32_t i = 0; i < plte.n_entries; ++i)
      plte.entries[i] = {palette[3 * i], palette[3 * i + 1], palette[3 * i + 2], 255};
    spng_set_plte(ctx, &plte);
  }
  int rc = spng_encode_image(ctx, samples.data(), samples.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  std::size_t size = 0;
  void* buf = rc == 0 ? spng_get_png_buffer(ctx, &size, &rc) : nullptr;
  spng_ctx_free(ctx);
  if (buf == nullptr) throw std::runtime_error(std::string("encode_png: ") + spng_strerror(rc));
  ImageBytes out(static_cast<std::uint8_t*>(buf), static_cast<std::uint8_t*>(buf) + size);
  std::free(buf);
  return out;
}

// JPEG of (height, width, components) 8-bit samples in the given colour space (JCS_GRAYSCALE,
// JCS_RGB, JCS_CMYK). Test inputs are valid, so libjpeg's default exit-on-error stays.
inline ImageBytes encode_jpeg(const std::vector<std::uint8_t>& samples, int width, int height, J_COLOR_SPACE space,
                              int quality = 95) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = space == JCS_GRAYSCALE ? 1 : space == JCS_CMYK ? 4 : 3;
  cinfo.in_color_space = space;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const std::size_t row = static_cast<std::size_t>(width) * cinfo.input_components;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW r = const_cast<JSAMPROW>(samples.data() + row * cinfo.next_scanline);
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  ImageBytes out(buf, buf + size);
  std::free(buf);
  return out;
}

// A PNG signature and an IHDR chunk (with a valid CRC) claiming width x height 8-bit RGB,
// followed by nothing: what a forged header looks like.
inline ImageBytes png_header_only(std::uint32_t width, std::uint32_t height) {
  ImageBytes out = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13};
  const std::size_t type_at = out.size();
  for (char c : std::string("IHDR")) out.push_back(static_cast<std::uint8_t>(c));
  for (std::uint32_t v : {width, height})
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
  for (std::uint8_t b : {8, 2, 0, 0, 0}) out.push_back(b);
  const auto crc = static_cast<std::uint32_t>(crc32(0, out.data() + type_at, static_cast<uInt>(out.size() - type_at)));
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(crc >> s));
  return out;
}

// A JPEG whose SOF claims width x height: a real small JPEG with the frame size patched.
inline ImageBytes jpeg_with_claimed_size(std::uint16_t width, std::uint16_t height) {
  ImageBytes bytes = encode_jpeg(std::vector<std::uint8_t>(8 * 8, 128), 8, 8, JCS_GRAYSCALE);
  for (std::size_t i = 2; i + 8 < bytes.size(); ++i) {
    if (bytes[i] == 0xFF && (bytes[i + 1] == 0xC0 || bytes[i + 1] == 0xC1 || bytes[i + 1] == 0xC2)) {
      // FF C0, length (2), precision (1), height (2), width (2)
      bytes[i + 5] = static_cast<std::uint8_t>(height >> 8);
      bytes[i + 6] = static_cast<std::uint8_t>(height);
      bytes[i + 7] = static_cast<std::uint8_t>(width >> 8);
      bytes[i + 8] = static_cast<std::uint8_t>(width);
      return bytes;
    }
  }
  throw std::runtime_error("jpeg_with_claimed_size: no SOF marker");
}

inline void write_bytes(const std::string& path, const ImageBytes& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  // An empty vector's data() may be null, which fwrite must not get (a zero-byte file is a case).
  if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

}  // namespace ringtrain::test
