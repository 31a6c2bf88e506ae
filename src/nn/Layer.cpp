// Layer's per-layout state cache and the plain-layout helpers.
#include "nn/Layer.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "nn/DnnlContext.h"

namespace ringtrain {

using dnnl::memory;

Layer::~Layer() = default;

double Layer::flops_per_image(const Dims&) const { return 0.0; }

void Layer::bind_params(std::vector<Tensor> params, std::vector<Tensor> grads, const ParamsVersion* params_version) {
  const auto specs = param_specs();
  if (params.size() != specs.size() || grads.size() != specs.size())
    throw std::invalid_argument(
        fmt::format("{}: expected {} parameter tensors, got {}", name_, specs.size(), params.size()));
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (params[i].dims() != specs[i].dims || grads[i].dims() != specs[i].dims)
      throw std::invalid_argument(fmt::format("{}.{}: expected shape {}, got {}", name_, specs[i].suffix,
                                              dims_str(specs[i].dims), dims_str(params[i].dims())));
  params_ = std::move(params);
  grads_ = std::move(grads);
  version_source_ = params_version;
  states_.clear();  // cached primitives and weight copies point at the old arenas
  weight_copies_.clear();
  current_ = nullptr;
}

std::shared_ptr<WeightCopy> Layer::weight_copy(std::size_t i, const memory::desc& wanted,
                                               const std::shared_ptr<WeightCopy>& from) {
  for (const auto& [index, copy] : weight_copies_)
    if (index == i && copy->get().get_desc() == wanted) return copy;
  // vgg11 in bf16, one thread: backward-data's weights reordered from the forward's bf16 copy
  // instead of the fp32 arena took 0.69 instead of 1.28 ms for a 512x512x3x3 convolution
  // (ABcd8b16a2b -> ABcd8a16b2a, best of 7, loaded machine). In fp32 likewise from the
  // forward's blocked copy (AVX2: ABcd8b8a -> ABcd8a8b 0.56 ms against 1.08 ms from the plain
  // arena, same convolution, thread CPU time): a permutation of the same floats either way.
  const auto bf16 = memory::data_type::bf16;
  const bool same_type = from && from->get().get_desc().data_type() == wanted.data_type();
  if (same_type && (wanted.data_type() == bf16 || from->reorders())) {
    weight_copies_.emplace_back(i, std::make_shared<WeightCopy>(from, wanted));
  } else {
    // The arena row-major in the primitive's dims, when they differ but hold as many floats:
    // a grouped convolution's (G, O/G, I/G, KH, KW) weights are its (O, I/G, KH, KW) floats.
    Dims dims = params_.at(i).dims();
    if (const Dims wanted_dims = md_dims(wanted); wanted_dims != dims && numel(wanted_dims) == numel(dims))
      dims = wanted_dims;
    const memory user(plain_md(dims), engine(), params_[i].data());
    weight_copies_.emplace_back(i, std::make_shared<WeightCopy>(user, wanted));
  }
  return weight_copies_.back().second;
}

void Layer::refresh(WeightCopy& w) const { w.refresh(params_version()); }

void Layer::params_updated(const float* begin, const float* end) {
  if (version_source_ == nullptr) return;  // no versions to mark: every forward converts anyway
  for (const auto& [i, copy] : weight_copies_) {
    if (!copy->narrows()) continue;
    const float* p = params_[i].data();
    const float* lo = std::max(begin, p);
    const float* hi = std::min(end, p + params_[i].numel());
    if (lo < hi) {
      copy->narrow_part(static_cast<std::size_t>(lo - p), static_cast<std::size_t>(hi - lo), *version_source_);
    }
  }
}

std::uint64_t Layer::weight_conversions() const noexcept {
  std::uint64_t n = 0;
  for (const auto& entry : weight_copies_) n += entry.second->conversions();
  return n;
}

void Layer::prepare(const memory::desc& src_md, Phase phase, bool need_diff_src) {
  if (current_ && current_->key == src_md && current_->phase == phase && current_->need_diff_src == need_diff_src)
    return;
  for (auto& s : states_) {
    if (s->key == src_md && s->phase == phase && s->need_diff_src == need_diff_src) {
      current_ = s.get();
      return;
    }
  }
  if (params_.size() != param_specs().size())
    throw std::logic_error(fmt::format("{}: prepare() before bind_params()", name_));
  auto s = build(with_type(src_md, compute_type_), phase, need_diff_src);
  s->key = src_md;
  s->phase = phase;
  s->need_diff_src = need_diff_src;
  current_ = s.get();
  states_.push_back(std::move(s));
}

void Layer::set_compute_type(memory::data_type type) {
  if (type != memory::data_type::f32 && type != memory::data_type::bf16)
    throw std::invalid_argument(fmt::format("{}: compute type must be f32 or bf16", name_));
  compute_type_ = type;
  states_.clear();
  weight_copies_.clear();
  current_ = nullptr;
}

void Layer::set_relu_post_op(bool on) {
  if (on && relu_fusion() == ReluFusion::kNone) throw std::logic_error(fmt::format("{}: cannot apply a ReLU to its output", name_));
  if (on == relu_post_op_) return;
  relu_post_op_ = on;
  states_.clear();  // primitives built with or without the post-op
  current_ = nullptr;
}

Layer::State& Layer::state() const {
  if (!current_) throw std::logic_error(fmt::format("{}: used before prepare()", name_));
  return *current_;
}

void Layer::forward(const memory& src, const memory& dst, Phase phase, std::uint64_t seed) {
  State& s = state();
  if (s.phase != phase) throw std::logic_error(fmt::format("{}: forward in a phase it was not prepared for", name_));
  s.src = src;
  s.dst = dst;
  if (!version_source_) ++own_version_.value;
  run_forward(s, src, dst, seed);
}

void Layer::backward(const memory& diff_dst, const memory& diff_src) {
  State& s = state();
  if (s.phase != Phase::kTrain || !s.src)
    throw std::logic_error(fmt::format("{}: backward needs a preceding train-phase forward", name_));
  run_backward(s, diff_dst, diff_src);
}

Dims Layer::out_shape_of(const std::vector<Dims>& in) const {
  if (in.size() != 1) throw std::invalid_argument(fmt::format("{}: takes one input, got {}", name_, in.size()));
  return out_shape(in[0]);
}

void Layer::prepare_inputs(const std::vector<memory::desc>& src_mds, Phase phase, bool need_diff_src) {
  prepare(src_mds.at(0), phase, need_diff_src);
}

const memory::desc& Layer::input_md(std::size_t) const { return src_md(); }
const memory::desc& Layer::diff_input_md(std::size_t) const { return diff_src_md(); }

void Layer::forward_inputs(const std::vector<memory>& srcs, const memory& dst, Phase phase, std::uint64_t seed) {
  forward(srcs.at(0), dst, phase, seed);
}

void Layer::backward_inputs(const memory& diff_dst, const std::vector<memory>& diff_srcs) {
  backward(diff_dst, diff_srcs.empty() ? memory() : diff_srcs[0]);
}

dnnl::engine& Layer::engine() { return DnnlContext::get().engine(); }
dnnl::stream& Layer::stream() { return DnnlContext::get().stream(); }

memory::desc plain_md(const Dims& dims, memory::data_type type) {
  using tag = memory::format_tag;
  static const tag tags[] = {tag::undef, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  if (dims.empty() || dims.size() > 5)
    throw std::invalid_argument(fmt::format("plain_md: unsupported rank {}", dims.size()));
  return memory::desc(memory::dims(dims.begin(), dims.end()), type, tags[dims.size()]);
}

memory::desc with_type(const memory::desc& md, memory::data_type type) {
  if (md.data_type() == type) return md;
  memory::desc out = md;
  out.data.data_type = static_cast<dnnl_data_type_t>(type);
  return out;
}

Dims md_dims(const memory::desc& md) {
  const auto d = md.dims();
  return Dims(d.begin(), d.end());
}

bool is_plain(const memory::desc& md) { return md == plain_md(md_dims(md), md.data_type()); }

ReorderedMemory::ReorderedMemory(const memory& user, const memory::desc& wanted) : user_(user) {
  if (user.get_desc() == wanted) {
    internal_ = user;
  } else {
    internal_ = memory(wanted, DnnlContext::get().engine());
    to_internal_ = dnnl::reorder(user_, internal_);
    to_user_ = dnnl::reorder(internal_, user_);
  }
}

void ReorderedMemory::pull() {
  if (to_internal_) to_internal_.execute(DnnlContext::get().stream(), user_, internal_);
}

void ReorderedMemory::push() {
  if (to_user_) to_user_.execute(DnnlContext::get().stream(), internal_, user_);
}

}  // namespace ringtrain
