// nn/PixelPairConv: 3x3 convolutions on images of at most 2x2 pixels, one sgemm per pair of an
// output and an input pixel. Activations are gathered from nChw8c into pixel-major rows
// ([pixel][batch][channel], each pixel's rows one sgemm operand) and scattered back; the
// weights are turned into tap-major [9][in][out] once per parameter change and the weights'
// gradient back from it once per backward, the two conversions oneDNN's kernels also make.
#include "nn/PixelPairConv.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "nn/Sgemm.h"

namespace ringtrain::pixelpair {

namespace {

using ringtrain::detail::sgemm;

constexpr std::int64_t kLanes = 8;  // channels in an nChw8c block
constexpr int kTaps = 9;
// The tap-major planes [9][plane] are this many floats longer than in x out: at a power-of-two
// stride the nine rows a conversion writes or reads at once shared a cache set (the weights'
// turn into taps at 512 channels took 5.0 ms unpadded, 2.4 ms padded, as oneDNN's jit reorder
// oihw -> hwio; one thread, Zen 3).
constexpr std::int64_t kPad = 16;
// The gradient's turn back goes 8 input channels by 64 output channels: the block's rows of
// both layouts stay in L1 (3.1 ms at 512 channels, against 5.1-5.5 for square blocks of 8-16).
constexpr std::int64_t kBackIn = 8, kBackOut = 64;

// This thread's scratch buffer number slot (0 or 1) of at least `floats` floats, shared by
// every layer that runs on the thread (layers run one at a time, and a pass's results leave
// scratch before it returns).
float* scratch(std::size_t floats, int slot) {
  thread_local std::vector<float> bufs[2];
  std::vector<float>& buf = bufs[slot];
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

// rows[(q * batch + n) * channels + c] = act (nChw8c, `pixels` pixels per image).
void gather(const float* __restrict act, std::int64_t batch, std::int64_t channels, std::int64_t pixels,
            float* __restrict rows) {
  const std::int64_t blocks = channels / kLanes;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t cb = 0; cb < blocks; ++cb)
      for (std::int64_t q = 0; q < pixels; ++q)
        std::copy_n(act + ((n * blocks + cb) * pixels + q) * kLanes, kLanes,
                    rows + (q * batch + n) * channels + cb * kLanes);
}

// act (nChw8c) = rows (+ bias, then max(0, .) if relu), the inverse of gather.
void scatter(const float* __restrict rows, std::int64_t batch, std::int64_t channels, std::int64_t pixels,
             const float* __restrict bias, bool relu, float* __restrict act) {
  const std::int64_t blocks = channels / kLanes;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t cb = 0; cb < blocks; ++cb)
      for (std::int64_t q = 0; q < pixels; ++q) {
        const float* from = rows + (q * batch + n) * channels + cb * kLanes;
        float* to = act + ((n * blocks + cb) * pixels + q) * kLanes;
        for (std::int64_t l = 0; l < kLanes; ++l) {
          float v = from[l];
          if (bias) v += bias[cb * kLanes + l];
          to[l] = relu && v < 0.f ? 0.f : v;
        }
      }
}

std::int64_t plane(std::int64_t in, std::int64_t out) { return in * out + kPad; }

}  // namespace

bool applies(int in, int out, int kernel, int stride, int pad, int dilation, int groups, std::int64_t height,
             std::int64_t width) {
  return kernel == 3 && stride == 1 && pad == 1 && dilation == 1 && groups == 1 && in % kLanes == 0 &&
         out % kLanes == 0 && in >= kMinChannels && out >= kMinChannels && height >= 1 && height <= 2 &&
         width >= 1 && width <= 2;
}

Weights::Weights(std::int64_t in, std::int64_t out) : in_(in), out_(out) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument(fmt::format("pixelpair: {} -> {} channels", in, out));
  taps_.resize(static_cast<std::size_t>(kTaps * plane(in, out)));
}

void Weights::set(const float* weights) {
  const std::int64_t in = in_, out = out_, pl = plane(in, out);
  float* taps = taps_.data();
  // Input channel by input channel: nine rows of `out`, written in order.
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < in; ++c)
    for (std::int64_t k = 0; k < out; ++k) {
      const float* g = weights + (k * in + c) * kTaps;
      for (int t = 0; t < kTaps; ++t) taps[t * pl + c * out + k] = g[t];
    }
}

Conv3x3::Conv3x3(const Shape& s) : shape_(s) {
  if (s.batch <= 0 || s.in <= 0 || s.out <= 0 || s.in % kLanes != 0 || s.out % kLanes != 0 || s.height < 1 ||
      s.height > 2 || s.width < 1 || s.width > 2)
    throw std::invalid_argument(fmt::format("pixelpair: {}x{}x{}x{} -> {} channels: needs channels in multiples of 8 "
                                            "and an image of at most 2x2",
                                            s.batch, s.in, s.height, s.width, s.out));
  for (std::int64_t py = 0; py < s.height; ++py)
    for (std::int64_t px = 0; px < s.width; ++px)
      for (std::int64_t qy = 0; qy < s.height; ++qy)
        for (std::int64_t qx = 0; qx < s.width; ++qx)  // |q - p| <= 1 on each axis: always, at 2x2
          pairs_.push_back({py * s.width + px, qy * s.width + qx, (qy - py + 1) * 3 + (qx - px + 1)});
}

