// BatchNorm2d on oneDNN: forward_training (batch mean / biased variance as outputs),
// forward_inference with use_global_stats, and backward (diff_src, diff_scale, diff_shift).
// In training on an fp32 tensor in a layout BatchStats reads, the batch statistics come from
// BatchStats (within fp32 rounding of the exact ones; oneDNN's AVX2 kernel's were ~1e-6 of the
// std off) and the forward takes them as inputs (forward_training with use_global_stats: it
// still writes the fused ReLU's workspace); the backward is the full one, through the
// statistics, as without them.
//
// Running statistics follow PyTorch: r <- (1 - momentum) r + momentum * s, with the
// unbiased batch variance var * M / (M - 1), M = N * H * W.
#include "nn/BatchNorm2d.h"

#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "nn/BatchStats.h"

namespace ringtrain {

using dnnl::memory;
using flags = dnnl::normalization_flags;

BatchNorm2d::BatchNorm2d(std::string name, int channels, float eps, float momentum)
    : Layer(std::move(name)), channels_(channels), eps_(eps), momentum_(momentum) {
  if (channels <= 0 || eps <= 0.f || momentum < 0.f || momentum > 1.f)
    throw std::invalid_argument(
        fmt::format("{}: invalid batchnorm (channels {}, eps {}, momentum {})", this->name(), channels, eps, momentum));
}

std::string BatchNorm2d::describe() const {
  return fmt::format("batchnorm2d(c={},eps={},momentum={})", channels_, eps_, momentum_);
}

Dims BatchNorm2d::out_shape(const Dims& in) const {
  if (in.size() != 4 || in[1] != channels_)
    throw std::invalid_argument(fmt::format("{}: expects (N, {}, H, W), got {}", name(), channels_, dims_str(in)));
  return in;
}

std::vector<ParamSpec> BatchNorm2d::param_specs() const {
  return {{"weight", {channels_}, ParamKind::kNormScale, 0}, {"bias", {channels_}, ParamKind::kNormShift, 0}};
}

void BatchNorm2d::reset_buffers() {
  if (!buffers_) return;
  std::fill(buffers_, buffers_ + channels_, 0.0f);
  std::fill(buffers_ + channels_, buffers_ + 2 * channels_, 1.0f);
}

struct BatchNorm2d::BnState : State {
  dnnl::batch_normalization_forward fwd;
  dnnl::batch_normalization_backward bwd;
  memory scale, shift, diff_scale, diff_shift;  // (C) views of the arenas
  memory mean, variance;                        // train: this batch's statistics; eval: running ones (buffer arena)
  memory scratch_diff_src;                      // backward always computes diff_src; a sink when nobody needs it
  memory workspace;                             // fused ReLU in training: where y > 0, for backward
  float unbias = 1.0f;                          // M / (M - 1)
  bool own_stats = false;                       // train: BatchStats fills mean and variance before forward
};

std::unique_ptr<Layer::State> BatchNorm2d::build(const memory::desc& src_md, Phase phase, bool need_diff_src) {
  const Dims in = md_dims(src_md);
  out_shape(in);
  auto s = std::make_unique<BnState>();
  auto& eng = engine();
  const memory::desc c_md({channels_}, memory::data_type::f32, memory::format_tag::x);
  const bool train = phase == Phase::kTrain;
  // With the ReLU fused, forward writes max(y, 0) and backward masks diff_dst by the forward's
  // y > 0 before the batch-norm backward: what a separate ReLU (masking by dst > 0) does.
  const flags relu = relu_post_op() ? flags::fuse_norm_relu : flags::none;
  s->own_stats = train && BatchStats::supports(src_md);
  const flags f = flags::use_scale | flags::use_shift | relu |
                  (train && !s->own_stats ? flags::none : flags::use_global_stats);
  const auto prop = train ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::batch_normalization_forward::primitive_desc fwd_pd(
      dnnl::batch_normalization_forward::desc(prop, src_md, eps_, f), eng);
  s->fwd = dnnl::batch_normalization_forward(fwd_pd);
  s->src_md = fwd_pd.src_desc();
  s->dst_md = fwd_pd.dst_desc();
  s->scale = memory(c_md, eng, params_[0].data());
  s->shift = memory(c_md, eng, params_[1].data());
  if (train) {
    s->mean = memory(fwd_pd.mean_desc(), eng);
    s->variance = memory(fwd_pd.variance_desc(), eng);
    const double m = static_cast<double>(in[0] * in[2] * in[3]);
    s->unbias = m > 1 ? static_cast<float>(m / (m - 1)) : 1.0f;
    const dnnl::batch_normalization_backward::primitive_desc bwd_pd(
        dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, s->dst_md, s->src_md, eps_,
                                                 flags::use_scale | flags::use_shift | relu),
        eng, fwd_pd);
    s->bwd = dnnl::batch_normalization_backward(bwd_pd);
    s->diff_dst_md = bwd_pd.diff_dst_desc();
    s->diff_src_md = bwd_pd.diff_src_desc();
    s->diff_scale = memory(c_md, eng, grads_[0].data());
    s->diff_shift = memory(c_md, eng, grads_[1].data());
    if (!need_diff_src) s->scratch_diff_src = memory(s->diff_src_md, eng);
    if (relu_post_op()) s->workspace = memory(fwd_pd.workspace_desc(), eng);
  } else {
    if (!buffers_) throw std::logic_error(fmt::format("{}: eval needs bind_buffers()", name()));
    s->mean = memory(c_md, eng, buffers_);
    s->variance = memory(c_md, eng, buffers_ + channels_);
  }
  return s;
}

