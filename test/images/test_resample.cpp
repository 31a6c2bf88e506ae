// resample_box against the triangle filter it implements, computed here in double from its
// definition (every source pixel weighted, no taps or windows), for gray and RGB, shrinking
// and enlarging, fractional boxes, boxes at the image's edges and the flip.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/Random.h"
#include "images/Resample.h"

using namespace ringtrain;

namespace {

DecodedImage noise_image(int w, int h, int channels, std::uint64_t seed) {
  DecodedImage image;
  image.width = image.full_width = image.source_width = w;
  image.height = image.full_height = image.source_height = h;
  image.channels = channels;
  Rng rng(seed);
  image.pixels.resize(static_cast<std::size_t>(w) * h * channels);
  for (auto& p : image.pixels) p = static_cast<std::uint8_t>(rng.below(256));
  return image;
}

// Weights of every source pixel for output i along one axis: a triangle of half-width
// max(scale, 1) around the output's centre, cut at the image's edges, summing to 1.
std::vector<double> reference_weights(double start, double extent, int in_size, int out_size, int i) {
  const double scale = extent / out_size, support = std::max(scale, 1.0);
  const double center = start + (i + 0.5) * scale;
  std::vector<double> w(static_cast<std::size_t>(in_size));
  double sum = 0.0;
  for (int j = 0; j < in_size; ++j) sum += w[j] = std::max(0.0, 1.0 - std::abs((j + 0.5 - center) / support));
  for (double& v : w) v /= sum;
  return w;
}

// (C, out_h, out_w) in double, normalised as (x / 255 - mean) / std.
std::vector<double> reference(const DecodedImage& image, const CropBox& box, int out_w, int out_h,
                              const std::vector<float>& mean, const std::vector<float>& stdev) {
  const int c_n = image.channels;
  std::vector<double> out(static_cast<std::size_t>(c_n) * out_h * out_w);
  for (int y = 0; y < out_h; ++y) {
    const auto wy = reference_weights(box.y, box.height, image.height, out_h, y);
    for (int x = 0; x < out_w; ++x) {
      const auto wx = reference_weights(box.x, box.width, image.width, out_w, x);
      for (int c = 0; c < c_n; ++c) {
        double acc = 0.0;
        for (int sy = 0; sy < image.height; ++sy)
          for (int sx = 0; sx < image.width; ++sx)
            acc += wy[sy] * wx[sx] * image.pixels[(static_cast<std::size_t>(sy) * image.width + sx) * c_n + c];
        const int ox = box.flip ? out_w - 1 - x : x;
        out[(static_cast<std::size_t>(c) * out_h + y) * out_w + ox] = (acc / 255.0 - mean[c]) / stdev[c];
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("resample_box equals the triangle filter computed in double", "[images]") {
  struct Case {
    int w, h, channels;
    CropBox box;
    int out_w, out_h;
  };
  const Case cases[] = {
      {60, 45, 3, {3.0, 5.0, 50.0, 37.0, false}, 12, 9},      // shrink ~4x: the widened triangle
      {60, 45, 3, {10.0, 7.0, 29.0, 31.0, true}, 16, 16},     // flipped, different x and y scales
      {40, 30, 3, {0.0, 0.0, 40.0, 30.0, false}, 7, 5},       // whole image, windows slide back at the edges
      {40, 30, 3, {31.0, 22.0, 9.0, 8.0, false}, 20, 17},     // enlarge a corner box: bilinear at the edges
      {37, 29, 3, {2.25, 3.5, 30.5, 20.75, true}, 11, 13},    // fractional box (a DCT-scaled crop)
      {60, 45, 1, {3.0, 5.0, 50.0, 37.0, true}, 12, 9},       // gray
      {9, 7, 1, {0.0, 0.0, 9.0, 7.0, false}, 2, 2},           // taps as wide as the image
      {5, 4, 3, {1.0, 1.0, 3.0, 2.0, false}, 13, 11},         // tiny image enlarged
  };
  int n = 0;
  for (const Case& k : cases) {
    const DecodedImage image = noise_image(k.w, k.h, k.channels, 100 + n);
    const std::vector<float> mean = k.channels == 3 ? std::vector<float>{0.485f, 0.456f, 0.406f} : std::vector<float>{0.5f};
    const std::vector<float> stdev = k.channels == 3 ? std::vector<float>{0.229f, 0.224f, 0.225f} : std::vector<float>{0.25f};
    std::vector<float> got(static_cast<std::size_t>(k.channels) * k.out_w * k.out_h, -99.0f);
    resample_box(image, k.box, k.out_w, k.out_h, {mean, stdev}, got.data());
    const auto want = reference(image, k.box, k.out_w, k.out_h, mean, stdev);
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    INFO("case " << n << ": " << k.w << "x" << k.h << "x" << k.channels << " -> " << k.out_w << "x" << k.out_h);
    // One 8-bit step is 1 / (255 * std) >= 0.017 here; the float sums were within 7e-7.
    CHECK(worst < 1e-5);
    ++n;
  }
}

TEST_CASE("resample_box gives the same floats on every call, whatever came before", "[images]") {
  const DecodedImage a = noise_image(500, 375, 3, 7), b = noise_image(31, 300, 3, 8);
  const std::vector<float> mean{0.485f, 0.456f, 0.406f}, stdev{0.229f, 0.224f, 0.225f};
  const CropBox box{13.5, 20.25, 400.0, 300.0, true};
  std::vector<float> first(3 * 224 * 224), again(first.size()), other(first.size());
  resample_box(a, box, 224, 224, {mean, stdev}, first.data());
  // Another image of other sizes in between: the thread's reused buffers must not leak into the next.
  resample_box(b, {0.0, 0.0, 31.0, 300.0, false}, 224, 224, {mean, stdev}, other.data());
  resample_box(a, box, 224, 224, {mean, stdev}, again.data());
  CHECK(first == again);
}
