// Dropout (Srivastava et al. 2014), inverted: in train, each element is kept with
// probability 1 - p and scaled by 1 / (1 - p); eval is the identity. The mask comes from
// the seed the Model derives from the forward's noise_seed and the layer index.
#pragma once

#include <vector>

#include "nn/Layer.h"

namespace ringtrain {

class Dropout : public Layer {
 public:
  Dropout(std::string name, float p);

  std::string kind() const override { return "dropout"; }
  std::string describe() const override;
  Dims out_shape(const Dims& in) const override { return in; }
  bool in_place() const override { return true; }
  bool needs_src_in_backward() const override { return false; }
  float p() const noexcept { return p_; }

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct DropoutState;
  float p_;
};

}  // namespace ringtrain
