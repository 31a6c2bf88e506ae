// Model: the zoo's layers over flat parameter / gradient / buffer arenas, with one cached
// execution plan (activation memories and boundary reorders) per (batch size, phase).
#include "nn/Model.h"

#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "common/Random.h"
#include "common/VectorState.h"
#include "nn/DnnlContext.h"
#include "nn/Layer.h"
#include "nn/ModelZoo.h"
#include "nn/SoftmaxCrossEntropy.h"
#include "nn/Tensor.h"

namespace ringtrain {

using dnnl::memory;

namespace {

// Activations of one (batch size, phase). Boundary b is the input of layer b (b = L: the
// logits). prod[b] is what layer b-1 wrote, cons[b] what layer b reads; they are the same
// memory unless the layouts differ, in which case reorder[b] copies prod -> cons.
// Backward mirrors it: dprod[b] is layer b's diff_src, dcons[b] layer b-1's diff_dst.
struct Plan {
  int n = 0;
  Phase phase = Phase::kTrain;
  memory input;  // user's plain (n, C, H, W), handle set per forward
  std::vector<memory> prod, cons, dprod, dcons;
  std::vector<dnnl::reorder> reorder, dreorder;  // empty handle: no reorder
  memory logits;                                 // plain (n, classes)
  dnnl::reorder logits_reorder;
  memory diff_logits;  // plain (n, classes), written by the loss
};

}  // namespace

struct Model::Impl {
  std::string name;
  ImageShape input;
  int classes = 0;
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<Dims> shapes;  // shapes[b]: activation at boundary b for N = 1
  // Layer i must propagate diff_src only if a layer before it has parameters (the MLP's
  // first Linear follows Flatten: its backward-data would be 20% of the step for nothing).
  std::vector<bool> need_diff_src;
  Tensor params, grads, buffers;
  std::vector<ParamInfo> infos;
  std::vector<std::int64_t> fan_ins;                        // per info
  std::vector<std::pair<std::size_t, std::size_t>> ranges;  // per layer: arena offset, count
  SoftmaxCrossEntropy loss;
  std::vector<std::unique_ptr<Plan>> plans;
  Plan* last = nullptr;  // plan of the last forward
  bool can_backward = false;
  Precision precision = Precision::kFp32;
  // Whether the parameters may have changed (ParamsSpan, init()): the layers' weight copies
  // (bf16, blocked layouts) are converted once per change.
  ParamsVersion params_version;