void Conv3x3::forward(const Weights& w, const float* src, float* dst, const float* bias, bool relu) const {
  const std::int64_t n = shape_.batch, cin = shape_.in, cout = shape_.out, pixels = shape_.height * shape_.width;
  float* x = scratch(static_cast<std::size_t>(pixels * n * cin), 0);
  float* y = scratch(static_cast<std::size_t>(pixels * n * cout), 1);
  gather(src, n, cin, pixels, x);
  std::int64_t last_p = -1;  // Y_p's first pair overwrites it, the others add
  for (const Pair& pr : pairs_) {
    sgemm('N', 'N', n, cout, cin, x + pr.q * n * cin, cin, w.taps() + pr.tap * plane(cin, cout), cout,
          pr.p == last_p ? 1.f : 0.f, y + pr.p * n * cout, cout);
    last_p = pr.p;
  }
  scatter(y, n, cout, pixels, bias, relu, dst);
}

void Conv3x3::backward_data(const Weights& w, const float* diff_dst, float* diff_src) const {
  const std::int64_t n = shape_.batch, cin = shape_.in, cout = shape_.out, pixels = shape_.height * shape_.width;
  float* dy = scratch(static_cast<std::size_t>(pixels * n * cout), 0);
  float* dx = scratch(static_cast<std::size_t>(pixels * n * cin), 1);
  gather(diff_dst, n, cout, pixels, dy);
  // dX_q = sum over p of dY_p U_t^T, input pixel by input pixel, output pixels in order.
  for (std::int64_t q = 0; q < pixels; ++q) {
    bool first = true;
    for (const Pair& pr : pairs_) {
      if (pr.q != q) continue;
      sgemm('N', 'T', n, cin, cout, dy + pr.p * n * cout, cout, w.taps() + pr.tap * plane(cin, cout), cout,
            first ? 0.f : 1.f, dx + q * n * cin, cin);
      first = false;
    }
  }
  scatter(dx, n, cin, pixels, nullptr, false, diff_src);
}

void Conv3x3::backward_weights(const float* src, const float* diff_dst, float* diff_weights,
                               float* diff_bias) const {
  const std::int64_t n = shape_.batch, cin = shape_.in, cout = shape_.out, pixels = shape_.height * shape_.width;
  float* x = scratch(static_cast<std::size_t>(pixels * n * (cin + cout)), 0);
  float* dy = x + pixels * n * cin;
  const std::int64_t pl = plane(cin, cout);
  float* du = scratch(static_cast<std::size_t>(kTaps * pl), 1);  // [9][plane]: (in, out) row-major
  gather(src, n, cin, pixels, x);
  gather(diff_dst, n, cout, pixels, dy);
  // dU_t = sum over the pairs through tap t of X_q^T dY_p, in pair order.
  bool used[kTaps] = {};
  for (int t = 0; t < kTaps; ++t)
    for (const Pair& pr : pairs_) {
      if (pr.tap != t) continue;
      sgemm('T', 'N', cin, cout, n, x + pr.q * n * cin, cin, dy + pr.p * n * cout, cout, used[t] ? 1.f : 0.f,
            du + t * pl, cout);
      used[t] = true;
    }
  // Back to (out, in, 3, 3); a tap no pair goes through (the border taps of a 1-pixel side)
  // has a zero gradient.
#pragma omp parallel for schedule(static)
  for (std::int64_t c0 = 0; c0 < cin; c0 += kBackIn)
    for (std::int64_t k0 = 0; k0 < cout; k0 += kBackOut)
      for (std::int64_t k = k0; k < std::min(k0 + kBackOut, cout); ++k)
        for (std::int64_t c = c0; c < std::min(c0 + kBackIn, cin); ++c)
          for (int t = 0; t < kTaps; ++t)
            diff_weights[(k * cin + c) * kTaps + t] = used[t] ? du[t * pl + c * cout + k] : 0.f;
  if (!diff_bias) return;
  // In double, pixel by pixel and image by image: the same sum at any thread count.
  std::vector<double> sum(static_cast<std::size_t>(cout), 0.0);
  for (std::int64_t r = 0; r < pixels * n; ++r)
    for (std::int64_t k = 0; k < cout; ++k) sum[k] += dy[r * cout + k];
  for (std::int64_t k = 0; k < cout; ++k) diff_bias[k] = static_cast<float>(sum[k]);
}

}  // namespace ringtrain::pixelpair
