// Pool2d: max or average pooling (square window) on oneDNN pooling, in any layout.
// Max pooling keeps oneDNN's workspace (arg-max positions) for backward.
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class Pool2d : public Layer {
 public:
  enum class Mode { kMax, kAvg };
  // kAvg counts padded zeros in the divisor, as PyTorch's AvgPool2d(count_include_pad=True).
  Pool2d(std::string name, Mode mode, int kernel, int stride, int padding = 0);

  std::string kind() const override { return mode_ == Mode::kMax ? "maxpool2d" : "avgpool2d"; }
  std::string describe() const override;
  // Max pooling's backward reads its workspace, average pooling's only diff_dst.
  bool needs_src_in_backward() const override { return false; }
  bool is_max() const noexcept { return mode_ == Mode::kMax; }  // else average, padding included
  int kernel() const noexcept { return kernel_; }
  int stride() const noexcept { return stride_; }
  int padding() const noexcept { return padding_; }
  Dims out_shape(const Dims& in) const override;

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct PoolState;
  Mode mode_;
  int kernel_, stride_, padding_;
};

}  // namespace ringtrain
