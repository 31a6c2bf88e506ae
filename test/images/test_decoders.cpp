// The JPEG and PNG decoders against pixels the tests wrote themselves, every colour type
// and depth to 1 and 3 channels, DCT scaling, and every bad input as a runtime_error that
// names the file.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "images/ImageDecoder.h"
#include "images/JpegDecoder.h"
#include "images/image_test_util.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

std::vector<std::uint8_t> gradient(int w, int h, int channels) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(w) * h * channels);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c)
        v[(static_cast<std::size_t>(y) * w + x) * channels + c] = static_cast<std::uint8_t>((x * 7 + y * 3 + c * 50) % 256);
  return v;
}

DecodedImage decode(const ImageBytes& bytes, int channels, std::uint64_t max_pixels = kDefaultMaxPixels) {
  DecodeRequest request;
  request.channels = channels;
  request.max_pixels = max_pixels;
  return decode_image(bytes, "img.x", request);
}

int max_abs_diff(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  REQUIRE(a.size() == b.size());
  int worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(int(a[i]) - int(b[i])));
  return worst;
}

void require_error(const ImageBytes& bytes, const std::string& expected) {
  try {
    (void)decode(bytes, 3);
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("img.x") != std::string::npos);
    CHECK(what.find(expected) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("PNG gray, RGB and RGBA 8-bit decode to exactly the written pixels", "[images]") {
  const auto gray = gradient(13, 7, 1);
  const DecodedImage g = decode(encode_png(gray, 13, 7, SPNG_COLOR_TYPE_GRAYSCALE, 8), 1);
  CHECK(g.width == 13);
  CHECK(g.height == 7);
  CHECK(g.pixels == gray);
  // Gray to 3 channels: the value repeated.
  const DecodedImage g3 = decode(encode_png(gray, 13, 7, SPNG_COLOR_TYPE_GRAYSCALE, 8), 3);
  for (std::size_t p = 0; p < gray.size(); ++p) CHECK((g3.pixels[3 * p] == gray[p] && g3.pixels[3 * p + 2] == gray[p]));

  const auto rgb = gradient(9, 5, 3);
  CHECK(decode(encode_png(rgb, 9, 5, SPNG_COLOR_TYPE_TRUECOLOR, 8), 3).pixels == rgb);
  const auto rgba = gradient(9, 5, 4);
  const DecodedImage a = decode(encode_png(rgba, 9, 5, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, 8), 3);
  for (std::size_t p = 0; p < 45; ++p)
    for (int c = 0; c < 3; ++c) CHECK(a.pixels[3 * p + c] == rgba[4 * p + c]);  // alpha dropped
  // RGB to 1 channel: BT.601 luma.
  const DecodedImage l = decode(encode_png(rgb, 9, 5, SPNG_COLOR_TYPE_TRUECOLOR, 8), 1);
  for (std::size_t p = 0; p < 45; ++p) CHECK(l.pixels[p] == rgb_to_luma(rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2]));
}

TEST_CASE("PNG palette and 16-bit become 8-bit", "[images]") {
  const std::vector<std::uint8_t> palette = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
  const std::vector<std::uint8_t> indices = {0, 1, 2, 3, 3, 2};
  const DecodedImage p = decode(encode_png(indices, 3, 2, SPNG_COLOR_TYPE_INDEXED, 8, palette), 3);
  for (std::size_t i = 0; i < indices.size(); ++i)
    for (int c = 0; c < 3; ++c) CHECK(p.pixels[3 * i + c] == palette[3 * indices[i] + c]);

  // 16-bit gray (libspng's encoder takes host-endian samples): the high byte survives.
  std::vector<std::uint8_t> wide;
  const auto gray = gradient(6, 4, 1);
  for (std::uint8_t v : gray) {
    const auto sample = static_cast<std::uint16_t>(v * 256 + (255 - v));
    const auto* b = reinterpret_cast<const std::uint8_t*>(&sample);
    wide.insert(wide.end(), b, b + 2);
  }
  const DecodedImage g = decode(encode_png(wide, 6, 4, SPNG_COLOR_TYPE_GRAYSCALE, 16), 1);
  CHECK(max_abs_diff(g.pixels, gray) <= 1);
}

TEST_CASE("JPEG gray, RGB and CMYK decode close to the written pixels", "[images]") {
  std::vector<std::uint8_t> flat(16 * 16, 77);
  CHECK(decode(encode_jpeg(flat, 16, 16, JCS_GRAYSCALE, 100), 1).pixels == flat);  // a flat block is exact
  const auto gray = gradient(24, 16, 1);
  const DecodedImage g = decode(encode_jpeg(gray, 24, 16, JCS_GRAYSCALE, 100), 1);
  CHECK(g.width == 24);
  CHECK(max_abs_diff(g.pixels, gray) <= 3);

  std::vector<std::uint8_t> rgb(16 * 16 * 3);
  for (std::size_t p = 0; p < 256; ++p) rgb[3 * p] = 200, rgb[3 * p + 1] = 40, rgb[3 * p + 2] = 90;
  CHECK(max_abs_diff(decode(encode_jpeg(rgb, 16, 16, JCS_RGB, 100), 3).pixels, rgb) <= 2);

  // libjpeg writes CMYK with an Adobe marker, whose files (Photoshop's) store the inks
  // inverted: C=0 M=100% Y=100% K=0, red, is stored as (255, 0, 0, 255).
  std::vector<std::uint8_t> cmyk(16 * 16 * 4);
  for (std::size_t p = 0; p < 256; ++p) cmyk[4 * p] = 255, cmyk[4 * p + 1] = 0, cmyk[4 * p + 2] = 0, cmyk[4 * p + 3] = 255;
  const DecodedImage c = decode(encode_jpeg(cmyk, 16, 16, JCS_CMYK, 100), 3);
  CHECK(c.pixels[0] >= 250);
  CHECK(c.pixels[1] <= 5);
  CHECK(c.pixels[2] <= 5);
}

TEST_CASE("JPEG DCT scaling decodes no more than the caller needs", "[images]") {
  CHECK(jpeg_scale_numerator(64, 48, 16, 12) == 2);
  CHECK(jpeg_scale_numerator(64, 48, 17, 1) == 4);  // 3/8 would do; only powers of two are asked for
  CHECK(jpeg_scale_numerator(64, 48, 33, 1) == 8);
  CHECK(jpeg_scale_numerator(64, 48, 0, 0) == 8);  // nothing asked: full size
  CHECK(jpeg_scale_numerator(64, 48, 0, 6) == 1);
  CHECK(jpeg_scale_numerator(64, 48, 100, 1) == 8);
  const auto rgb = gradient(64, 48, 3);
  DecodeRequest request;
  request.min_width = 16;
  request.min_height = 12;
  const DecodedImage d = decode_image(encode_jpeg(rgb, 64, 48, JCS_RGB), "a.jpg", request);
  CHECK(d.width == 16);
  CHECK(d.height == 12);
  CHECK(d.source_width == 64);
  CHECK(d.source_height == 48);
}

TEST_CASE("JPEG regions: only the region's rows and columns, equal to a full decode's", "[images]") {
  // 4:2:0 colour (libjpeg's default), so fancy upsampling is in play at the region's edges.
  const auto rgb = gradient(203, 151, 3);
  const ImageBytes jpeg = encode_jpeg(rgb, 203, 151, JCS_RGB, 90);
  for (int min_size : {0, 60}) {
    DecodeRequest full;
    full.min_width = full.min_height = min_size;
    const DecodedImage whole = decode_image(jpeg, "a.jpg", full);
    DecodeRequest part = full;
    part.region_x = 77;
    part.region_y = 40;
    part.region_width = 50;
    part.region_height = 61;
    part.region_margin = 3;
    const DecodedImage region = decode_image(jpeg, "a.jpg", part);
    INFO("min size " << min_size);
    CHECK(region.full_width == whole.width);
    CHECK(region.full_height == whole.height);
    CHECK(region.width < whole.width);
    CHECK(region.height < whole.height);
    CHECK(region.offset_x % 8 == 0);  // an iMCU boundary of the scaled image
    // Every pixel but the region's two outer columns (fancy upsampling's edges) is the full decode's.
    int differing = 0;
    for (int y = 0; y < region.height; ++y)
      for (int x = 2; x < region.width - 2; ++x)
        for (int c = 0; c < 3; ++c)
          differing += region.pixels[(static_cast<std::size_t>(y) * region.width + x) * 3 + c] !=
                       whole.pixels[(static_cast<std::size_t>(y + region.offset_y) * whole.width + x + region.offset_x) * 3 + c];
    CHECK(differing == 0);
  }
  // A damaged file fails whatever the region: the rows below are still read.
  DecodeRequest top;
  top.region_width = top.region_height = 8;
  CHECK_THROWS_WITH(decode_image(ImageBytes(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() * 3 / 4)), "a.jpg", top),
                    Catch::Contains("a.jpg"));
}

