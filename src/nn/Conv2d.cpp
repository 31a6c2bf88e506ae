// Conv2d on oneDNN: forward_training/inference, backward_data, backward_weights.
//
// The arena keeps the user-visible weights plain (O, I/G, KH, KW); oneDNN may pick blocked
// weights (e.g. OIhw16i16o on AVX-512), so a WeightCopy reorders arena -> blocked once per
// parameter change, and each backward reorders the blocked diff_weights back into the plain
// gradient arena. Backward-data's weights (another blocked layout: oneDNN 2.6 has only
// reference kernels for backward-data with the forward's weights layout, or forward with
// backward-data's, or backward-weights into plain diff_weights) are reordered from the
// forward's copy, right after it, while it is in cache. In bf16 the copy also converts the
// fp32 master weights to bf16 (narrowed directly when oneDNN wants them plain), activations
// are bf16, and backward-weights writes fp32 diff_weights and diff_bias.
//
// On an AVX2 CPU the fp32 3x3 convolutions nn/Winograd takes (stride 1, padding 1, 16 channels
// or more, 256+ output pixels in the batch) run on it instead, with nChw8c activations (oneDNN's own choice there, so no
// neighbour reorders) and weights transformed once per parameter change. On AVX-512 fp32 3x3
// stride-1 layers of 64+ channels ask oneDNN for its Winograd (jit_wino_4x3, nChw16c), never
// picked unasked, direct kernels for passes it declines: 1.35-2.2x on resnet18/50's 3x3 layers,
// 0.8-0.9x at 16-32 channels (hence the 64); no bf16 (docs/design.md).
// Before both, an fp32 3x3 stride-1 layer of 64+ channels on images of at most 2x2 pixels runs
// on nn/PixelPairConv on AVX2 and AVX-512 (one sgemm per output and input pixel pair; vgg11's
// last two layers at 32x32 inputs, resnet18/50's last stage), also with nChw8c activations.
// RINGTRAIN_CONV_WINOGRAD=0 in the environment keeps the layers nn/Winograd would take on oneDNN's
// direct kernels, RINGTRAIN_CONV_PAIRS=0 those nn/PixelPairConv would take (A/B runs).
#include "nn/Conv2d.h"

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "nn/ConvPrimitives.h"
#include "nn/DnnlContext.h"
#include "nn/PixelPairConv.h"
#include "nn/Precision.h"
#include "nn/Winograd.h"

namespace ringtrain {

using dnnl::memory;
using tag = memory::format_tag;

Conv2d::Conv2d(std::string name, const Options& options) : Layer(std::move(name)), opt_(options) {
  const Options& o = opt_;
  if (o.in <= 0 || o.out <= 0 || o.kernel <= 0 || o.stride <= 0 || o.pad < 0 || o.dilation <= 0 || o.groups <= 0 ||
      o.in % o.groups != 0 || o.out % o.groups != 0)
    throw std::invalid_argument(fmt::format(
        "{}: invalid conv2d hyper-parameters (in {}, out {}, k {}, s {}, p {}, d {}, groups {}); groups must divide "
        "in and out",
        this->name(), o.in, o.out, o.kernel, o.stride, o.pad, o.dilation, o.groups));
}

Conv2d::Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride, int padding, bool bias)
    : Conv2d(std::move(name), Options{in_channels, out_channels, kernel, stride, padding, 1, 1, bias}) {}

std::string Conv2d::describe() const {
  std::string extra;
  if (opt_.dilation != 1) extra += fmt::format("d={},", opt_.dilation);
  if (opt_.groups != 1) extra += fmt::format("g={},", opt_.groups);
  return fmt::format("conv2d(in={},out={},k={},s={},p={},{}bias={})", opt_.in, opt_.out, opt_.kernel, opt_.stride,
                     opt_.pad, extra, opt_.bias ? 1 : 0);
}

Dims Conv2d::out_shape(const Dims& in) const {
  if (in.size() != 4 || in[1] != opt_.in)
    throw std::invalid_argument(fmt::format("{}: expects (N, {}, H, W) input, got {}", name(), opt_.in, dims_str(in)));
  // A dilated kernel spans dilation * (k - 1) + 1 input rows and columns.
  const std::int64_t span = static_cast<std::int64_t>(opt_.dilation) * (opt_.kernel - 1) + 1;
  const std::int64_t ph = in[2] + 2 * opt_.pad, pw = in[3] + 2 * opt_.pad;
  if (ph < span || pw < span)
    throw std::invalid_argument(fmt::format("{}: input {}x{} is smaller than the {}x{} kernel (padding {}, dilation {})",
                                            name(), in[2], in[3], span, span, opt_.pad, opt_.dilation));
  return {in[0], opt_.out, (ph - span) / opt_.stride + 1, (pw - span) / opt_.stride + 1};
}

