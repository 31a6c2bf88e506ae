// Winograd F(4x4, 3x3) convolution for training: 3x3 kernels, stride 1, padding 1, no
// dilation or groups, fp32, activations in oneDNN's nChw8c (channels a multiple of 8).
//
// oneDNN 2.6 has Winograd kernels only for AVX-512; on AVX2 its direct 3x3 convolutions run
// at 49-93 GFLOP/s, the bound on every 3x3-heavy network (design.md, "Why 3x3 convolutions
// are ringtrain's own on AVX2"). F(4x4, 3x3) computes a 4x4 output tile from a 6x6 input tile
// with 36 multiplies per channel pair instead of 144 (Lavin and Gray, 2016): transform the
// input tiles (V = B^T d B) and the weights (U = G g G^T), multiply them as 36 matrices with
// oneDNN's sgemm (M[xi] = V[xi] U[xi], tiles x in by in x out), and transform back
// (Y = A^T M A). The three passes of training are three uses of it:
//   forward          Y = conv(X, W)
//   backward-data   dX = conv(dY, W turned 180 degrees, in and out swapped)
//   backward-weights dW = G^T (sum over tiles of V^T (A dY A^T)) G, the forward's exact
//                    adjoint, so the gradient is that of the function the forward computes.
// Tiles go through in chunks whose transformed data stay in cache; layers of at most 32
// channels in and out instead multiply V and U tile group by tile group in registers
// (WinogradFused.cpp: at 16-32 channels the sgemms are too thin to pay for writing V and M
// out and back; the three passes went from 1.03-1.08x oneDNN's direct kernels to 1.36-1.37x on
// resnet20's shapes at 28x28 batch 64 and 32x32 batch 128, wino_bench on AVX2). Every result
// depends only on the shape, not on the thread count of the transforms (sgemm's own is oneDNN's).
#pragma once

#include <cstdint>
#include <vector>

namespace ringtrain::winograd {

// Batch, input and output channels, height and width (the output's too).
struct Shape {
  std::int64_t batch = 0, in = 0, out = 0, height = 0, width = 0;
};

// Whether a convolution with these hyper-parameters runs here: 3x3, stride 1, padding 1,
// dense, channels in and out multiples of 8 and at least 16 (at 16 the three passes ran 1.0-1.7x
// oneDNN's direct kernels on resnet20's shapes; wino_bench).
bool applies(int in, int out, int kernel, int stride, int pad, int dilation, int groups);
// Whether a batch of this shape gives it enough to do: at least 256 output pixels (batch x
// height x width). Below that the weights' transform, redone every step, and the tiles'
// padding outweigh the savings (wino_bench: 32 images of 2x2, or 8 of 4x4, at 256-512
// channels ran their forward at 0.6x oneDNN's).
bool worthwhile(const Shape& shape);

// The transformed weights of one layer, for every batch shape: U = G g G^T for the forward
// and for backward-data (the kernels turned 180 degrees, in and out swapped), 4x the weights
// each.
class Weights {
 public:
  Weights(std::int64_t in, std::int64_t out);
  // From weights (out, in, 3, 3), plain row-major as the arena keeps them.
  void set(const float* weights);
  std::int64_t in() const noexcept { return in_; }
  std::int64_t out() const noexcept { return out_; }
  std::int64_t plane() const noexcept { return plane_; }
  const float* forward() const noexcept { return fwd_.data(); }
  const float* backward_data() const noexcept { return bwd_.data(); }
  std::size_t bytes() const noexcept { return (fwd_.size() + bwd_.size()) * sizeof(float); }

 private:
  std::int64_t in_, out_;
  std::int64_t plane_;             // floats from one point's matrix to the next's
  std::vector<float> fwd_, bwd_;  // [36][plane_]: (in, out) and (out, in) row-major
};

class Conv3x3 {
 public:
  // Throws std::invalid_argument unless in and out are multiples of 8 and the sizes positive.
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
  // out_ch = conv of in_ch channels with transformed weights u [36][plane] ((cin, cout) row-major).
  void convolve(const float* src, std::int64_t cin, float* dst, std::int64_t cout, const float* u,
                std::int64_t plane, const float* bias, bool relu) const;
  // The same for narrow layers (WinogradFused.cpp): tile group by tile group.
  void convolve_fused(const float* src, std::int64_t cin, float* dst, std::int64_t cout, const float* u,
                      std::int64_t plane, const float* bias, bool relu) const;
  // dU = sum over tiles of V^T dM, [36][plane] ((in, out) row-major), in a scratch buffer of
  // this thread's: through 36 sgemms per chunk of tiles, or for narrow layers tile group by
  // tile group (WinogradFused.cpp).
  float* backward_weights_chunked(const float* src, const float* diff_dst, std::int64_t plane) const;
  float* backward_weights_fused(const float* src, const float* diff_dst, std::int64_t plane) const;
  Shape shape_;
  std::int64_t tiles_h_ = 0, tiles_w_ = 0, tiles_ = 0;
};

}  // namespace ringtrain::winograd
