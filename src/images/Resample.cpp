// resample_box: PIL's two-pass resampling (taps precomputed per output coordinate, a
// horizontal pass over the rows the vertical taps need, then a vertical pass that also
// normalises, flips and writes the planar floats once), in float throughout.
//
// Speed (one loader thread was the bottleneck of folder training at 224): every output
// coordinate has the same number of taps (zero weights pad the short ones and the window
// slides back inside the image at its right and bottom edges, so the sums are unchanged),
// an RGB pixel is one 4-float vector (three channels and an ignored lane), and the scratch
// buffers belong to the thread and are reused, so nothing is allocated per image. Every
// output element is the same sequence of multiplies and adds whatever thread makes it.
#include "images/Resample.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ringtrain {
namespace {

using Float4 = float __attribute__((vector_size(16)));
using Byte4 = std::uint8_t __attribute__((vector_size(4)));

Float4 load4(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store4(float* p, Float4 v) { std::memcpy(p, &v, sizeof v); }

// Four bytes (an RGB pixel and the next byte) as four floats. GCC turns the generic
// conversion into four scalar ones, so x86 gets the two unpacks and one convert spelled out.
Float4 load_bytes4(const std::uint8_t* p) {
#if defined(__SSE2__)
  int word;
  std::memcpy(&word, p, sizeof word);
  const __m128i zero = _mm_setzero_si128();
  const __m128i bytes = _mm_cvtsi32_si128(word);
  return reinterpret_cast<Float4>(_mm_cvtepi32_ps(_mm_unpacklo_epi16(_mm_unpacklo_epi8(bytes, zero), zero)));
#else
  Byte4 b;
  std::memcpy(&b, p, sizeof b);
  return __builtin_convertvector(b, Float4);
#endif
}

// Filter taps of every output coordinate along one axis: `count` taps each, from first[i].
struct Taps {
  std::vector<int> first;
  std::vector<float> weights;  // count weights per output coordinate
  int count = 0;
  std::vector<double> exact;   // make_taps' scratch
  std::vector<int> lo;
};

void make_taps(double start, double extent, int in_size, int out_size, Taps& taps) {
  const double scale = extent / out_size;  // source pixels per output pixel
  const double support = std::max(scale, 1.0);
  const int stride = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.exact.assign(static_cast<std::size_t>(out_size) * stride, 0.0);
  taps.lo.resize(out_size);
  taps.first.resize(out_size);
  int count = 1;
  for (int i = 0; i < out_size; ++i) {
    const double center = start + (i + 0.5) * scale;
    int lo = std::max(0, static_cast<int>(std::floor(center - support)));
    int hi = std::min(in_size, static_cast<int>(std::ceil(center + support)));
    hi = std::min(hi, lo + stride);
    double* w = taps.exact.data() + static_cast<std::size_t>(i) * stride;
    double sum = 0.0;
    for (int j = lo; j < hi; ++j) {
      const double t = std::abs((j + 0.5 - center) / support);
      w[j - lo] = t < 1.0 ? 1.0 - t : 0.0;
      sum += w[j - lo];
    }
    if (sum <= 0.0) {  // a box outside the image (cannot come from the crops): nearest edge pixel
      std::fill(w, w + stride, 0.0);
      lo = std::clamp(static_cast<int>(center), 0, in_size - 1);
      hi = lo + 1;
      w[0] = sum = 1.0;
    }
    for (int j = 0; j < hi - lo; ++j) w[j] /= sum;
    taps.lo[i] = lo;
    count = std::max(count, hi - lo);
  }
  // One tap count for all (at most in_size): a window that would pass the image's end
  // starts earlier, its weights shifted right behind zeros.
  taps.count = count;
  taps.weights.assign(static_cast<std::size_t>(out_size) * count, 0.0f);
  for (int i = 0; i < out_size; ++i) {
    const int first = std::min(taps.lo[i], in_size - count);
    const int shift = taps.lo[i] - first;
    const double* w = taps.exact.data() + static_cast<std::size_t>(i) * stride;
    float* dst = taps.weights.data() + static_cast<std::size_t>(i) * count;
    for (int j = 0; j + shift < count && j < stride; ++j) dst[j + shift] = static_cast<float>(w[j]);
    taps.first[i] = first;
  }
}

struct Scratch {
  Taps tx, ty;
  std::vector<float> mid;
  std::vector<std::uint8_t> last_row;
};

// Horizontal pass of one RGB row: out[3x + c] (and an ignored 4th float per pixel) for
// x < out_w. `row` must have one readable byte past its last pixel. Four pixels at a time:
// with one sum at a time every tap waited for the previous add (~4 cycles); four independent
// sums overlap, and each keeps its own order, so the floats are the same.
void horizontal_rgb(const std::uint8_t* row, const Taps& tx, int out_w, float* out) {
  const int n = tx.count;
  int x = 0;
  for (; x + 4 <= out_w; x += 4) {
    const std::uint8_t* s[4];
    for (int j = 0; j < 4; ++j) s[j] = row + static_cast<std::size_t>(tx.first[x + j]) * 3;
    const float* w = tx.weights.data() + static_cast<std::size_t>(x) * n;
    Float4 a0 = {0.0f, 0.0f, 0.0f, 0.0f}, a1 = a0, a2 = a0, a3 = a0;
    for (int k = 0; k < n; ++k) {
      a0 += w[k] * load_bytes4(s[0] + 3 * k);
      a1 += w[n + k] * load_bytes4(s[1] + 3 * k);
      a2 += w[2 * n + k] * load_bytes4(s[2] + 3 * k);
      a3 += w[3 * n + k] * load_bytes4(s[3] + 3 * k);
    }
    // In order: each store's 4th float is overwritten by the next pixel's first.
    store4(out + 3 * x, a0);
    store4(out + 3 * x + 3, a1);
    store4(out + 3 * x + 6, a2);
    store4(out + 3 * x + 9, a3);
  }
  for (; x < out_w; ++x) {
    const std::uint8_t* s = row + static_cast<std::size_t>(tx.first[x]) * 3;
    const float* w = tx.weights.data() + static_cast<std::size_t>(x) * n;
    Float4 acc = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < n; ++k) acc += w[k] * load_bytes4(s + 3 * k);
    store4(out + 3 * x, acc);
  }
}

void horizontal_gray(const std::uint8_t* row, const Taps& tx, int out_w, float* out) {
  const int n = tx.count;
  for (int x = 0; x < out_w; ++x) {
    const std::uint8_t* s = row + tx.first[x];
    const float* w = tx.weights.data() + static_cast<std::size_t>(x) * n;
    float acc = 0.0f;
    for (int k = 0; k < n; ++k) acc += w[k] * static_cast<float>(s[k]);
    out[x] = acc;
  }
}

// x / 255 - mean) / std as x * scale + bias, per channel (the 4th lane unused).
struct Affine {
  Float4 scale = {1.0f, 1.0f, 1.0f, 1.0f};
  Float4 bias = {0.0f, 0.0f, 0.0f, 0.0f};
};

Affine affine_of(const Normalisation& norm, int channels) {
  Affine a;
  for (int c = 0; c < channels; ++c) {
    const double s = norm.std[c];
    a.scale[c] = static_cast<float>(1.0 / (255.0 * s));
    a.bias[c] = static_cast<float>(-norm.mean[c] / s);
  }
  return a;
}

// Vertical pass of output row y from the mid rows (stride floats apart), normalised,
// flipped and written to the channel planes; four pixels at a time as horizontal_rgb.
void vertical_rgb(const float* rows, std::size_t stride, const float* w, int n, int out_w, bool flip, const Affine& a,
                  float* d0, std::size_t plane) {
  float* d1 = d0 + plane;
  float* d2 = d1 + plane;
  const auto put = [&](int x, Float4 acc) {
    const Float4 v = acc * a.scale + a.bias;
    const int ox = flip ? out_w - 1 - x : x;
    d0[ox] = v[0];
    d1[ox] = v[1];
    d2[ox] = v[2];
  };
  int x = 0;
  for (; x + 4 <= out_w; x += 4) {
    const float* p = rows + 3 * static_cast<std::size_t>(x);
    Float4 a0 = {0.0f, 0.0f, 0.0f, 0.0f}, a1 = a0, a2 = a0, a3 = a0;
    for (int k = 0; k < n; ++k) {
      const float* q = p + k * stride;
      a0 += w[k] * load4(q);
      a1 += w[k] * load4(q + 3);
      a2 += w[k] * load4(q + 6);
      a3 += w[k] * load4(q + 9);
    }
    put(x, a0);
    put(x + 1, a1);
    put(x + 2, a2);
    put(x + 3, a3);
  }
  for (; x < out_w; ++x) {
    const float* p = rows + 3 * static_cast<std::size_t>(x);
    Float4 acc = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < n; ++k) acc += w[k] * load4(p + k * stride);
    put(x, acc);
  }
}

