// LocalResponseNorm on oneDNN lrn_across_channels (forward_training keeps a workspace for
// backward).
#include "nn/LocalResponseNorm.h"

#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

using dnnl::memory;

LocalResponseNorm::LocalResponseNorm(std::string name, int size, float alpha, float beta, float k)
    : Layer(std::move(name)), size_(size), alpha_(alpha), beta_(beta), k_(k) {
  if (size <= 0 || size % 2 == 0 || k <= 0.f)
    throw std::invalid_argument(
        fmt::format("{}: lrn needs an odd size and k > 0 (size {}, k {})", this->name(), size, k));
}

std::string LocalResponseNorm::describe() const {
  return fmt::format("lrn(size={},alpha={},beta={},k={})", size_, alpha_, beta_, k_);
}

Dims LocalResponseNorm::out_shape(const Dims& in) const {
  if (in.size() != 4)
    throw std::invalid_argument(fmt::format("{}: expects (N, C, H, W), got {}", name(), dims_str(in)));
  return in;
}

struct LocalResponseNorm::LrnState : State {
  dnnl::lrn_forward fwd;
  dnnl::lrn_backward bwd;
  memory workspace;
};

std::unique_ptr<Layer::State> LocalResponseNorm::build(const memory::desc& src_md, Phase phase, bool need_diff_src) {
  out_shape(md_dims(src_md));
  auto s = std::make_unique<LrnState>();
  auto& eng = engine();
  const auto alg = dnnl::algorithm::lrn_across_channels;
  const auto prop = phase == Phase::kTrain ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::lrn_forward::primitive_desc fwd_pd(dnnl::lrn_forward::desc(prop, alg, src_md, size_, alpha_, beta_, k_),
                                                 eng);
  s->fwd = dnnl::lrn_forward(fwd_pd);
  s->src_md = fwd_pd.src_desc();
  s->dst_md = fwd_pd.dst_desc();
  if (phase == Phase::kTrain) {
    if (fwd_pd.workspace_desc().get_size() > 0) s->workspace = memory(fwd_pd.workspace_desc(), eng);
    s->diff_dst_md = s->dst_md;
    if (need_diff_src) {
      const dnnl::lrn_backward::primitive_desc bwd_pd(
          dnnl::lrn_backward::desc(alg, s->src_md, s->dst_md, size_, alpha_, beta_, k_), eng, fwd_pd);
      s->bwd = dnnl::lrn_backward(bwd_pd);
      s->diff_dst_md = bwd_pd.diff_dst_desc();
      s->diff_src_md = bwd_pd.diff_src_desc();
    }
  }
  return s;
}

void LocalResponseNorm::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<LrnState&>(base);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  if (s.workspace) args[DNNL_ARG_WORKSPACE] = s.workspace;
  s.fwd.execute(stream(), args);
}

void LocalResponseNorm::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<LrnState&>(base);
  if (!s.need_diff_src) return;
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, s.src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}};
  if (s.workspace) args[DNNL_ARG_WORKSPACE] = s.workspace;
  s.bwd.execute(stream(), args);
}

}  // namespace ringtrain
