// ReLU: max(x, 0) on oneDNN eltwise, in any layout, in place when the Model allows it.
// Fused into the layer before it (Graph decides), it leaves its forward to that layer.
#pragma once

#include "nn/Layer.h"

namespace ringtrain {

class ReLU : public Layer {
 public:
  explicit ReLU(std::string name) : Layer(std::move(name)) {}

  std::string kind() const override { return "relu"; }
  // Unchanged by fusion: signatures and checkpoints do not depend on it.
  std::string describe() const override { return "relu"; }
  Dims out_shape(const Dims& in) const override { return in; }
  // Backward uses dst (relu_use_dst_for_bwd: dst > 0 <=> src > 0), so src may be overwritten.
  bool in_place() const override { return true; }
  bool needs_dst_in_backward() const override { return fused_ != ReluFusion::kBoth; }
  bool needs_src_in_backward() const override { return false; }

  // Which passes the producer runs for it (kForward: the producer's forward applies it and
  // this layer's backward masks by dst; kBoth: backward passes diff_dst on as well). Drops the
  // prepared states. Fused forward: dst is src (the graph runs it in place), or a copy of it.
  void set_fused(ReluFusion fused);
  ReluFusion fused() const noexcept { return fused_; }

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) override;
  void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) override;
  void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) override;

 private:
  struct ReluState;
  ReluFusion fused_ = ReluFusion::kNone;
};

}  // namespace ringtrain
