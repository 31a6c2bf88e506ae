// Flatten: (N, C, H, W) -> (N, C*H*W). It asks for a plain nchw input (the Model
// reorders a blocked one), after which flattening is only a change of descriptor.
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}

  std::string kind() const override { return "flatten"; }
  std::string describe() const override { return "flatten"; }
  Dims out_shape(const Dims& in) const override;
  bool in_place() const override { return true; }
  bool needs_src_in_backward() const override { return false; }

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;
};

}  // namespace ringtrain