double Conv2d::flops_per_image(const Dims& in) const {
  const Dims out = out_shape(in);
  // Each output sees in / groups channels.
  return 2.0 * static_cast<double>(out[1] * out[2] * out[3]) * (opt_.in / opt_.groups) * opt_.kernel * opt_.kernel;
}

std::vector<ParamSpec> Conv2d::param_specs() const {
  const int in_per_group = opt_.in / opt_.groups, k = opt_.kernel;
  const std::int64_t fan_in = static_cast<std::int64_t>(in_per_group) * k * k;
  std::vector<ParamSpec> specs{{"weight", {opt_.out, in_per_group, k, k}, ParamKind::kWeight, fan_in}};
  if (opt_.bias) specs.push_back({"bias", {opt_.out}, ParamKind::kBias, fan_in});
  return specs;
}

memory::dims Conv2d::weights_dims() const {
  const int g = opt_.groups, k = opt_.kernel;
  if (g == 1) return {opt_.out, opt_.in, k, k};
  return {g, opt_.out / g, opt_.in / g, k, k};
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
  std::unique_ptr<winograd::Conv3x3> wino;     // set: the layer runs on it, none of the above
  std::unique_ptr<pixelpair::Conv3x3> pairs;  // likewise
  int onednn_wino_passes = 0;                 // of fwd, bwd_data, bwd_weights, on oneDNN's Winograd
};

namespace {

float* floats(const memory& m) { return static_cast<float*>(m.get_data_handle()); }

// Converts the arena's weights into an own kernel's form (w: winograd:: or pixelpair::Weights)
// unless they are unchanged since version `at` (valid: converted since the last build);
// counts the conversions.
template <class OwnWeights>
void convert_if_changed(OwnWeights& w, const float* weights, const ParamsVersion& version, std::uint64_t& at,
                        bool& valid, std::uint64_t& conversions) {
  if (valid && version.unchanged_since(at)) return;
  w.set(weights);
  at = version.value;
  valid = true;
  ++conversions;
}

}  // namespace

bool Conv2d::winograd_applies() const {
  return compute_type() == memory::data_type::f32 &&
         winograd::applies(opt_.in, opt_.out, opt_.kernel, opt_.stride, opt_.pad, opt_.dilation, opt_.groups) &&
         conv::winograd_enabled();
}

bool Conv2d::winograd() const { return static_cast<const ConvState&>(state()).wino != nullptr; }

bool Conv2d::pixel_pairs_apply(std::int64_t h, std::int64_t w) const {
  return compute_type() == memory::data_type::f32 &&
         pixelpair::applies(opt_.in, opt_.out, opt_.kernel, opt_.stride, opt_.pad, opt_.dilation, opt_.groups, h,
                            w) &&
         conv::pixel_pairs_enabled();
}

bool Conv2d::pixel_pairs() const { return static_cast<const ConvState&>(state()).pairs != nullptr; }

bool Conv2d::onednn_winograd_wanted() const {
  const Options& o = opt_;
  return compute_type() == memory::data_type::f32 && o.kernel == 3 && o.stride == 1 && o.dilation == 1 &&
         o.groups == 1 && o.in >= 64 && o.out >= 64 && conv::onednn_winograd_isa() && conv::winograd_allowed();
}

int Conv2d::onednn_winograd_passes() const { return static_cast<const ConvState&>(state()).onednn_wino_passes; }

bool Conv2d::build_own(ConvState& s, const Dims& in, const Dims& out, Phase phase, bool need_diff_src) {
  const winograd::Shape wino_shape{in[0], opt_.in, opt_.out, in[2], in[3]};
  // On an image of at most 2x2 pixels pixel pairs first, whatever the batch: Winograd would
  // spend 36 multiplies per channel pair on each image's one tile, the pairs 16 or fewer.
  if (pixel_pairs_apply(in[2], in[3])) {
    s.pairs = std::make_unique<pixelpair::Conv3x3>(pixelpair::Shape{in[0], opt_.in, opt_.out, in[2], in[3]});
    if (!pair_weights_) pair_weights_ = std::make_shared<pixelpair::Weights>(opt_.in, opt_.out);
    pair_valid_ = false;  // the parameters may have been bound anew
  } else if (winograd_applies() && winograd::worthwhile(wino_shape)) {
    s.wino = std::make_unique<winograd::Conv3x3>(wino_shape);
    if (!wino_weights_) wino_weights_ = std::make_shared<winograd::Weights>(opt_.in, opt_.out);
    wino_valid_ = false;  // the parameters may have been bound anew
  } else {
    return false;
  }
  s.src_md = memory::desc({in.begin(), in.end()}, memory::data_type::f32, tag::nChw8c);
  s.dst_md = memory::desc({out.begin(), out.end()}, memory::data_type::f32, tag::nChw8c);
  if (opt_.bias) s.bias = memory(memory::desc({opt_.out}, memory::data_type::f32, tag::x), engine(), params_[1].data());
  if (phase != Phase::kTrain) return true;
  s.diff_dst_md = s.dst_md;
  if (need_diff_src) s.diff_src_md = s.src_md;
  return true;
}

