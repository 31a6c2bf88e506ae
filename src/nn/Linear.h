// Linear: fully connected layer y = x W^T + b on oneDNN's inner-product primitives.
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class Linear : public Layer {
 public:
  // Input (N, in_features) plain; output (N, out_features) plain.
  Linear(std::string name, int in_features, int out_features, bool bias = true);

  std::string kind() const override { return "linear"; }
  std::string describe() const override;
  int in_features() const noexcept { return in_features_; }
  int out_features() const noexcept { return out_features_; }
  bool has_bias() const noexcept { return bias_; }
  Dims out_shape(const Dims& in) const override;
  double flops_per_image(const Dims& in) const override;
  std::vector<ParamSpec> param_specs() const override;
  StepReorders step_reorders() const override;

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct LinearState;
  int in_features_, out_features_;
  bool bias_;
};

}  // namespace ringtrain
