// Conv2d on oneDNN: forward_training/inference, backward_data, backward_weights.
//
// The arena keeps the user-visible weights plain (O, I, KH, KW); oneDNN may pick blocked
// weights (e.g. OIhw16i16o on AVX-512), so a WeightCopy reorders arena -> blocked once per
// parameter change, and each backward reorders the blocked diff_weights back into the plain
// gradient arena. In bf16 the copy also converts the fp32 master weights to bf16 (narrowed
// directly when oneDNN wants them plain; backward-data's layout is reordered from the
// forward's bf16 copy), activations are bf16, and backward-weights writes
// fp32 diff_weights and diff_bias.
#include "nn/Conv2d.h"

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace ringtrain {

using dnnl::memory;
using tag = memory::format_tag;

Conv2d::Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride, int padding, bool bias)
    : Layer(std::move(name)),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_(kernel),
      stride_(stride),
      padding_(padding),
      bias_(bias) {
  if (in_channels <= 0 || out_channels <= 0 || kernel <= 0 || stride <= 0 || padding < 0)
    throw std::invalid_argument(fmt::format("{}: invalid conv2d hyper-parameters (in {}, out {}, k {}, s {}, p {})",
                                            this->name(), in_channels, out_channels, kernel, stride, padding));
}

std::string Conv2d::describe() const {
  return fmt::format("conv2d(in={},out={},k={},s={},p={},bias={})", in_channels_, out_channels_, kernel_, stride_,
                     padding_, bias_ ? 1 : 0);
}

Dims Conv2d::out_shape(const Dims& in) const {
  if (in.size() != 4 || in[1] != in_channels_)
    throw std::invalid_argument(
        fmt::format("{}: expects (N, {}, H, W) input, got {}", name(), in_channels_, dims_str(in)));
  const std::int64_t oh = (in[2] + 2 * padding_ - kernel_) / stride_ + 1;
  const std::int64_t ow = (in[3] + 2 * padding_ - kernel_) / stride_ + 1;
  if (in[2] + 2 * padding_ < kernel_ || in[3] + 2 * padding_ < kernel_ || oh <= 0 || ow <= 0)
    throw std::invalid_argument(fmt::format("{}: input {}x{} is smaller than the {}x{} kernel (padding {})", name(),
                                            in[2], in[3], kernel_, kernel_, padding_));
  return {in[0], out_channels_, oh, ow};
}

double Conv2d::flops_per_image(const Dims& in) const {
  const Dims out = out_shape(in);
  return 2.0 * static_cast<double>(out[1] * out[2] * out[3]) * in_channels_ * kernel_ * kernel_;
}

std::vector<ParamSpec> Conv2d::param_specs() const {
  const std::int64_t fan_in = static_cast<std::int64_t>(in_channels_) * kernel_ * kernel_;
  std::vector<ParamSpec> specs{{"weight", {out_channels_, in_channels_, kernel_, kernel_}, ParamKind::kWeight, fan_in}};
  if (bias_) specs.push_back({"bias", {out_channels_}, ParamKind::kBias, fan_in});
  return specs;
}

struct Conv2d::ConvState : State {
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  // arena (plain f32) -> the forward's and backward-data's weights (one copy if they agree)
  std::shared_ptr<WeightCopy> weights, bwd_data_weights;
  ReorderedMemory diff_weights;      // backward-weights layout -> grad arena (plain)
  memory bias, diff_bias;            // plain (O), straight in the arenas
  // Layouts backward-data / backward-weights want for diff_dst and src, with reorders from
  // the layer's declared diff_dst_md / src_md when they differ (empty memory: no reorder).
  memory::desc bwd_data_diff_dst_md, bwd_weights_diff_dst_md, bwd_weights_src_md;
  memory bwd_data_diff_dst, bwd_weights_diff_dst, bwd_weights_src;
  dnnl::reorder to_bwd_data_diff_dst, to_bwd_weights_diff_dst, to_bwd_weights_src;
};

