// ReLU: max(x, 0) on oneDNN eltwise, in any layout, in place when the Model allows it.
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class ReLU : public Layer {
 public:
  explicit ReLU(std::string name) : Layer(std::move(name)) {}

  std::string kind() const override { return "relu"; }
  std::string describe() const override { return "relu"; }
  Dims out_shape(const Dims& in) const override { return in; }
  // Backward uses dst (relu_use_dst_for_bwd: dst > 0 <=> src > 0), so src may be overwritten.
  bool in_place() const override { return true; }
  bool needs_dst_in_backward() const override { return true; }

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct ReluState;
};

}  // namespace ringtrain
