// LocalResponseNorm across channels (Krizhevsky et al. 2012) on oneDNN lrn:
//   dst = src * (k + alpha / size * sum_{c' in window(c)} src(c')^2)^(-beta).
// alpha is divided by size, as in PyTorch's nn.LocalResponseNorm and oneDNN (the
// AlexNet paper writes k + alpha * sum; its alpha 1e-4 is then 5e-4 here at size 5).
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class LocalResponseNorm : public Layer {
 public:
  // AlexNet's size 5, alpha 1e-4, beta 0.75, k 2 by default.
  LocalResponseNorm(std::string name, int size = 5, float alpha = 1e-4f, float beta = 0.75f, float k = 2.0f);

  std::string kind() const override { return "lrn"; }
  std::string describe() const override;
  // Across channels: dst = src / (k + alpha / size * sum of squares over size channels)^beta.
  int size() const noexcept { return size_; }
  float alpha() const noexcept { return alpha_; }
  float beta() const noexcept { return beta_; }
  float k() const noexcept { return k_; }
  Dims out_shape(const Dims& in) const override;

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct LrnState;
  int size_;
  float alpha_, beta_, k_;
};

}  // namespace ringtrain
