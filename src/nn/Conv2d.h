// Conv2d: 2-D convolution (square kernel, stride, zero padding, dilation, groups, optional
// bias) on oneDNN's convolution primitives with layouts of oneDNN's choosing (format_tag::any),
// or, for the fp32 3x3 convolutions they take, on nn/PixelPairConv (images of at most 2x2
// pixels; AVX2 and AVX-512) or nn/Winograd (AVX2; on AVX-512 oneDNN's own Winograd kernels
// instead, for 3x3 stride-1 layers of 64+ channels).
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

namespace winograd {
class Weights;
}
namespace pixelpair {
class Weights;
}

class Conv2d : public Layer {
 public:
  // Hyper-parameters in PyTorch's terms (torch.nn.Conv2d), square on both axes, e.g. a
  // torchvision ResNet stem and a MobileNetV2 depthwise 3x3:
  //   Conv2d("conv1", {.in = 3, .out = 64, .kernel = 7, .stride = 2, .pad = 3, .bias = false})
  //   Conv2d("dw", {.in = 32, .out = 32, .kernel = 3, .pad = 1, .groups = 32, .bias = false})
  struct Options {
    int in = 0;        // input channels
    int out = 0;       // output channels
    int kernel = 1;    // KH = KW
    int stride = 1;    // both axes
    int pad = 0;       // zeros on each side, both axes
    int dilation = 1;  // 1 = dense, as PyTorch counts (oneDNN counts dilation - 1)
    int groups = 1;    // divides in and out; groups == in is depthwise (out = in x multiplier)
    bool bias = true;
  };

  // Weights (out, in / groups, kernel, kernel) in the arena, as PyTorch stores them, then the
  // bias (out) if any: out * in / groups * kernel^2 (+ out) parameters, torchvision's counts.
  // Throws std::invalid_argument for a non-positive size, negative padding, or groups that
  // do not divide in and out.
  Conv2d(std::string name, const Options& options);
  // Dense, undilated: the same layer as Options{in, out, kernel, stride, padding, 1, 1, bias}.
  Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride = 1, int padding = 0,
         bool bias = true);

  std::string kind() const override { return "conv2d"; }
  // conv2d(in=..,out=..,k=..,s=..,p=..,bias=..), with d=.. and g=.. before bias only when
  // they are not 1, so dense layers keep the signatures earlier checkpoints recorded.
  std::string describe() const override;
  const Options& options() const noexcept { return opt_; }
  int in_channels() const noexcept { return opt_.in; }
  int out_channels() const noexcept { return opt_.out; }
  int kernel() const noexcept { return opt_.kernel; }
  int stride() const noexcept { return opt_.stride; }
  int padding() const noexcept { return opt_.pad; }
  int dilation() const noexcept { return opt_.dilation; }
  int groups() const noexcept { return opt_.groups; }
  bool has_bias() const noexcept { return opt_.bias; }
  Dims out_shape(const Dims& in) const override;
  double flops_per_image(const Dims& in) const override;
  std::vector<ParamSpec> param_specs() const override;
  // An eltwise_relu post-op in forward; the ReLU layer's backward still masks by its dst.
  ReluFusion relu_fusion() const override { return ReluFusion::kForward; }
  StepReorders step_reorders() const override;
  std::size_t state_bytes() const override;
  std::uint64_t weight_conversions() const noexcept override;
  // Whether the prepared state runs on nn/Winograd rather than oneDNN's direct kernels.
  bool winograd() const;
  // Whether the prepared state runs on nn/PixelPairConv.
  bool pixel_pairs() const;
  // How many of the prepared state's passes (forward, and in training backward-data and
  // backward-weights) run on oneDNN's Winograd kernels (AVX-512, fp32).
  int onednn_winograd_passes() const;

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct ConvState;
  // The weights' dims as oneDNN takes them: (O, I, KH, KW), or (G, O/G, I/G, KH, KW) grouped.
  dnnl::memory::dims weights_dims() const;
  // nn/Winograd takes this layer at this compute type on this CPU (winograd_enabled()).
  bool winograd_applies() const;
  // nn/PixelPairConv takes this layer on images of h x w at this compute type on this CPU.
  bool pixel_pairs_apply(std::int64_t h, std::int64_t w) const;
  // Sets s up for nn/PixelPairConv or nn/Winograd if one of them takes the layer at these
  // shapes (pixel pairs first), with nChw8c activations; false: neither does.
  bool build_own(ConvState& s, const Dims& in, const Dims& out, Phase phase, bool need_diff_src);
  // An fp32 3x3 stride-1 undilated dense layer of 64+ channels both ways on an AVX-512 CPU:
  // ask oneDNN for algorithm::convolution_winograd.
  bool onednn_winograd_wanted() const;
  Options opt_;
  // The weights as nn's own kernels take them (Winograd-transformed, or tap-major), shared by
  // every state, and the parameters' version they were converted at (valid false: not since
  // the last build); own_conversions_ counts the conversions of both.
  std::shared_ptr<winograd::Weights> wino_weights_;
  std::shared_ptr<pixelpair::Weights> pair_weights_;
  std::uint64_t wino_version_ = 0, pair_version_ = 0, own_conversions_ = 0;
  bool wino_valid_ = false, pair_valid_ = false;
};

}  // namespace ringtrain
