// MultiInputLayer: the base of graph nodes that read several tensors (Add, Concat). It
// keeps the Layer's state cache, keyed by every input's layout, and runs through the
// *_inputs calls; the single-input calls of Layer are not for it.
#pragma once

#include <vector>

#include "nn/Layer.h"

namespace ringtrain {

class MultiInputLayer : public Layer {
 public:
  MultiInputLayer(std::string name, std::size_t inputs);

  std::size_t num_inputs() const override { return inputs_; }
  // One input is not enough: the single-input shape call throws with the layer's name.
  Dims out_shape(const Dims& in) const final { return out_shape_of({in}); }
  void prepare_inputs(const std::vector<dnnl::memory::desc>& src_mds, Phase phase, bool need_diff_src) override;
  const dnnl::memory::desc& input_md(std::size_t k) const override { return multi_state().src_mds.at(k); }
  const dnnl::memory::desc& diff_input_md(std::size_t k) const override { return multi_state().diff_src_mds.at(k); }
  void forward_inputs(const std::vector<dnnl::memory>& srcs, const dnnl::memory& dst, Phase phase,
                      std::uint64_t seed = 0) override;
  void backward_inputs(const dnnl::memory& diff_dst, const std::vector<dnnl::memory>& diff_srcs) override;

 protected:
  struct MultiState : State {
    std::vector<dnnl::memory::desc> keys;  // the src_mds prepare_inputs was called with
    std::vector<dnnl::memory::desc> src_mds, diff_src_mds;
  };
  // src_mds are already in compute_type(); the state's src_md/dst_md/diff_dst_md are set by it
  // (src_md: input 0's).
  virtual std::unique_ptr<MultiState> build_inputs(const std::vector<dnnl::memory::desc>& src_mds, Phase phase,
                                                   bool need_diff_src) = 0;
  virtual void run_forward_inputs(MultiState& s, const std::vector<dnnl::memory>& srcs, const dnnl::memory& dst) = 0;
  virtual void run_backward_inputs(MultiState& s, const dnnl::memory& diff_dst,
                                   const std::vector<dnnl::memory>& diff_srcs) = 0;
  // Shapes of all inputs equal in every dimension but `except` (-1: none); throws naming the layer.
  void check_shapes(const std::vector<Dims>& in, int except) const;

  std::unique_ptr<State> build(const dnnl::memory::desc&, Phase, bool) final;
  void run_forward(State&, const dnnl::memory&, const dnnl::memory&, std::uint64_t) final;
  void run_backward(State&, const dnnl::memory&, const dnnl::memory&) final;
  MultiState& multi_state() const;

 private:
  std::size_t inputs_;
};

}  // namespace ringtrain
