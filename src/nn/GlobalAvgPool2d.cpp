// GlobalAvgPool2d on oneDNN average pooling with one H x W window: oneDNN 2.6's reduction
// primitive would do the forward but has no backward. The window is the input's extent, so
// each input size prepares its own primitives (Layer's per-layout states).
#include "nn/GlobalAvgPool2d.h"

#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

using dnnl::memory;

Dims GlobalAvgPool2d::out_shape(const Dims& in) const {
  if (in.size() != 4 || in[2] < 1 || in[3] < 1)
    throw std::invalid_argument(fmt::format("{}: expects (N, C, H, W) with H, W >= 1, got {}", name(), dims_str(in)));
  return {in[0], in[1], 1, 1};
}

struct GlobalAvgPool2d::PoolState : State {
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
};

std::unique_ptr<Layer::State> GlobalAvgPool2d::build(const memory::desc& src_md, Phase phase, bool need_diff_src) {
  const Dims in = md_dims(src_md);
  const Dims out = out_shape(in);
  auto s = std::make_unique<PoolState>();
  auto& eng = engine();
  // No padding, so exclude_padding divides by H * W like include_padding would.
  const memory::dims window{in[2], in[3]}, pad{0, 0};
  const auto alg = dnnl::algorithm::pooling_avg_exclude_padding;
  const memory::desc dst_any(memory::dims(out.begin(), out.end()), src_md.data_type(), memory::format_tag::any);
  const auto prop = phase == Phase::kTrain ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::pooling_forward::primitive_desc fwd_pd(
      dnnl::pooling_forward::desc(prop, alg, src_md, dst_any, window, window, pad, pad), eng);
  s->fwd = dnnl::pooling_forward(fwd_pd);
  s->src_md = fwd_pd.src_desc();
  s->dst_md = fwd_pd.dst_desc();
  if (phase == Phase::kTrain) {
    s->diff_dst_md = s->dst_md;
    if (need_diff_src) {
      const dnnl::pooling_backward::primitive_desc bwd_pd(
          dnnl::pooling_backward::desc(alg, s->src_md, s->dst_md, window, window, pad, pad), eng, fwd_pd);
      s->bwd = dnnl::pooling_backward(bwd_pd);
      s->diff_src_md = bwd_pd.diff_src_desc();
      s->diff_dst_md = bwd_pd.diff_dst_desc();
    }
  }
  return s;
}

void GlobalAvgPool2d::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<PoolState&>(base);
  s.fwd.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
}

void GlobalAvgPool2d::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<PoolState&>(base);
  if (!s.need_diff_src) return;
  s.bwd.execute(stream(), {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
}

}  // namespace ringtrain