void BatchNorm2d::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<BnState&>(base);
  if (s.own_stats) {
    stream().wait();  // src is complete
    BatchStats::compute(src, static_cast<float*>(s.mean.get_data_handle()),
                        static_cast<float*>(s.variance.get_data_handle()));
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},       {DNNL_ARG_DST, dst},   {DNNL_ARG_SCALE, s.scale},
                                       {DNNL_ARG_SHIFT, s.shift}, {DNNL_ARG_MEAN, s.mean}, {DNNL_ARG_VARIANCE, s.variance}};
  if (s.workspace) args[DNNL_ARG_WORKSPACE] = s.workspace;
  s.fwd.execute(stream(), args);
  if (s.phase != Phase::kTrain || !buffers_) return;
  stream().wait();
  const auto* mean = static_cast<const float*>(s.mean.get_data_handle());
  const auto* var = static_cast<const float*>(s.variance.get_data_handle());
  float* running_mean = buffers_;
  float* running_var = buffers_ + channels_;
  for (int c = 0; c < channels_; ++c) {
    running_mean[c] = (1.0f - momentum_) * running_mean[c] + momentum_ * mean[c];
    running_var[c] = (1.0f - momentum_) * running_var[c] + momentum_ * var[c] * s.unbias;
  }
}

void BatchNorm2d::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<BnState&>(base);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, s.src},
                                       {DNNL_ARG_MEAN, s.mean},
                                       {DNNL_ARG_VARIANCE, s.variance},
                                       {DNNL_ARG_SCALE, s.scale},
                                       {DNNL_ARG_SHIFT, s.shift},  // unused by the maths, but oneDNN 2.6 requires it
                                       {DNNL_ARG_DIFF_DST, diff_dst},
                                       {DNNL_ARG_DIFF_SRC, s.need_diff_src ? diff_src : s.scratch_diff_src},
                                       {DNNL_ARG_DIFF_SCALE, s.diff_scale},
                                       {DNNL_ARG_DIFF_SHIFT, s.diff_shift}};
  if (s.workspace) args[DNNL_ARG_WORKSPACE] = s.workspace;
  s.bwd.execute(stream(), args);
}

std::size_t BatchNorm2d::state_bytes() const {
  if (!current_) return 0;
  const auto& s = static_cast<const BnState&>(*current_);
  std::size_t bytes = 0;
  for (const memory* m : {&s.workspace, &s.scratch_diff_src, &s.mean, &s.variance})
    if (*m && s.phase == Phase::kTrain) bytes += m->get_desc().get_size();
  return bytes;
}

}  // namespace ringtrain