TEST_CASE("Headers say size and gray without decoding", "[images]") {
  const ImageHeader j = read_image_header(encode_jpeg(gradient(20, 10, 1), 20, 10, JCS_GRAYSCALE), "a.jpg");
  CHECK(j.format == ImageFormat::kJpeg);
  CHECK((j.width == 20 && j.height == 10 && j.gray));
  const ImageHeader p = read_image_header(encode_png(gradient(5, 6, 3), 5, 6, SPNG_COLOR_TYPE_TRUECOLOR, 8), "a.png");
  CHECK(p.format == ImageFormat::kPng);
  CHECK((p.width == 5 && p.height == 6 && !p.gray));
  // A forged 60000 x 60000 header is readable, and refused by decode before any allocation.
  CHECK(read_image_header(png_header_only(60000, 60000), "big.png").width == 60000);
}

TEST_CASE("Bad images are runtime errors naming the file and the expectation", "[images]") {
  require_error({}, "empty file");
  const std::string text = "label,path\n1,a.jpg\n";
  require_error(ImageBytes(text.begin(), text.end()), "not a JPEG or PNG");
  const ImageBytes jpeg = encode_jpeg(gradient(32, 32, 3), 32, 32, JCS_RGB);
  require_error(ImageBytes(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() / 2)), "expected a complete JPEG");
  require_error(ImageBytes(jpeg.begin(), jpeg.begin() + 3), "expected a complete JPEG");
  const ImageBytes png = encode_png(gradient(32, 32, 3), 32, 32, SPNG_COLOR_TYPE_TRUECOLOR, 8);
  require_error(ImageBytes(png.begin(), png.begin() + static_cast<long>(png.size() / 2)), "expected a complete PNG");
  require_error(ImageBytes(png.begin(), png.begin() + 12), "expected a complete PNG");
  require_error(png_header_only(60000, 60000), "more than the limit");
  require_error(jpeg_with_claimed_size(60000, 60000), "more than the limit");
  // The limit is the caller's: a 32x32 image against a 1000-pixel limit.
  CHECK_THROWS_WITH(decode(png, 3, 1000), Catch::Contains("--max-pixels"));
  CHECK(decode(png, 3, 1024).width == 32);
}

TEST_CASE("Unreadable files are runtime errors naming them", "[images]") {
  const auto dir = std::filesystem::temp_directory_path() / ("rt-images-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  CHECK_THROWS_WITH(read_image_file((dir / "missing.png").string()), Catch::Contains("missing.png"));
  CHECK_THROWS_WITH(read_image_file(dir.string()), Catch::Contains("is a directory"));
  write_bytes((dir / "a.png").string(), {1, 2, 3});
  CHECK(read_image_file((dir / "a.png").string()) == ImageBytes{1, 2, 3});
  // Into a loader thread's buffer: a longer file's bytes before, an empty file's after.
  std::vector<std::uint8_t> buffer(1000, 7);
  read_image_file((dir / "a.png").string(), buffer);
  CHECK(buffer == std::vector<std::uint8_t>{1, 2, 3});
  write_bytes((dir / "empty.png").string(), {});
  read_image_file((dir / "empty.png").string(), buffer);
  CHECK(buffer.empty());
  CHECK_THROWS_WITH(read_image_file(dir.string(), buffer), Catch::Contains("is a directory"));
  std::filesystem::remove_all(dir);
}
