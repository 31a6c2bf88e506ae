// ReLU6: min(max(x, 0), 6) (torch.nn.ReLU6, MobileNetV2's activation; ONNX Clip(0, 6)) on
// oneDNN eltwise, in any layout, in place when the Model allows it. Its own kind, not a
// ReLU mode, so code that dispatches on ReLU (the ONNX writer's Relu) never takes it for one.
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class ReLU6 : public Layer {
 public:
  explicit ReLU6(std::string name) : Layer(std::move(name)) {}

  std::string kind() const override { return "relu6"; }
  std::string describe() const override { return "relu6"; }
  Dims out_shape(const Dims& in) const override { return in; }
  // Backward uses dst (clip_v2_use_dst_for_bwd: 0 < dst < 6 <=> 0 < src < 6), so src may be
  // overwritten.
  bool in_place() const override { return true; }
  bool needs_dst_in_backward() const override { return true; }
  bool needs_src_in_backward() const override { return false; }

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct Relu6State;
};

}  // namespace ringtrain
