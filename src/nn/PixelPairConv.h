// 3x3 convolutions (stride 1, padding 1, dense, fp32) on images of at most 2x2 pixels, as one
// sgemm per pair of an output pixel and an input pixel it reads, activations in oneDNN's nChw8c.
//
// On a 2x2 image every output pixel reads every input pixel, each through another of the 9
// taps: 16 pairs, each a (batch x in) by (in x out) product with that tap's weights; on a 1x1
// image one pair, the centre tap. Both are what is left of a network for 32x32 inputs after
// four or five poolings (vgg11's last two layers at 2x2, resnet18/50's last stage at 1x1).
// oneDNN 2.6's direct AVX2 kernels, blocked over output columns that are not there, ran vgg11's
// 512-channel layers at 2x2 (batch 32) at 16 GFLOP/s of useful work over their three passes,
// 47 ms a layer a step, plus two weight reorders; nn/Winograd would spend 36 multiplies per
// channel pair on a 4x4 tile of which 4 pixels are real, against 16 here (design.md, "Tiny
// images"). The weights are turned once per parameter change into tap-major [9][in][out], which
// serves the forward (Y_p += X_q U_t) and backward-data (dX_q += dY_p U_t^T) alike;
// backward-weights sums X_q^T dY_p tap by tap in that layout and turns the sum back into the
// plain (out, in, 3, 3) gradient. Pairs are summed in a fixed order: every result depends only
// on the shape and on oneDNN's sgemm (whose own sums depend on its thread count, as nn/Winograd's
// wide layers').
#pragma once

#include <cstdint>
#include <vector>

namespace ringtrain::pixelpair {

// Batch, input and output channels, height and width (the output's too).
struct Shape {
  std::int64_t batch = 0, in = 0, out = 0, height = 0, width = 0;
};

// Whether a convolution with these hyper-parameters on images of this size runs here: 3x3,
// stride 1, padding 1, dense, images of at most 2x2 pixels, channels in and out multiples of 8
// and at least kMinChannels.
bool applies(int in, int out, int kernel, int stride, int pad, int dilation, int groups, std::int64_t height,
             std::int64_t width);
// Below this many channels a pair's product is too thin for sgemm to beat oneDNN's kernels.
constexpr int kMinChannels = 64;

// One layer's weights turned tap-major, for every batch shape: nine (in, out) row-major
// matrices, one per tap, a little more than in x out floats apart.
class Weights {
 public:
  // Throws std::invalid_argument for sizes that are not positive.
  Weights(std::int64_t in, std::int64_t out);
  // From weights (out, in, 3, 3), plain row-major as the arena keeps them.
  void set(const float* weights);
  const float* taps() const noexcept { return taps_.data(); }
  std::size_t bytes() const noexcept { return taps_.size() * sizeof(float); }

 private:
  std::int64_t in_, out_;
  std::vector<float> taps_;
};

class Conv3x3 {
 public:
  // Throws std::invalid_argument unless in and out are multiples of 8, the sizes positive and
  // the image at most 2x2.
  explicit Conv3x3(const Shape& shape);
  const Shape& shape() const noexcept { return shape_; }

  // dst = conv(src) (+ bias, then max(0, .) if relu); src and dst nChw8c.
  void forward(const Weights& w, const float* src, float* dst, const float* bias, bool relu) const;
  // diff_src (nChw8c) from diff_dst (nChw8c).
  void backward_data(const Weights& w, const float* diff_dst, float* diff_src) const;
  // diff_weights (out, in, 3, 3) plain and diff_bias (out; null: none) from the forward's src
  // and diff_dst; both overwritten.
  void backward_weights(const float* src, const float* diff_dst, float* diff_weights, float* diff_bias) const;

 private:
  // Output pixel p reads input pixel q through tap t (ky * 3 + kx).
  struct Pair {
    std::int64_t p, q, tap;
  };
  Shape shape_;
  std::vector<Pair> pairs_;  // by output pixel, then input pixel
};

}  // namespace ringtrain::pixelpair
