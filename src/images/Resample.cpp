// resample_box: PIL's two-pass resampling (precomputed taps per output coordinate,
// horizontal pass over the rows the vertical taps need, then vertical), in float, rounded
// once at the end into the normalised value.
#include "images/Resample.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ringtrain {
namespace {

// Filter taps of every output coordinate along one axis.
struct Taps {
  std::vector<int> first;       // first source index of output i
  std::vector<int> count;       // number of taps of output i
  std::vector<float> weights;   // count[i] weights at i * stride
  int stride = 0;
};

Taps make_taps(double start, double extent, int in_size, int out_size) {
  const double scale = extent / out_size;  // source pixels per output pixel
  const double support = std::max(scale, 1.0);
  Taps taps;
  taps.stride = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(out_size);
  taps.count.resize(out_size);
  taps.weights.assign(static_cast<std::size_t>(out_size) * taps.stride, 0.0f);
  for (int i = 0; i < out_size; ++i) {
    const double center = start + (i + 0.5) * scale;
    int lo = std::max(0, static_cast<int>(std::floor(center - support)));
    int hi = std::min(in_size, static_cast<int>(std::ceil(center + support)));
    hi = std::min(hi, lo + taps.stride);
    double sum = 0.0;
    float* w = taps.weights.data() + static_cast<std::size_t>(i) * taps.stride;
    for (int j = lo; j < hi; ++j) {
      const double t = std::abs((j + 0.5 - center) / support);
      w[j - lo] = static_cast<float>(t < 1.0 ? 1.0 - t : 0.0);
      sum += w[j - lo];
    }
    if (sum <= 0.0) {  // a box outside the image (cannot come from the crops): nearest edge pixel
      lo = std::clamp(static_cast<int>(center), 0, in_size - 1);
      hi = lo + 1;
      w[0] = 1.0f;
      sum = 1.0;
    }
    for (int j = 0; j < hi - lo; ++j) w[j] = static_cast<float>(w[j] / sum);
    taps.first[i] = lo;
    taps.count[i] = hi - lo;
  }
  return taps;
}

}  // namespace

void resample_box(const DecodedImage& image, const CropBox& box, int out_w, int out_h, const Normalisation& norm,
                  float* dst) {
  const int channels = image.channels;
  const Taps tx = make_taps(box.x, box.width, image.width, out_w);
  const Taps ty = make_taps(box.y, box.height, image.height, out_h);
  const int row_lo = ty.first.front();
  const int row_hi = ty.first.back() + ty.count.back();
  // Horizontal pass: rows [row_lo, row_hi) -> (rows, out_w, C).
  std::vector<float> mid(static_cast<std::size_t>(row_hi - row_lo) * out_w * channels);
  for (int y = row_lo; y < row_hi; ++y) {
    const std::uint8_t* src = image.pixels.data() + static_cast<std::size_t>(y) * image.width * channels;
    float* out = mid.data() + static_cast<std::size_t>(y - row_lo) * out_w * channels;
    for (int x = 0; x < out_w; ++x) {
      const float* w = tx.weights.data() + static_cast<std::size_t>(x) * tx.stride;
      const std::uint8_t* s = src + static_cast<std::size_t>(tx.first[x]) * channels;
      for (int c = 0; c < channels; ++c) {
        float acc = 0.0f;
        for (int k = 0; k < tx.count[x]; ++k) acc += w[k] * s[k * channels + c];
        out[x * channels + c] = acc;
      }
    }
  }
  // Vertical pass, normalisation and the flip, into (C, out_h, out_w).
  const std::size_t plane = static_cast<std::size_t>(out_h) * out_w;
  for (int y = 0; y < out_h; ++y) {
    const float* w = ty.weights.data() + static_cast<std::size_t>(y) * ty.stride;
    const float* rows = mid.data() + static_cast<std::size_t>(ty.first[y] - row_lo) * out_w * channels;
    for (int x = 0; x < out_w; ++x) {
      const int ox = box.flip ? out_w - 1 - x : x;
      for (int c = 0; c < channels; ++c) {
        float acc = 0.0f;
        for (int k = 0; k < ty.count[y]; ++k) acc += w[k] * rows[(static_cast<std::size_t>(k) * out_w + x) * channels + c];
        dst[c * plane + static_cast<std::size_t>(y) * out_w + ox] = (acc / 255.0f - norm.mean[c]) / norm.std[c];
      }
    }
  }
}

void to_planar(const DecodedImage& image, const Normalisation& norm, float* dst) {
  const int channels = image.channels;
  const std::size_t plane = static_cast<std::size_t>(image.width) * image.height;
  for (int c = 0; c < channels; ++c) {
    // A lookup table per channel, computed in double and rounded once, as ImageDataset's,
    // so a folder of lossless images gives the same floats as the array readers.
    float lut[256];
    for (int v = 0; v < 256; ++v)
      lut[v] = static_cast<float>((v / 255.0 - norm.mean[c]) / static_cast<double>(norm.std[c]));
    const std::uint8_t* src = image.pixels.data() + c;
    float* out = dst + c * plane;
    for (std::size_t p = 0; p < plane; ++p) out[p] = lut[src[p * channels]];
  }
}

}  // namespace ringtrain
