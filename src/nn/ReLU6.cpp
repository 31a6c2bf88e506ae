// ReLU6 on oneDNN eltwise clip_v2 with the backward from dst. clip_v2's gradient is 0 at
// both bounds, as PyTorch's hardtanh_backward (x <= 0 or x >= 6 -> 0); from dst, so forward
// can run in place. From dst equals from src in bf16 too: 0 and 6 are exact in bf16, and
// the clip of a bf16 src is that src or a bound.
#include "nn/ReLU6.h"

namespace ringtrain {

using dnnl::memory;

namespace {
constexpr float kLower = 0.f, kUpper = 6.f;
}  // namespace

struct ReLU6::Relu6State : State {
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
};

std::unique_ptr<Layer::State> ReLU6::build(const memory::desc& src_md, Phase phase, bool need_diff_src) {
  auto s = std::make_unique<Relu6State>();
  auto& eng = engine();
  const auto alg = dnnl::algorithm::eltwise_clip_v2_use_dst_for_bwd;
  const auto prop = phase == Phase::kTrain ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::eltwise_forward::primitive_desc fwd_pd(dnnl::eltwise_forward::desc(prop, alg, src_md, kLower, kUpper),
                                                     eng);
  s->fwd = dnnl::eltwise_forward(fwd_pd);
  s->src_md = fwd_pd.src_desc();
  s->dst_md = fwd_pd.dst_desc();
  if (phase == Phase::kTrain && need_diff_src) {
    const dnnl::eltwise_backward::primitive_desc bwd_pd(
        dnnl::eltwise_backward::desc(alg, s->dst_md, s->dst_md, kLower, kUpper), eng, fwd_pd);
    s->bwd = dnnl::eltwise_backward(bwd_pd);
    s->diff_dst_md = bwd_pd.diff_dst_desc();
    s->diff_src_md = bwd_pd.diff_src_desc();
  } else if (phase == Phase::kTrain) {
    s->diff_dst_md = s->dst_md;  // nothing to propagate from a first layer
  }
  return s;
}

void ReLU6::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<Relu6State&>(base);
  s.fwd.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
}

void ReLU6::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<Relu6State&>(base);
  if (!s.need_diff_src) return;
  // In place allowed: diff_src may alias diff_dst.
  s.bwd.execute(stream(), {{DNNL_ARG_DST, s.dst}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
}

}  // namespace ringtrain
