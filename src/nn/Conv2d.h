// Conv2d: 2-D convolution (square kernel, stride, zero padding, optional bias) on
// oneDNN's convolution primitives with layouts of oneDNN's choosing (format_tag::any).
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class Conv2d : public Layer {
 public:
  Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride = 1, int padding = 0,
         bool bias = true);

  std::string kind() const override { return "conv2d"; }
  std::string describe() const override;
  int in_channels() const noexcept { return in_channels_; }
  int out_channels() const noexcept { return out_channels_; }
  int kernel() const noexcept { return kernel_; }
  int stride() const noexcept { return stride_; }
  int padding() const noexcept { return padding_; }
  bool has_bias() const noexcept { return bias_; }
  Dims out_shape(const Dims& in) const override;
  double flops_per_image(const Dims& in) const override;
  std::vector<ParamSpec> param_specs() const override;

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct ConvState;
  int in_channels_, out_channels_, kernel_, stride_, padding_;
  bool bias_;
};

}  // namespace ringtrain