std::unique_ptr<Layer::State> Conv2d::build(const memory::desc& in_md, Phase phase, bool need_diff_src) {
  const Dims in = md_dims(in_md);
  const Dims out = out_shape(in);
  auto s = std::make_unique<ConvState>();
  if (build_own(*s, in, out, phase, need_diff_src)) return s;
  auto& eng = engine();
  // Dilation 1 gives oneDNN dilates 0: the same descriptor as the undilated constructors.
  const conv::Geometry geo{{opt_.stride, opt_.stride}, {opt_.dilation - 1, opt_.dilation - 1}, {opt_.pad, opt_.pad}};
  const memory::dims src_dims(in.begin(), in.end()), dst_dims(out.begin(), out.end()), w_dims = weights_dims();
  const auto f32 = memory::data_type::f32, type = compute_type();
  const memory::desc src_any(src_dims, type, tag::any), dst_any(dst_dims, type, tag::any),
      w_any(w_dims, type, tag::any), dw_any(w_dims, f32, tag::any), b_md({opt_.out}, f32, tag::x), no_md;
  const memory::desc& bias_md = opt_.bias ? b_md : no_md;

  // forward_training in eval too: oneDNN 2.6's forward_inference picks brgconv/nhwc, slower than
  // jit nChw16c (nn_bench eval, 1 thread: lenet5 b64 ~1.3-2x, vgg11 b32 ~1.2x); no workspace.
  const dnnl::primitive_attr attr = conv::relu_attr(relu_post_op());
  const auto alg = onednn_winograd_wanted() ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
  const auto fwd_pd = conv::winograd_or_direct(
      alg,
      [&](dnnl::algorithm a, bool allow_empty) {
        const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, a, src_any, w_any, bias_md, dst_any,
                                                geo.strides, geo.dilates, geo.pad, geo.pad);
        return dnnl::convolution_forward::primitive_desc(d, attr, eng, allow_empty);
      },
      s->onednn_wino_passes);
  s->fwd = dnnl::convolution_forward(fwd_pd);
  s->src_md = fwd_pd.src_desc();
  s->dst_md = fwd_pd.dst_desc();

  // Grouped weights are 5-D for oneDNN; Layer::weight_copy views the arena's row-major
  // (O, I/G, KH, KW) as (G, O/G, I/G, KH, KW), the same floats.
  s->weights = weight_copy(0, fwd_pd.weights_desc());
  if (opt_.bias) s->bias = memory(b_md, eng, params_[1].data());
  if (phase != Phase::kTrain) return s;

  // Backward pds take the forward pd as hint so they agree on layouts where they can.
  // The layer's diff_dst is declared in the forward dst layout: the layers after a conv
  // (ReLU, pooling, BN) produce their diff_src in the layout of their forward src.
  s->diff_dst_md = s->dst_md;
  const auto bww_pd =
      conv::backward_weights_pd(alg, s->src_md, s->dst_md, dw_any, bias_md, geo, fwd_pd, s->onednn_wino_passes);
  s->bwd_weights = dnnl::convolution_backward_weights(bww_pd);
  s->bwd_weights_src_md = bww_pd.src_desc();
  conv::reorder_if_needed(s->src_md, s->bwd_weights_src_md, s->bwd_weights_src, s->to_bwd_weights_src);
  s->bwd_weights_diff_dst_md = bww_pd.diff_dst_desc();
  conv::reorder_if_needed(s->diff_dst_md, s->bwd_weights_diff_dst_md, s->bwd_weights_diff_dst, s->to_bwd_weights_diff_dst);
  const memory user_dw(plain_md(Dims(w_dims.begin(), w_dims.end())), eng, grads_[0].data());
  s->diff_weights = ReorderedMemory(user_dw, bww_pd.diff_weights_desc());
  if (opt_.bias) s->diff_bias = memory(b_md, eng, grads_[1].data());

  if (need_diff_src) {
    const auto bwd_pd = conv::winograd_or_direct(
        alg,
        [&](dnnl::algorithm a, bool allow_empty) {
          const dnnl::convolution_backward_data::desc d(a, src_any, w_any, dst_any, geo.strides, geo.dilates, geo.pad,
                                                        geo.pad);
          return dnnl::convolution_backward_data::primitive_desc(d, eng, fwd_pd, allow_empty);
        },
        s->onednn_wino_passes);
    s->bwd_data = dnnl::convolution_backward_data(bwd_pd);
    s->diff_src_md = bwd_pd.diff_src_desc();
    s->bwd_data_diff_dst_md = bwd_pd.diff_dst_desc();
    conv::reorder_if_needed(s->diff_dst_md, s->bwd_data_diff_dst_md, s->bwd_data_diff_dst, s->to_bwd_data_diff_dst);
    s->bwd_data_weights = weight_copy(0, bwd_pd.weights_desc(), s->weights);
  }
  return s;
}