void vertical_gray(const float* rows, std::size_t stride, const float* w, int n, int out_w, bool flip, const Affine& a,
                   float* d0) {
  for (int x = 0; x < out_w; ++x) {
    float acc = 0.0f;
    for (int k = 0; k < n; ++k) acc += w[k] * rows[x + k * stride];
    d0[flip ? out_w - 1 - x : x] = acc * a.scale[0] + a.bias[0];
  }
}

}  // namespace

void resample_box(const DecodedImage& image, const CropBox& box, int out_w, int out_h, const Normalisation& norm,
                  float* dst) {
  const int channels = image.channels;
  if (channels != 1 && channels != 3)
    throw std::invalid_argument("resample_box: expected 1 or 3 channels");
  thread_local Scratch scratch;
  Taps& tx = scratch.tx;
  Taps& ty = scratch.ty;
  make_taps(box.x, box.width, image.width, out_w, tx);
  make_taps(box.y, box.height, image.height, out_h, ty);
  const int row_lo = *std::min_element(ty.first.begin(), ty.first.end());
  const int row_hi = *std::max_element(ty.first.begin(), ty.first.end()) + ty.count;
  // Horizontal pass: rows [row_lo, row_hi) -> (rows, out_w, C), RGB rows one float longer
  // and rounded to whole vectors, for the 4-float loads and stores.
  const std::size_t stride = channels == 3 ? (static_cast<std::size_t>(out_w) * 3 + 4) & ~std::size_t{3} : out_w;
  scratch.mid.resize(static_cast<std::size_t>(row_hi - row_lo) * stride);
  const std::size_t row_bytes = static_cast<std::size_t>(image.width) * channels;
  for (int y = row_lo; y < row_hi; ++y) {
    const std::uint8_t* src = image.pixels.data() + static_cast<std::size_t>(y) * row_bytes;
    float* out = scratch.mid.data() + static_cast<std::size_t>(y - row_lo) * stride;
    if (channels == 1) {
      horizontal_gray(src, tx, out_w, out);
      continue;
    }
    if (y == image.height - 1) {  // the image's last byte has none after it to over-read
      scratch.last_row.assign(src, src + row_bytes);
      scratch.last_row.push_back(0);
      src = scratch.last_row.data();
    }
    horizontal_rgb(src, tx, out_w, out);
  }
  // Vertical pass, normalisation and the flip, into (C, out_h, out_w).
  const Affine affine = affine_of(norm, channels);
  const std::size_t plane = static_cast<std::size_t>(out_h) * out_w;
  for (int y = 0; y < out_h; ++y) {
    const float* w = ty.weights.data() + static_cast<std::size_t>(y) * ty.count;
    const float* rows = scratch.mid.data() + static_cast<std::size_t>(ty.first[y] - row_lo) * stride;
    float* d0 = dst + static_cast<std::size_t>(y) * out_w;
    if (channels == 3)
      vertical_rgb(rows, stride, w, ty.count, out_w, box.flip, affine, d0, plane);
    else
      vertical_gray(rows, stride, w, ty.count, out_w, box.flip, affine, d0);
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