  Plan& plan_for(int n, Phase phase);
};

Plan& Model::Impl::plan_for(int n, Phase phase) {
  for (auto& p : plans)
    if (p->n == n && p->phase == phase) return *p;
  auto& eng = DnnlContext::get().engine();
  auto p = std::make_unique<Plan>();
  p->n = n;
  p->phase = phase;
  const std::size_t L = layers.size();
  p->prod.resize(L + 1);
  p->cons.resize(L + 1);
  p->reorder.resize(L + 1);
  const Dims in{n, input.channels, input.height, input.width};
  p->input = memory(plain_md(in), eng, DNNL_MEMORY_NONE);
  p->prod[0] = p->input;
  for (std::size_t i = 0; i < L; ++i) {
    Layer& layer = *layers[i];
    layer.prepare(p->prod[i].get_desc(), phase, need_diff_src[i]);
    // The user's input is always copied in (reordered if the first layer wants another
    // layout), so no layer ever writes into the caller's buffer.
    if (i == 0 || layer.src_md() != p->prod[i].get_desc()) {
      p->cons[i] = memory(layer.src_md(), eng);
      p->reorder[i] = dnnl::reorder(p->prod[i], p->cons[i]);
    } else {
      p->cons[i] = p->prod[i];
    }
    // In place only if that destroys nothing backward needs: the previous layer's dst
    // when it reads it (and the reorder's copy is private anyway).
    const bool overwrites_prev = i > 0 && !p->reorder[i] && layers[i - 1]->needs_dst_in_backward();
    const bool in_place =
        layer.in_place() && !overwrites_prev && layer.dst_md().get_size() == layer.src_md().get_size();
    p->prod[i + 1] = in_place ? memory(layer.dst_md(), eng, p->cons[i].get_data_handle()) : memory(layer.dst_md(), eng);
  }
  const memory::desc logits_md = plain_md({n, classes});
  if (p->prod[L].get_desc() == logits_md) {
    p->logits = p->prod[L];
  } else {
    p->logits = memory(logits_md, eng);
    p->logits_reorder = dnnl::reorder(p->prod[L], p->logits);
  }
  if (phase == Phase::kTrain) {
    p->dprod.resize(L + 1);
    p->dcons.resize(L + 1);
    p->dreorder.resize(L + 1);
    p->diff_logits = memory(logits_md, eng);
    p->dprod[L] = p->diff_logits;
    for (std::size_t b = L; b >= 1; --b) {
      // dcons[b]: what layer b-1 reads as diff_dst.
      const memory::desc want = layers[b - 1]->diff_dst_md();
      if (want == p->dprod[b].get_desc()) {
        p->dcons[b] = p->dprod[b];
      } else {
        p->dcons[b] = memory(want, eng);
        p->dreorder[b] = dnnl::reorder(p->dprod[b], p->dcons[b]);
      }
      // dprod[b-1]: layer b-1's diff_src (none for the first layer).
      if (!need_diff_src[b - 1]) break;
      Layer& layer = *layers[b - 1];
      const bool in_place = layer.in_place() && layer.diff_src_md().get_size() == want.get_size();
      p->dprod[b - 1] =
          in_place ? memory(layer.diff_src_md(), eng, p->dcons[b].get_data_handle()) : memory(layer.diff_src_md(), eng);
    }
  }
  plans.push_back(std::move(p));
  return *plans.back();
}

Model::Model(const std::string& name, ImageShape input, int classes) : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.name = name;
  m.input = input;
  m.classes = classes;
  m.layers = build_zoo_layers(name, input, classes);
  m.shapes.push_back({1, input.channels, input.height, input.width});
  bool params_before = false;
  for (auto& layer : m.layers) {
    m.shapes.push_back(layer->out_shape(m.shapes.back()));
    m.need_diff_src.push_back(params_before);
    params_before = params_before || !layer->param_specs().empty();
  }
  if (m.shapes.back() != Dims{1, classes})
    throw std::invalid_argument(
        fmt::format("model {}: ends in shape {}, expected (1, {})", name, dims_str(m.shapes.back()), classes));

  // Arena layout: layers in reverse order, each layer's tensors in its own order.
  std::size_t total = 0, total_buffers = 0;
  m.ranges.assign(m.layers.size(), {0, 0});
  for (std::size_t i = m.layers.size(); i-- > 0;) {
    const std::size_t start = total;
    for (const auto& spec : m.layers[i]->param_specs()) {
      m.infos.push_back(
          {m.layers[i]->name() + "." + spec.suffix, total, numel(spec.dims), spec.kind, static_cast<int>(i)});
      m.fan_ins.push_back(spec.fan_in);
      total += numel(spec.dims);
    }
    m.ranges[i] = {start, total - start};
  }
  for (auto& layer : m.layers) total_buffers += layer->num_buffers();
  m.params = Tensor(Dims{static_cast<std::int64_t>(total)});
  m.grads = Tensor(Dims{static_cast<std::int64_t>(total)});
  m.buffers = Tensor(Dims{static_cast<std::int64_t>(total_buffers)});

