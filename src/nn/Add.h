// Add: the element-wise sum of two or more tensors of one shape (a residual connection),
// optionally followed by ReLU in the same oneDNN binary primitive (an eltwise post-op).
#pragma once

#include "nn/MultiInputLayer.h"

namespace ringtrain {

class Add : public MultiInputLayer {
 public:
  // relu: max(sum, 0) in one primitive; only with 2 inputs (oneDNN's binary; more inputs run
  // on the sum primitive, which has no post-ops).
  Add(std::string name, std::size_t inputs = 2, bool relu = false);

  std::string kind() const override { return "add"; }
  std::string describe() const override;
  bool fused_relu() const noexcept { return relu_; }
  Dims out_shape_of(const std::vector<Dims>& in) const override;
  // With ReLU, backward masks by dst > 0 (use_dst_for_bwd): the next layer must not overwrite it.
  bool needs_dst_in_backward() const override { return relu_; }
  bool needs_src_in_backward() const override { return false; }
  bool shares_input_gradients() const override { return true; }
  bool passes_gradient_through() const override { return !relu_; }

 protected:
  std::unique_ptr<MultiState> build_inputs(const std::vector<dnnl::memory::desc>& src_mds, Phase phase,
                                           bool need_diff_src) override;
  void run_forward_inputs(MultiState& s, const std::vector<dnnl::memory>& srcs, const dnnl::memory& dst) override;
  void run_backward_inputs(MultiState& s, const dnnl::memory& diff_dst,
                           const std::vector<dnnl::memory>& diff_srcs) override;

 private:
  struct AddState;
  bool relu_;
};

}  // namespace ringtrain
