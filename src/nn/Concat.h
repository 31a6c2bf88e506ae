// Concat: tensors joined along the channel axis (axis 1), e.g. (N, C1, H, W) and
// (N, C2, H, W) into (N, C1 + C2, H, W).
#pragma once

#include "nn/MultiInputLayer.h"

namespace ringtrain {

class Concat : public MultiInputLayer {
 public:
  Concat(std::string name, std::size_t inputs) : MultiInputLayer(std::move(name), inputs) {}

  std::string kind() const override { return "concat"; }
  std::string describe() const override;
  bool needs_src_in_backward() const override { return false; }
  Dims out_shape_of(const std::vector<Dims>& in) const override;

 protected:
  std::unique_ptr<MultiState> build_inputs(const std::vector<dnnl::memory::desc>& src_mds, Phase phase,
                                           bool need_diff_src) override;
  void run_forward_inputs(MultiState& s, const std::vector<dnnl::memory>& srcs, const dnnl::memory& dst) override;
  void run_backward_inputs(MultiState& s, const dnnl::memory& diff_dst,
                           const std::vector<dnnl::memory>& diff_srcs) override;

 private:
  struct ConcatState;
};

}  // namespace ringtrain
