// ReLU on oneDNN eltwise (relu_use_dst_for_bwd, so forward can run in place).
#include "nn/ReLU.h"

namespace ringtrain {

using dnnl::memory;

struct ReLU::ReluState : State {
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
};

std::unique_ptr<Layer::State> ReLU::build(const memory::desc& src_md, Phase phase, bool need_diff_src) {
  auto s = std::make_unique<ReluState>();
  auto& eng = engine();
  const auto alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
  const auto prop = phase == Phase::kTrain ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::eltwise_forward::primitive_desc fwd_pd(dnnl::eltwise_forward::desc(prop, alg, src_md, 0.f, 0.f), eng);
  s->fwd = dnnl::eltwise_forward(fwd_pd);
  s->src_md = fwd_pd.src_desc();
  s->dst_md = fwd_pd.dst_desc();
  if (phase == Phase::kTrain && need_diff_src) {
    const dnnl::eltwise_backward::primitive_desc bwd_pd(
        dnnl::eltwise_backward::desc(alg, s->dst_md, s->dst_md, 0.f, 0.f), eng, fwd_pd);
    s->bwd = dnnl::eltwise_backward(bwd_pd);
    s->diff_dst_md = bwd_pd.diff_dst_desc();
    s->diff_src_md = bwd_pd.diff_src_desc();
  } else if (phase == Phase::kTrain) {
    s->diff_dst_md = s->dst_md;  // nothing to propagate: a first-layer ReLU has no work
  }
  return s;
}

void ReLU::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<ReluState&>(base);
  s.fwd.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
}

void ReLU::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<ReluState&>(base);
  if (!s.need_diff_src) return;
  // In place allowed: diff_src may alias diff_dst.
  s.bwd.execute(stream(), {{DNNL_ARG_DST, s.dst}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
}

}  // namespace ringtrain
