// Pool2d on oneDNN pooling (forward_training keeps the max workspace; backward uses it).
#include "nn/Pool2d.h"

#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

using dnnl::memory;

Pool2d::Pool2d(std::string name, Mode mode, int kernel, int stride, int padding)
    : Layer(std::move(name)), mode_(mode), kernel_(kernel), stride_(stride), padding_(padding) {
  if (kernel <= 0 || stride <= 0 || padding < 0 || 2 * padding > kernel)
    throw std::invalid_argument(fmt::format("{}: invalid pooling (k {}, s {}, p {}); padding may be at most k/2",
                                            this->name(), kernel, stride, padding));
}

std::string Pool2d::describe() const { return fmt::format("{}(k={},s={},p={})", kind(), kernel_, stride_, padding_); }

Dims Pool2d::out_shape(const Dims& in) const {
  if (in.size() != 4)
    throw std::invalid_argument(fmt::format("{}: expects (N, C, H, W), got {}", name(), dims_str(in)));
  if (in[2] + 2 * padding_ < kernel_ || in[3] + 2 * padding_ < kernel_)
    throw std::invalid_argument(
        fmt::format("{}: input {}x{} is smaller than the {}x{} window", name(), in[2], in[3], kernel_, kernel_));
  // floor mode, as PyTorch's default ceil_mode=False
  return {in[0], in[1], (in[2] + 2 * padding_ - kernel_) / stride_ + 1, (in[3] + 2 * padding_ - kernel_) / stride_ + 1};
}

struct Pool2d::PoolState : State {
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  memory workspace;
};

std::unique_ptr<Layer::State> Pool2d::build(const memory::desc& src_md, Phase phase, bool need_diff_src) {
  const Dims in = md_dims(src_md);
  const Dims out = out_shape(in);
  auto s = std::make_unique<PoolState>();
  auto& eng = engine();
  const memory::dims strides{stride_, stride_}, kernel{kernel_, kernel_}, pad_l{padding_, padding_};
  // Symmetric padding: oneDNN, like PyTorch, floors (H + 2p - k) / s, so trailing rows
  // that do not fill a window are ignored.
  const memory::dims pad_r = pad_l;
  const memory::desc dst_any(memory::dims(out.begin(), out.end()), src_md.data_type(), memory::format_tag::any);
  const auto alg = mode_ == Mode::kMax ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
  const auto prop = phase == Phase::kTrain ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::pooling_forward::primitive_desc fwd_pd(
      dnnl::pooling_forward::desc(prop, alg, src_md, dst_any, strides, kernel, pad_l, pad_r), eng);
  s->fwd = dnnl::pooling_forward(fwd_pd);
  s->src_md = fwd_pd.src_desc();
  s->dst_md = fwd_pd.dst_desc();
  if (phase == Phase::kTrain) {
    if (mode_ == Mode::kMax) s->workspace = memory(fwd_pd.workspace_desc(), eng);
    s->diff_dst_md = s->dst_md;
    if (need_diff_src) {
      const dnnl::pooling_backward::primitive_desc bwd_pd(
          dnnl::pooling_backward::desc(alg, s->src_md, s->dst_md, strides, kernel, pad_l, pad_r), eng, fwd_pd);
      s->bwd = dnnl::pooling_backward(bwd_pd);
      s->diff_src_md = bwd_pd.diff_src_desc();
      s->diff_dst_md = bwd_pd.diff_dst_desc();
    }
  }
  return s;
}

void Pool2d::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<PoolState&>(base);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  if (s.workspace) args[DNNL_ARG_WORKSPACE] = s.workspace;
  s.fwd.execute(stream(), args);
}

void Pool2d::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<PoolState&>(base);
  if (!s.need_diff_src) return;
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}};
  if (s.workspace) args[DNNL_ARG_WORKSPACE] = s.workspace;
  s.bwd.execute(stream(), args);
}

}  // namespace ringtrain
