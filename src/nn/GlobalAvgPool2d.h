// GlobalAvgPool2d: the mean over each channel's whole H x W (torch.nn.AdaptiveAvgPool2d(1),
// ONNX GlobalAveragePool), (N, C, H, W) -> (N, C, 1, 1), for any H, W >= 1. A Flatten after
// it gives the (N, C) a classifier takes.
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class GlobalAvgPool2d : public Layer {
 public:
  explicit GlobalAvgPool2d(std::string name) : Layer(std::move(name)) {}

  std::string kind() const override { return "globalavgpool2d"; }
  std::string describe() const override { return "globalavgpool2d"; }
  bool needs_src_in_backward() const override { return false; }
  Dims out_shape(const Dims& in) const override;

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct PoolState;
};

}  // namespace ringtrain
