// Linear on oneDNN inner product: forward, backward_data, backward_weights.
//
// Activations are plain (N, features). The weights are requested plain (O, I), straight
// in the arenas: with format_tag::any oneDNN 2.6 picks brgemm with blocked weights (e.g.
// AB16b64a), and the per-step weight reorders made the MLP 1.7x slower (nn_bench mlp
// 3x32x32 batch 32, one thread: ~1900 vs ~3280 images/s with plain weights, gemm:jit).
// WeightCopy still covers an implementation that insists on another layout. In bf16 the
// weights are a plain bf16 copy of the fp32 arena, narrowed (nn/WeightCopy) once per
// parameter change, and backward-weights writes fp32 gradients straight into the arena.
#include "nn/Linear.h"

#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

using dnnl::memory;
using tag = memory::format_tag;

Linear::Linear(std::string name, int in_features, int out_features, bool bias)
    : Layer(std::move(name)), in_features_(in_features), out_features_(out_features), bias_(bias) {
  if (in_features <= 0 || out_features <= 0)
    throw std::invalid_argument(
        fmt::format("{}: invalid linear sizes (in {}, out {})", this->name(), in_features, out_features));
}

std::string Linear::describe() const {
  return fmt::format("linear(in={},out={},bias={})", in_features_, out_features_, bias_ ? 1 : 0);
}

Dims Linear::out_shape(const Dims& in) const {
  if (in.size() != 2 || in[1] != in_features_)
    throw std::invalid_argument(fmt::format("{}: expects (N, {}) input, got {}", name(), in_features_, dims_str(in)));
  return {in[0], out_features_};
}

double Linear::flops_per_image(const Dims&) const { return 2.0 * in_features_ * out_features_; }

std::vector<ParamSpec> Linear::param_specs() const {
  std::vector<ParamSpec> specs{{"weight", {out_features_, in_features_}, ParamKind::kWeight, in_features_}};
  if (bias_) specs.push_back({"bias", {out_features_}, ParamKind::kBias, in_features_});
  return specs;
}

struct Linear::LinearState : State {
  dnnl::inner_product_forward fwd;
  dnnl::inner_product_backward_data bwd_data;
  dnnl::inner_product_backward_weights bwd_weights;
  std::shared_ptr<WeightCopy> weights, bwd_data_weights;  // one copy when the layouts agree
  ReorderedMemory diff_weights;
  memory bias, diff_bias;
};

std::unique_ptr<Layer::State> Linear::build(const memory::desc& in_md, Phase phase, bool need_diff_src) {
  const Dims in = md_dims(in_md);
  const Dims out = out_shape(in);
  auto s = std::make_unique<LinearState>();
  auto& eng = engine();
  const auto f32 = memory::data_type::f32, type = compute_type();
  const memory::desc src_md = plain_md(in, type), dst_md = plain_md(out, type), b_md({out_features_}, f32, tag::x),
                     no_md;
  const memory::dims w_dims{out_features_, in_features_};
  const memory::desc w_any(w_dims, type, tag::ab), dw_md(w_dims, f32, tag::ab);

  const auto prop = phase == Phase::kTrain ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::inner_product_forward::primitive_desc fwd_pd(
      dnnl::inner_product_forward::desc(prop, src_md, w_any, bias_ ? b_md : no_md, dst_md), eng);
  s->fwd = dnnl::inner_product_forward(fwd_pd);
  s->src_md = src_md;
  s->dst_md = dst_md;
  s->weights = weight_copy(0, fwd_pd.weights_desc());
  if (bias_) s->bias = memory(b_md, eng, params_[1].data());

  if (phase == Phase::kTrain) {
    s->diff_dst_md = dst_md;
    const dnnl::inner_product_backward_weights::primitive_desc bww_pd(
        dnnl::inner_product_backward_weights::desc(src_md, dw_md, bias_ ? b_md : no_md, dst_md), eng, fwd_pd);
    s->bwd_weights = dnnl::inner_product_backward_weights(bww_pd);
    const memory user_dw(plain_md(grads_[0].dims()), eng, grads_[0].data());
    s->diff_weights = ReorderedMemory(user_dw, bww_pd.diff_weights_desc());
    if (bias_) s->diff_bias = memory(b_md, eng, grads_[1].data());
    if (need_diff_src) {
      const dnnl::inner_product_backward_data::primitive_desc bwd_pd(
          dnnl::inner_product_backward_data::desc(src_md, w_any, dst_md), eng, fwd_pd);
      s->bwd_data = dnnl::inner_product_backward_data(bwd_pd);
      s->diff_src_md = src_md;
      s->bwd_data_weights = weight_copy(0, bwd_pd.weights_desc(), s->weights);
    }
  }
  return s;
}

void Linear::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t) {
  auto& s = static_cast<LinearState&>(base);
  refresh(*s.weights);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s.weights->get()}, {DNNL_ARG_DST, dst}};
  if (bias_) args[DNNL_ARG_BIAS] = s.bias;
  s.fwd.execute(stream(), args);
}

void Linear::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<LinearState&>(base);
  auto& strm = stream();
  if (s.need_diff_src) {
    refresh(*s.bwd_data_weights);
    s.bwd_data.execute(
        strm,
        {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, s.bwd_data_weights->get()}, {DNNL_ARG_DIFF_SRC, diff_src}});
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, s.src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, s.diff_weights.get()}};
  if (bias_) args[DNNL_ARG_DIFF_BIAS] = s.diff_bias;
  s.bwd_weights.execute(strm, args);
  s.diff_weights.push();
}

Layer::StepReorders Linear::step_reorders() const {
  if (!current_) return {};
  const auto& s = static_cast<const LinearState&>(*current_);
  StepReorders r;
  r.weights += s.weights->reorders() ? 1 : 0;
  if (s.bwd_data_weights && s.bwd_data_weights != s.weights) r.weights += s.bwd_data_weights->reorders() ? 1 : 0;
  if (s.phase == Phase::kTrain) r.weights += s.diff_weights.needs_reorder() ? 1 : 0;
  return r;
}

}  // namespace ringtrain
