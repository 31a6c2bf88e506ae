// Image folders the folder-dataset tests build themselves: gray or RGB ramps as PNG or
// JPEG under DIR/<split>/<class>/, and a slice of Fashion-MNIST as lossless PNGs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "datasets/ImageDataset.h"
#include "images/image_test_util.h"

namespace ringtrain::test {

// A w x h image whose pixels depend on (seed, y, x, c), so every file differs.
inline std::vector<std::uint8_t> ramp_image(int w, int h, int channels, int seed) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(w) * h * channels);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c)
        v[(static_cast<std::size_t>(y) * w + x) * channels + c] =
            static_cast<std::uint8_t>((seed * 37 + x * 11 + y * 5 + c * 80) % 256);
  return v;
}

inline void write_png(const std::filesystem::path& path, const std::vector<std::uint8_t>& pixels, int w, int h,
                      int channels) {
  std::filesystem::create_directories(path.parent_path());
  write_bytes(path.string(), encode_png(pixels, w, h, channels == 1 ? SPNG_COLOR_TYPE_GRAYSCALE : SPNG_COLOR_TYPE_TRUECOLOR, 8));
}

inline void write_jpeg(const std::filesystem::path& path, const std::vector<std::uint8_t>& pixels, int w, int h,
                       int channels, int quality = 95) {
  std::filesystem::create_directories(path.parent_path());
  write_bytes(path.string(), encode_jpeg(pixels, w, h, channels == 1 ? JCS_GRAYSCALE : JCS_RGB, quality));
}

// DIR/<split>/c<k>/img<i>.png: `per_class` ramps of w x h for each of `classes` classes.
inline void make_ramp_folder(const std::filesystem::path& dir, const std::string& split, int classes, int per_class, int w,
                             int h, int channels) {
  for (int k = 0; k < classes; ++k)
    for (int i = 0; i < per_class; ++i)
      write_png(dir / split / fmt::format("c{}", k) / fmt::format("img{:03}.png", i), ramp_image(w, h, channels, k * 100 + i),
                w, h, channels);
}

// The first `count` samples of an ImageDataset written as DIR/<split>/<label>/<index>.png,
// and the same samples as an ImageDataset in the folder's order (by label, then index).
inline ImageDataset export_as_png(const ImageDataset& source, std::size_t count, const std::filesystem::path& dir,
                                  const std::string& split) {
  const ImageShape s = source.shape();
  const std::size_t numel = s.numel();
  std::vector<std::uint8_t> pixels, labels;
  for (int label = 0; label < source.classes(); ++label) {
    for (std::size_t i = 0; i < count; ++i) {
      if (source.label(i) != label) continue;
      const auto* p = source.pixels().data() + i * numel;
      write_png(dir / split / fmt::format("{}", label) / fmt::format("{:05}.png", i), {p, p + numel}, s.width, s.height, 1);
      pixels.insert(pixels.end(), p, p + numel);
      labels.push_back(static_cast<std::uint8_t>(label));
    }
  }
  std::vector<std::string> names;
  for (int k = 0; k < source.classes(); ++k) names.push_back(std::to_string(k));
  return ImageDataset(s, source.classes(), std::move(pixels), std::move(labels), names, "exported");
}

}  // namespace ringtrain::test