  std::size_t info = 0, buffer_offset = 0;
  std::vector<std::vector<Tensor>> layer_params(m.layers.size()), layer_grads(m.layers.size());
  for (std::size_t i = m.layers.size(); i-- > 0;) {
    for (const auto& spec : m.layers[i]->param_specs()) {
      const std::size_t off = m.infos[info++].offset;
      layer_params[i].push_back(Tensor::view(m.params.data() + off, spec.dims));
      layer_grads[i].push_back(Tensor::view(m.grads.data() + off, spec.dims));
    }
  }
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    m.layers[i]->bind_params(std::move(layer_params[i]), std::move(layer_grads[i]), &m.params_version);
    m.layers[i]->bind_buffers(m.buffers.data() + buffer_offset);
    buffer_offset += m.layers[i]->num_buffers();
  }
  init(0);
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

void Model::init(std::uint64_t seed) {
  auto& m = *impl_;
  // The weight layer nearest the loss feeds softmax, not a ReLU: gain 1 instead of sqrt(2).
  const int last_weight_layer = m.infos.empty() ? -1 : m.infos.front().layer;
  for (std::size_t k = 0; k < m.infos.size(); ++k) {
    const ParamInfo& p = m.infos[k];
    float* w = m.params.data() + p.offset;
    switch (p.kind) {
      case ParamKind::kWeight: {
        // He et al. 2015 (Kaiming) uniform: U(-b, b), b = gain * sqrt(3 / fan_in), gain sqrt(2)
        // for ReLU, giving Var = 2 / fan_in. (PyTorch's default uses a = sqrt(5), i.e.
        // b = 1 / sqrt(fan_in); we follow the paper, as the model's header promises.)
        const double gain = p.layer == last_weight_layer ? 1.0 : std::sqrt(2.0);
        const auto bound = static_cast<float>(gain * std::sqrt(3.0 / static_cast<double>(m.fan_ins[k])));
        Rng rng(derive_seed(seed, {static_cast<std::uint64_t>(RngPurpose::kInit), k}));
        for (std::size_t j = 0; j < p.count; ++j) w[j] = rng.uniform(-bound, bound);
        break;
      }
      case ParamKind::kNormScale:
        std::fill(w, w + p.count, 1.0f);
        break;
      case ParamKind::kBias:
      case ParamKind::kNormShift:
        std::fill(w, w + p.count, 0.0f);
        break;
    }
  }
  for (auto& layer : m.layers) layer->reset_buffers();
  ++m.params_version.value;
}

void Model::set_precision(Precision precision) {
  auto& m = *impl_;
  m.plans.clear();
  m.last = nullptr;
  m.can_backward = false;
  m.precision = precision;
  for (auto& layer : m.layers) layer->set_compute_type(compute_type(precision));
}

Precision Model::precision() const noexcept { return impl_->precision; }

const std::string& Model::name() const noexcept { return impl_->name; }
ImageShape Model::input_shape() const noexcept { return impl_->input; }
int Model::classes() const noexcept { return impl_->classes; }
ParamsSpan Model::params() noexcept { return {impl_->params.span(), impl_->params_version}; }
void Model::params_updated(std::size_t offset, std::size_t count) {
  auto& m = *impl_;
  if (m.precision != Precision::kBf16) return;
  const float* begin = m.params.data() + offset;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto [start, n] = m.ranges[i];
    if (start < offset + count && offset < start + n) m.layers[i]->params_updated(begin, begin + count);
  }
}
std::span<float> Model::grads() noexcept { return impl_->grads.span(); }
std::span<float> Model::buffers() noexcept { return impl_->buffers.span(); }
std::span<const float> Model::params() const noexcept { return impl_->params.span(); }
std::span<const float> Model::buffers() const noexcept { return impl_->buffers.span(); }
std::size_t Model::num_params() const noexcept { return impl_->params.numel(); }
const std::vector<ParamInfo>& Model::param_infos() const noexcept { return impl_->infos; }

std::string Model::signature() const {
  const auto& m = *impl_;
  std::string s =
      fmt::format("model {} input {} classes {} params {}\n", m.name, m.input.str(), m.classes, m.params.numel());
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    s += fmt::format("{} {} {} {} -> {}\n", i, m.layers[i]->name(), m.layers[i]->describe(),
                     dims_str(Dims(m.shapes[i].begin() + 1, m.shapes[i].end())),
                     dims_str(Dims(m.shapes[i + 1].begin() + 1, m.shapes[i + 1].end())));
  return s;
}

