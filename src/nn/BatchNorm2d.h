// BatchNorm2d: per-channel batch normalisation (Ioffe & Szegedy 2015) on oneDNN
// batch_normalization with separate scale (gamma) and shift (beta). Train uses batch
// statistics and updates running mean/var in the model's buffer arena; eval uses them.
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class BatchNorm2d : public Layer {
 public:
  // PyTorch's defaults: eps 1e-5, momentum 0.1.
  BatchNorm2d(std::string name, int channels, float eps = 1e-5f, float momentum = 0.1f);

  std::string kind() const override { return "batchnorm2d"; }
  std::string describe() const override;
  int channels() const noexcept { return channels_; }
  float eps() const noexcept { return eps_; }
  float momentum() const noexcept { return momentum_; }  // weight of the new batch, as PyTorch counts
  Dims out_shape(const Dims& in) const override;
  std::vector<ParamSpec> param_specs() const override;
  // running_mean (C) then running_var (C).
  std::size_t num_buffers() const override { return 2 * static_cast<std::size_t>(channels_); }
  void reset_buffers() override;
  // fuse_norm_relu: max(y, 0) in the same pass; train keeps a bit mask (workspace) for backward.
  ReluFusion relu_fusion() const override { return ReluFusion::kBoth; }
  std::size_t state_bytes() const override;

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct BnState;
  int channels_;
  float eps_, momentum_;
};

}  // namespace ringtrain