void Conv2d::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<ConvState&>(base);
  if (s.wino) {
    convert_if_changed(*wino_weights_, params_[0].data(), params_version(), wino_version_, wino_valid_,
                       own_conversions_);
    s.wino->forward(*wino_weights_, floats(src), floats(dst), opt_.bias ? params_[1].data() : nullptr,
                    relu_post_op());
    return;
  }
  if (s.pairs) {
    convert_if_changed(*pair_weights_, params_[0].data(), params_version(), pair_version_, pair_valid_,
                       own_conversions_);
    s.pairs->forward(*pair_weights_, floats(src), floats(dst), opt_.bias ? params_[1].data() : nullptr,
                     relu_post_op());
    return;
  }
  refresh(*s.weights);
  // Converted now rather than in backward: its source, the copy just refreshed, is in cache.
  if (s.bwd_data_weights) refresh(*s.bwd_data_weights);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s.weights->get()}, {DNNL_ARG_DST, dst}};
  if (opt_.bias) args[DNNL_ARG_BIAS] = s.bias;
  s.fwd.execute(stream(), args);
}

void Conv2d::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<ConvState&>(base);
  // On an own kernel: the forward converted the weights at their current version, and
  // backward-data uses them.
  const auto own = [&](const auto& conv, const auto& weights) {
    if (s.need_diff_src) conv.backward_data(weights, floats(diff_dst), floats(diff_src));
    conv.backward_weights(floats(s.src), floats(diff_dst), grads_[0].data(), opt_.bias ? grads_[1].data() : nullptr);
  };
  if (s.wino) return own(*s.wino, *wino_weights_);
  if (s.pairs) return own(*s.pairs, *pair_weights_);
  auto& strm = stream();
  if (s.need_diff_src) {
    // Converted in forward already (the parameters have not changed since): a version check.
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
  if (opt_.bias) args[DNNL_ARG_DIFF_BIAS] = s.diff_bias;
  s.bwd_weights.execute(strm, args);
  s.diff_weights.push();
}

Layer::StepReorders Conv2d::step_reorders() const {
  if (!current_) return {};
  const auto& s = static_cast<const ConvState&>(*current_);
  StepReorders r;
  if (s.wino || s.pairs) {  // the weights' conversion, like a reorder into a blocked copy
    r.weights = 1;
    if (s.pairs && s.phase == Phase::kTrain) r.weights += 1;  // and the gradient's back into the arena
    return r;
  }
  for (const dnnl::reorder* p : {&s.to_bwd_data_diff_dst, &s.to_bwd_weights_diff_dst, &s.to_bwd_weights_src})
    r.activations += *p ? 1 : 0;
  r.weights += s.weights->reorders() ? 1 : 0;
  if (s.bwd_data_weights && s.bwd_data_weights != s.weights) r.weights += s.bwd_data_weights->reorders() ? 1 : 0;
  if (s.phase == Phase::kTrain) r.weights += s.diff_weights.needs_reorder() ? 1 : 0;
  return r;
}

std::size_t Conv2d::state_bytes() const {
  if (!current_) return 0;
  const auto& s = static_cast<const ConvState&>(*current_);
  if (s.wino) return wino_weights_->bytes();
  if (s.pairs) return pair_weights_->bytes();
  std::size_t bytes = 0;
  for (const memory* m : {&s.bwd_data_diff_dst, &s.bwd_weights_diff_dst, &s.bwd_weights_src})
    if (*m) bytes += m->get_desc().get_size();
  return bytes;
}

std::uint64_t Conv2d::weight_conversions() const noexcept { return Layer::weight_conversions() + own_conversions_; }

}  // namespace ringtrain