std::size_t Model::num_layers() const noexcept { return impl_->layers.size(); }

const Layer& Model::layer(std::size_t i) const { return *impl_->layers.at(i); }

Dims Model::layer_input_dims(std::size_t i) const { return impl_->shapes.at(i); }

double Model::flops_per_image() const {
  double f = 0.0;
  for (std::size_t i = 0; i < impl_->layers.size(); ++i) f += impl_->layers[i]->flops_per_image(impl_->shapes[i]);
  return f;
}

LossResult Model::forward(const float* src, const std::int32_t* labels, int n, Phase phase, std::uint64_t noise_seed) {
  auto& m = *impl_;
  if (n <= 0) throw std::invalid_argument(fmt::format("model {}: forward of an empty batch", m.name));
  Plan& p = m.plan_for(n, phase);
  auto& strm = DnnlContext::get().stream();
  p.input.set_data_handle(const_cast<float*>(src));  // only ever read (reordered into cons[0])
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (p.reorder[i]) p.reorder[i].execute(strm, p.prod[i], p.cons[i]);
    m.layers[i]->prepare(p.prod[i].get_desc(), phase, m.need_diff_src[i]);  // selects this plan's state
    const std::uint64_t seed = derive_seed(noise_seed, {static_cast<std::uint64_t>(RngPurpose::kDropout), i});
    m.layers[i]->forward(p.cons[i], p.prod[i + 1], phase, seed);
  }
  if (p.logits_reorder) p.logits_reorder.execute(strm, p.prod.back(), p.logits);
  strm.wait();
  clear_upper_vector_state();  // the loss and the caller's code may be baseline SSE (see backward)
  m.last = &p;
  m.can_backward = phase == Phase::kTrain;
  return m.loss.forward(static_cast<const float*>(p.logits.get_data_handle()), labels, n, m.classes);
}

void Model::backward(const GradReadyFn& on_ready) {
  auto& m = *impl_;
  if (!m.can_backward) throw std::logic_error(fmt::format("model {}: backward without a train-phase forward", m.name));
  Plan& p = *m.last;
  auto& strm = DnnlContext::get().stream();
  m.loss.backward(static_cast<float*>(p.diff_logits.get_data_handle()));
  for (std::size_t i = m.layers.size(); i-- > 0;) {
    if (p.dreorder[i + 1]) p.dreorder[i + 1].execute(strm, p.dprod[i + 1], p.dcons[i + 1]);
    m.layers[i]->prepare(p.prod[i].get_desc(), Phase::kTrain, m.need_diff_src[i]);
    m.layers[i]->backward(p.dcons[i + 1], m.need_diff_src[i] ? p.dprod[i] : memory());
    if (on_ready && m.ranges[i].second > 0) {
      strm.wait();
      clear_upper_vector_state();  // as below, for the callback's code
      on_ready(m.ranges[i].first, m.ranges[i].second);
    }
    if (!m.need_diff_src[i]) break;  // nothing before layer i has parameters
  }
  strm.wait();
  // oneDNN 2.6.3's bf16 inner-product backward returns with the upper halves of the vector
  // registers in use (XINUSE after mlp's backward), and the optimizer's loop, compiled for the
  // x86-64 baseline, then ran 3.6x slower: 11.6 vs 3.2 ms per SGD step over mlp's 3.8 M
  // parameters, 3.9 ms with VZEROUPPER first (one thread, momentum 0.9, 160 steps).
  clear_upper_vector_state();
  m.can_backward = false;
}

std::span<const float> Model::logits() const noexcept {
  const auto& m = *impl_;
  if (!m.last) return {};
  return {static_cast<const float*>(m.last->logits.get_data_handle()),
          static_cast<std::size_t>(m.last->n) * static_cast<std::size_t>(m.classes)};
}

}  // namespace ringtrain