namespace {

// Backward-weights, first with the forward's src / diff_dst layouts (no activation
// reorders) as long as oneDNN has a jit kernel for them; else nhwc, whose jit kernel beat
// oneDNN's own pick where the forward layouts fail (LeNet's conv2, 6 input channels: 0.20
// vs 0.47 ms per step for avx2 8-blocked, batch 64, one thread); else layouts of oneDNN's
// choosing.
dnnl::convolution_backward_weights::primitive_desc backward_weights_pd(
    const memory::desc& src_md, const memory::desc& dst_md, const memory::desc& dw_any, const memory::desc& b_md,
    const memory::dims& strides, const memory::dims& pad, const dnnl::convolution_forward::primitive_desc& fwd_pd) {
  const auto& eng = fwd_pd.get_engine();
  const auto type = src_md.data_type();
  const memory::desc src_nhwc(src_md.dims(), type, tag::nhwc), dst_nhwc(dst_md.dims(), type, tag::nhwc);
  const std::pair<memory::desc, memory::desc> candidates[] = {{src_md, dst_md}, {src_nhwc, dst_nhwc}};
  for (const auto& [src, diff_dst] : candidates) {
    const dnnl::convolution_backward_weights::desc fixed(dnnl::algorithm::convolution_direct, src, dw_any, b_md,
                                                         diff_dst, strides, pad, pad);
    dnnl::convolution_backward_weights::primitive_desc pd(fixed, eng, fwd_pd, /*allow_empty=*/true);
    if (pd && std::string(pd.impl_info_str()).rfind("jit", 0) == 0) return pd;
  }
  const memory::desc src_any(src_md.dims(), type, tag::any), dst_any(dst_md.dims(), type, tag::any);
  const dnnl::convolution_backward_weights::desc any(dnnl::algorithm::convolution_direct, src_any, dw_any, b_md,
                                                     dst_any, strides, pad, pad);
  return {any, eng, fwd_pd};
}

}  // namespace

std::unique_ptr<Layer::State> Conv2d::build(const memory::desc& in_md, Phase phase, bool need_diff_src) {
  const Dims in = md_dims(in_md);
  const Dims out = out_shape(in);
  auto s = std::make_unique<ConvState>();
  auto& eng = engine();
  const memory::dims strides{stride_, stride_}, pad{padding_, padding_};
  const memory::dims src_dims(in.begin(), in.end()), dst_dims(out.begin(), out.end());
  const memory::dims w_dims{out_channels_, in_channels_, kernel_, kernel_}, b_dims{out_channels_};
  const auto f32 = memory::data_type::f32, type = compute_type();
  const memory::desc src_any(src_dims, type, tag::any), dst_any(dst_dims, type, tag::any),
      w_any(w_dims, type, tag::any), dw_any(w_dims, f32, tag::any), b_md(b_dims, f32, tag::x), no_md;

  // forward_training in eval too: for forward_inference oneDNN 2.6 picks brgconv with nhwc
  // layouts here, which measured slower than the jit nChw16c kernels (nn_bench eval, one
  // thread: lenet5 batch 64 ~1.3-2x, vgg11 batch 32 ~1.2x, noisy shared machine). The
  // results are the same; a conv's training forward keeps no workspace.
  const dnnl::convolution_forward::desc fwd_desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                 src_any, w_any, bias_ ? b_md : no_md, dst_any, strides, pad, pad);
  const dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, eng);
  s->fwd = dnnl::convolution_forward(fwd_pd);
  s->src_md = fwd_pd.src_desc();
  s->dst_md = fwd_pd.dst_desc();

  s->weights = weight_copy(0, fwd_pd.weights_desc());
  if (bias_) s->bias = memory(b_md, eng, params_[1].data());

  if (phase == Phase::kTrain) {
    // Backward pds take the forward pd as hint so they agree on layouts where they can.
    // The layer's diff_dst is declared in the forward dst layout: the layers after a conv
    // (ReLU, pooling, BN) produce their diff_src in the layout of their forward src.
    s->diff_dst_md = s->dst_md;
    const auto bww_pd = backward_weights_pd(s->src_md, s->dst_md, dw_any, bias_ ? b_md : no_md, strides, pad, fwd_pd);
    s->bwd_weights = dnnl::convolution_backward_weights(bww_pd);
    s->bwd_weights_src_md = bww_pd.src_desc();
    if (s->bwd_weights_src_md != s->src_md) {
      s->bwd_weights_src = memory(s->bwd_weights_src_md, eng);
      s->to_bwd_weights_src = dnnl::reorder(memory(s->src_md, eng, DNNL_MEMORY_NONE), s->bwd_weights_src);
    }
    s->bwd_weights_diff_dst_md = bww_pd.diff_dst_desc();
    if (s->bwd_weights_diff_dst_md != s->diff_dst_md) {
      s->bwd_weights_diff_dst = memory(s->bwd_weights_diff_dst_md, eng);
      s->to_bwd_weights_diff_dst =
          dnnl::reorder(memory(s->diff_dst_md, eng, DNNL_MEMORY_NONE), s->bwd_weights_diff_dst);
    }
    const memory user_dw(plain_md(grads_[0].dims()), eng, grads_[0].data());
    s->diff_weights = ReorderedMemory(user_dw, bww_pd.diff_weights_desc());
    if (bias_) s->diff_bias = memory(b_md, eng, grads_[1].data());

    if (need_diff_src) {
      const dnnl::convolution_backward_data::desc bwd_desc(dnnl::algorithm::convolution_direct, src_any, w_any, dst_any,
                                                           strides, pad, pad);
      const dnnl::convolution_backward_data::primitive_desc bwd_pd(bwd_desc, eng, fwd_pd);
      s->bwd_data = dnnl::convolution_backward_data(bwd_pd);
      s->diff_src_md = bwd_pd.diff_src_desc();
      s->bwd_data_diff_dst_md = bwd_pd.diff_dst_desc();
      if (s->bwd_data_diff_dst_md != s->diff_dst_md) {
        s->bwd_data_diff_dst = memory(s->bwd_data_diff_dst_md, eng);
        s->to_bwd_data_diff_dst = dnnl::reorder(memory(s->diff_dst_md, eng, DNNL_MEMORY_NONE), s->bwd_data_diff_dst);
      }
      s->bwd_data_weights = weight_copy(0, bwd_pd.weights_desc(), s->weights);
    }
  }
  return s;
}

