// ReLU on oneDNN eltwise (relu_use_dst_for_bwd, so forward can run in place).
#include "nn/ReLU.h"

namespace ringtrain {

using dnnl::memory;

struct ReLU::ReluState : State {
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
  // Fused: dst = src (forward) and, with kBoth, diff_src = diff_dst, when the graph did not
  // alias them (it does whenever the ReLU is the only reader, which fusion requires).
  dnnl::reorder copy;
};

void ReLU::set_fused(ReluFusion fused) {
  if (fused == fused_) return;
  fused_ = fused;
  states_.clear();
  current_ = nullptr;
}

std::unique_ptr<Layer::State> ReLU::build(const memory::desc& src_md, Phase phase, bool need_diff_src) {
  auto s = std::make_unique<ReluState>();
  auto& eng = engine();
  const auto alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
  const auto prop = phase == Phase::kTrain ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::eltwise_forward::primitive_desc fwd_pd(dnnl::eltwise_forward::desc(prop, alg, src_md, 0.f, 0.f), eng);
  if (fused_ == ReluFusion::kNone) s->fwd = dnnl::eltwise_forward(fwd_pd);
  s->copy = dnnl::reorder(dnnl::reorder::primitive_desc(eng, src_md, eng, src_md));
  s->src_md = fwd_pd.src_desc();
  s->dst_md = fwd_pd.dst_desc();
  if (phase == Phase::kTrain && need_diff_src && fused_ != ReluFusion::kBoth) {
    const dnnl::eltwise_backward::primitive_desc bwd_pd(
        dnnl::eltwise_backward::desc(alg, s->dst_md, s->dst_md, 0.f, 0.f), eng, fwd_pd);
    s->bwd = dnnl::eltwise_backward(bwd_pd);
    s->diff_dst_md = bwd_pd.diff_dst_desc();
    s->diff_src_md = bwd_pd.diff_src_desc();
  } else if (phase == Phase::kTrain) {
    // Nothing to compute: a first-layer ReLU has no work, a fully fused one passes diff_dst on.
    s->diff_dst_md = s->diff_src_md = s->dst_md;
  }
  return s;
}

void ReLU::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<ReluState&>(base);
  if (fused_ == ReluFusion::kNone) {
    s.fwd.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    return;
  }
  if (src.get_data_handle() != dst.get_data_handle()) {
    s.copy.execute(stream(), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  }
}

void ReLU::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<ReluState&>(base);
  if (!s.need_diff_src) return;
  if (fused_ == ReluFusion::kBoth) {
    if (diff_src.get_data_handle() != diff_dst.get_data_handle()) {
      s.copy.execute(stream(), {{DNNL_ARG_FROM, diff_dst}, {DNNL_ARG_TO, diff_src}});
    }
    return;
  }
  // In place allowed: diff_src may alias diff_dst.
  s.bwd.execute(stream(), {{DNNL_ARG_DST, s.dst}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
}

}  // namespace ringtrain