void Conv2d::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<ConvState&>(base);
  refresh(*s.weights);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s.weights->get()}, {DNNL_ARG_DST, dst}};
  if (bias_) args[DNNL_ARG_BIAS] = s.bias;
  s.fwd.execute(stream(), args);
}

void Conv2d::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<ConvState&>(base);
  auto& strm = stream();
  if (s.need_diff_src) {
    // The forward's copy when the layouts agree (converted already, the parameters have not
    // changed since), else the backward-data layout's own (in bf16 reordered from the
    // forward's bf16 copy, not from the fp32 arena).
    refresh(*s.bwd_data_weights);
    memory dd = diff_dst;
    if (s.bwd_data_diff_dst) {
      s.to_bwd_data_diff_dst.execute(strm, {{DNNL_ARG_FROM, diff_dst}, {DNNL_ARG_TO, s.bwd_data_diff_dst}});
      dd = s.bwd_data_diff_dst;
    }
    s.bwd_data.execute(
        strm, {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, s.bwd_data_weights->get()}, {DNNL_ARG_DIFF_SRC, diff_src}});
  }
  memory src = s.src, dd = diff_dst;
  if (s.bwd_weights_src) {
    s.to_bwd_weights_src.execute(strm, {{DNNL_ARG_FROM, s.src}, {DNNL_ARG_TO, s.bwd_weights_src}});
    src = s.bwd_weights_src;
  }
  if (s.bwd_weights_diff_dst) {
    s.to_bwd_weights_diff_dst.execute(strm, {{DNNL_ARG_FROM, diff_dst}, {DNNL_ARG_TO, s.bwd_weights_diff_dst}});
    dd = s.bwd_weights_diff_dst;
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_WEIGHTS, s.diff_weights.get()}};
  if (bias_) args[DNNL_ARG_DIFF_BIAS] = s.diff_bias;
  s.bwd_weights.execute(strm, args);
  s.diff_weights.push();
}

}  // namespace ringtrain
